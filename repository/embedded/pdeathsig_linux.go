package embedded

import "syscall"

// setParentDeathSignal makes the kernel ask PostgreSQL for a fast shutdown if
// mozi dies without stopping it (SIGKILL, OOM), so no postmaster is orphaned.
func setParentDeathSignal(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGINT
}
