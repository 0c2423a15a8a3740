package local

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// RunEnv names the variable every run's processes carry: the scope of the
// mozi that started it (its data directory) and the run. A mozi killed
// outright (SIGKILL, OOM) stops its agents through their parent-death
// signal, but a sandbox's inner process arms its own only after bwrap
// forked it: killed in between, it outlives mozi. The next start of the
// same mozi ends such processes by this mark, and only those.
const RunEnv = "MOZI_RUN"

// RunScope names the runs of the mozi working in stateDir.
func RunScope(stateDir string) string {
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		abs = stateDir
	}
	sum := sha256.Sum256([]byte(abs))
	return hex.EncodeToString(sum[:6])
}

// runMark is the value of RunEnv for one run.
func runMark(scope string, taskID int64, attempt int) string {
	return fmt.Sprintf("%s:%d-%d", scope, taskID, attempt)
}

// EndLeftoverRuns kills the processes an earlier life of this mozi (runs
// marked with scope) left behind, and returns their pids. Call it at start,
// before any run of this life begins. Processes of other users that this
// one may not read are not its runs' (its agents run as itself, or as the
// agents' user when it is root and reads everything).
func EndLeftoverRuns(scope string) ([]int, error) { return endMarked(scope, nil) }

// endLeftovers ends the processes of this mozi's scope that no run of
// this life started: an earlier life's, whenever the sweep runs.
func (b *Backend) endLeftovers() ([]int, error) {
	return endMarked(b.cfg.Scope, func(mark string) bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.live[mark]
	})
}

// endMarked kills the processes marked with scope, except those whose
// mark live says is a run of this life.
func endMarked(scope string, live func(mark string) bool) ([]int, error) {
	if scope == "" {
		return nil, errors.New("no run scope")
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("look for leftover runs: %w", err)
	}
	mark := []byte(RunEnv + "=" + scope + ":")
	self := os.Getpid()
	var ended []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		environ, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		value, found := markOf(environ, mark)
		if !found || live != nil && live(value) {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
			ended = append(ended, pid)
		}
	}
	return ended, nil
}

// markOf finds the variable starting with prefix in a NUL-separated
// environment and returns its value (the run's mark).
func markOf(environ, prefix []byte) (string, bool) {
	for _, kv := range bytes.Split(environ, []byte{0}) {
		if bytes.HasPrefix(kv, prefix) {
			return string(kv[len(RunEnv)+1:]), true
		}
	}
	return "", false
}
