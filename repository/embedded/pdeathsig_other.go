//go:build !linux

package embedded

import "syscall"

// setParentDeathSignal is a no-op where the kernel has no parent-death
// signal; the next start stops a postmaster left behind (stopOrphan).
func setParentDeathSignal(*syscall.SysProcAttr, syscall.Signal) {}
