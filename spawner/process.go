package spawner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moziplus/mozi/repository/task"
)

// Command is one agent process to run.
type Command struct {
	Argv  []string
	Dir   string
	Env   []string
	Stdin []byte // nil: /dev/null
	// LogPath receives everything the process writes (stdout and stderr).
	LogPath string
	// Timeout is the wall-clock limit; the whole process group is killed
	// (default DefaultTimeout, 30m).
	Timeout time.Duration
	// Usage names the output format to read token and cost usage from.
	Usage string
	// MaxCostUSD and MaxTokens kill the process when exceeded (0: no limit).
	MaxCostUSD float64
	MaxTokens  int64
	// TailBytes bounds the output kept for the task attempt (default
	// DefaultTailBytes, 16 KiB).
	TailBytes int
	// Credential runs the process as another user (the agents' user when
	// mozi is root); nil: as mozi.
	Credential *syscall.Credential
}

// Result is how a process ended.
type Result struct {
	ExitCode  int // -1 when killed or never started
	Outcome   string
	Err       string // why it failed, for the task and the issue comment
	Tail      string // the last TailBytes of output
	Duration  time.Duration
	TokensIn  int64
	TokensOut int64
	CostUSD   float64
}

// Outcomes of a process, as recorded in task_attempts.
const (
	OutcomeSucceeded   = "succeeded"
	OutcomeFailed      = "failed"
	OutcomeTimeout     = "timeout"
	OutcomeBudget      = "budget_exceeded"
	OutcomeInterrupted = "interrupted"
	OutcomeSpawnError  = "spawn_error"
	OutcomeLeaseLost   = "lease_lost"
)

// ErrLeaseLost cancels a run whose task another runner took over.
var ErrLeaseLost = task.ErrLeaseLost

// Defaults of a run.
const (
	// DefaultKillGrace is how long SIGTERM has before SIGKILL.
	DefaultKillGrace = 10 * time.Second
	// DefaultTailBytes of a run's output are kept with its attempt.
	DefaultTailBytes = 16 << 10
	// DefaultTimeout is a run's wall-clock limit.
	DefaultTimeout = 30 * time.Minute
)

// ProcessRunner runs agent processes in their own process group.
type ProcessRunner struct {
	// KillGrace is how long SIGTERM has before SIGKILL (default
	// DefaultKillGrace, 10s).
	KillGrace time.Duration
	Logger    *slog.Logger
}

// Run starts the command and waits for it. Cancelling ctx (shutdown, lost
// lease) kills it like a timeout does: SIGTERM to the whole group, SIGKILL
// after the grace period; context.Cause(ctx) decides the outcome.
func (r *ProcessRunner) Run(ctx context.Context, c Command) Result {
	grace := r.KillGrace
	if grace <= 0 {
		grace = DefaultKillGrace
	}
	tailBytes := c.TailBytes
	if tailBytes <= 0 {
		tailBytes = DefaultTailBytes
	}
	start := time.Now()
	res := Result{ExitCode: -1}
	if len(c.Argv) == 0 {
		res.Outcome, res.Err = OutcomeSpawnError, "no command"
		return res
	}
	if err := os.MkdirAll(filepath.Dir(c.LogPath), 0o700); err != nil {
		res.Outcome, res.Err = OutcomeSpawnError, "create log directory: "+err.Error()
		return res
	}
	logFile, err := os.OpenFile(c.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		res.Outcome, res.Err = OutcomeSpawnError, "open log: "+err.Error()
		return res
	}
	defer logFile.Close()

	tail := newTail(tailBytes)
	usage := newUsageMeter(c.Usage, c.MaxCostUSD, c.MaxTokens)
	logw := &logWriter{f: logFile}
	out := &lockedWriter{w: io.MultiWriter(logw, tail, usage)}

	cmd := exec.Command(c.Argv[0], c.Argv[1:]...)
	cmd.Dir, cmd.Env = c.Dir, c.Env
	cmd.Stdout, cmd.Stderr = out, out
	if c.Stdin != nil {
		cmd.Stdin = bytesReader(c.Stdin)
	}
	// Its own process group, so a kill reaches everything it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: c.Credential}
	setParentDeathSignal(cmd.SysProcAttr)
	// Children that keep the output open must not keep Wait waiting.
	cmd.WaitDelay = grace
	if err := cmd.Start(); err != nil {
		res.Outcome, res.Err = OutcomeSpawnError, "start "+c.Argv[0]+": "+err.Error()
		fmt.Fprintf(logFile, "mozi: %s\n", res.Err)
		return res
	}
	pgid := cmd.Process.Pid
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()

	var waitErr error
	select {
	case waitErr = <-done:
	case <-timer.C:
		res.Outcome, res.Err = OutcomeTimeout, fmt.Sprintf("killed after its %s time limit", timeout)
		waitErr = killGroup(pgid, done, grace)
	case <-usage.exceeded:
		res.Outcome, res.Err = OutcomeBudget, usage.reason()
		waitErr = killGroup(pgid, done, grace)
	case <-ctx.Done():
		res.Outcome, res.Err = OutcomeInterrupted, "interrupted: mozi is shutting down"
		if errors.Is(context.Cause(ctx), ErrLeaseLost) {
			res.Outcome, res.Err = OutcomeLeaseLost, "killed: another runner took the task over"
		}
		waitErr = killGroup(pgid, done, grace)
	}
	// Whatever ended the leader, take its group with it.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)

	res.Duration = time.Since(start)
	res.Tail = tail.String()
	res.TokensIn, res.TokensOut, res.CostUSD = usage.totals()
	if res.Outcome == "" {
		res.ExitCode, res.Outcome, res.Err = exitStatus(cmd, waitErr)
		if errors.Is(waitErr, exec.ErrWaitDelay) && res.Outcome == OutcomeSucceeded {
			fmt.Fprintf(logw, "\nmozi: exited 0; a process it left running still held its output %s later and was killed\n", grace)
		}
	}
	if err := logw.err(); err != nil {
		// The agent's outcome stands; the attempt says what its log lacks.
		res.Err = strings.TrimPrefix(res.Err+"; log incomplete: "+err.Error(), "; ")
	}
	if res.Err != "" {
		fmt.Fprintf(logw, "\nmozi: %s\n", res.Err)
	}
	return res
}

