package embedded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ErrInUse means another mozi process owns the state directory.
var ErrInUse = errors.New("data dir in use")

// lockStateDir takes an exclusive flock on S/mozi.lock. The kernel drops it
// when the process dies, however it dies, so a stale lock cannot exist.
func lockStateDir(stateDir string) (*os.File, error) {
	path := filepath.Join(stateDir, "mozi.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("embedded postgres: open %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			pid := strings.TrimSpace(string(holder))
			if pid == "" {
				pid = "unknown"
			}
			return nil, fmt.Errorf("embedded postgres: %w: %s is held by another mozi (pid %s): stop it or pass a different --data-dir",
				ErrInUse, stateDir, pid)
		}
		return nil, fmt.Errorf("embedded postgres: lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}
