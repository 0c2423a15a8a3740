package embedded

import "syscall"

// setParentDeathSignal makes the kernel send sig to a child if mozi dies
// without stopping it (SIGKILL, OOM), so that no postmaster or initdb is
// left behind.
func setParentDeathSignal(attr *syscall.SysProcAttr, sig syscall.Signal) {
	attr.Pdeathsig = sig
}