// exitStatus is the outcome of a process that ended by itself.
func exitStatus(cmd *exec.Cmd, waitErr error) (code int, outcome, why string) {
	var exitErr *exec.ExitError
	switch {
	case waitErr == nil:
		return 0, OutcomeSucceeded, ""
	case errors.Is(waitErr, exec.ErrWaitDelay) && cmd.ProcessState != nil && cmd.ProcessState.Success():
		// The agent exited 0 but something it started in the background
		// (npm run dev &, nohup …) still held its output after the grace
		// period. The agent's work is done: the group kill took the
		// leftover with it, and the output read until then is kept.
		return 0, OutcomeSucceeded, ""
	case errors.As(waitErr, &exitErr):
		why = "exited with status " + fmt.Sprint(exitErr.ExitCode())
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			why = "killed by signal " + ws.Signal().String()
		}
		return exitErr.ExitCode(), OutcomeFailed, why
	default:
		return -1, OutcomeFailed, waitErr.Error()
	}
}

// killGroup asks the whole process group to stop, then forces it.
func killGroup(pgid int, done <-chan error, grace time.Duration) error {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case err := <-done:
		return err
	case <-time.After(grace):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return <-done
}

// GroupGone reports whether no live process of the group is left (a
// zombie waiting for its reaper is dead). Where /proc is missing it asks
// the kernel, which counts zombies too.
func GroupGone(pgid int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
	}
	for _, e := range entries {
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp …; comm may contain spaces.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) >= 3 && fields[2] == strconv.Itoa(pgid) && fields[0] != "Z" && fields[0] != "X" {
			return false
		}
	}
	return true
}

// logWriter writes the attempt's log and never fails: a log that cannot be
// written (disk full) must not end the copy of the agent's output, which
// would kill the agent with SIGPIPE and blind the tail and the usage
// meter. Every write is still tried, so the log has what could be written;
// the first error is kept for the attempt.
type logWriter struct {
	f     io.Writer
	first error
}

func (l *logWriter) Write(p []byte) (int, error) {
	if _, err := l.f.Write(p); err != nil && l.first == nil {
		l.first = err
	}
	return len(p), nil
}

func (l *logWriter) err() error { return l.first }

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// tail keeps the last n bytes written.
type tail struct {
	n   int
	buf []byte
}

func newTail(n int) *tail { return &tail{n: n} }

func (t *tail) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.n {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.n:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	b := t.buf
	if len(b) > t.n {
		b = b[len(b)-t.n:]
	}
	for len(b) > 0 && b[0]&0xC0 == 0x80 { // start on a rune
		b = b[1:]
	}
	return string(b)
}
