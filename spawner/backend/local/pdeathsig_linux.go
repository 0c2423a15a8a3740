package local

import "syscall"

// setParentDeathSignal makes the kernel stop an agent whose mozi died
// without stopping it (SIGKILL, OOM): the task is rescued and run again, and
// must not run twice at once.
func setParentDeathSignal(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}
