//go:build !linux

package local

import "syscall"

// setParentDeathSignal is a no-op where the kernel has no parent-death
// signal.
func setParentDeathSignal(*syscall.SysProcAttr) {}
