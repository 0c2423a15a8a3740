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
	"slices"
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
	// Secrets are values the agent may print (its API keys, say) that must
	// not reach its log or the attempt's tail, which mozi task show and the
	// next prompt display: they read [redacted] there. The agent's Gitea
	// token, GITEA_TOKEN in Env, always is one.
	Secrets []string
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
	OutcomeStopped     = "stopped" // someone else ended the task in Gitea meanwhile
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
	secrets := c.Secrets
	for _, kv := range c.Env {
		if tok, ok := strings.CutPrefix(kv, "GITEA_TOKEN="); ok {
			secrets = append(slices.Clip(secrets), tok)
		}
	}
	redact := newRedactor(io.MultiWriter(logw, tail, usage), secrets)
	out := &lockedWriter{w: redact}

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
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, ErrLeaseLost):
			res.Outcome, res.Err = OutcomeLeaseLost, "killed: mozi lost the task's lease (the database was out of reach, or another runner took the task over)"
		case errors.Is(cause, task.ErrTaskEnded):
			res.Outcome, res.Err = OutcomeStopped, "stopped: "+cause.Error()
		}
		waitErr = killGroup(pgid, done, grace)
	}
	// Whatever ended the leader, take its group with it.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	// Wait is back: nothing writes any more, what was held back as the
	// possible start of a secret can go.
	out.mu.Lock()
	redact.Flush()
	out.mu.Unlock()

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
	terminate(pgid)
	select {
	case err := <-done:
		return err
	case <-time.After(grace):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return <-done
}

// terminate sends SIGTERM to the run whose group is pgid. Usually that is
// the group. A sandboxed run's group is only bwrap, though: the agent lives
// under it in a PID namespace (and a session) of its own. bwrap dies of a
// SIGTERM and the kernel then SIGKILLs its whole namespace, so the agent
// would never get its grace period (a git commit cut off that way leaves
// index.lock in the reused worktree). So every process inside the
// namespace gets the SIGTERM itself — mozi sees them all in its /proc as
// descendants of bwrap, setsid ones included — and bwrap none: it goes
// with the group's SIGKILL after the grace period, or by itself when the
// agent it runs exits. A shim inside the sandbox forwarding the signal
// would need a binary of mozi's in every sandbox and still reach only its
// own child's group.
func terminate(pgid int) {
	procs, err := readProcs()
	if err != nil {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		return
	}
	launchers, inside := sandboxed(procs, pgid)
	if len(launchers) == 0 {
		// One signal to the group: nothing it forks meanwhile escapes.
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		return
	}
	for pid, p := range procs {
		if p.pgrp == pgid && !launchers[pid] {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
	}
	for _, pid := range inside {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
}

// proc is what terminate needs of a process in /proc.
type proc struct {
	ppid, pgrp int
	// depth is how many PID namespaces it is in (NSpid); nsPid its pid in
	// the innermost one.
	depth, nsPid int
}

// readProcs reads every process of mozi's PID namespace, and its own as
// pid 0 (for its depth).
func readProcs() (map[int]proc, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	self, err := readProc("self")
	if err != nil {
		return nil, err
	}
	procs := map[int]proc{0: self}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, err := readProc(e.Name()); err == nil {
			procs[pid] = p
		}
	}
	return procs, nil
}

func readProc(name string) (proc, error) {
	var p proc
	stat, err := os.ReadFile(filepath.Join("/proc", name, "stat"))
	if err != nil {
		return p, fmt.Errorf("read process: %w", err)
	}
	// pid (comm) state ppid pgrp …; comm may contain spaces.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return p, fmt.Errorf("process %s: unexpected stat %q", name, stat)
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 3 {
		return p, fmt.Errorf("process %s: unexpected stat %q", name, stat)
	}
	if fields[0] == "Z" || fields[0] == "X" {
		return p, fmt.Errorf("process %s is dead", name)
	}
	p.ppid, _ = strconv.Atoi(fields[1])
	p.pgrp, _ = strconv.Atoi(fields[2])
	status, err := os.ReadFile(filepath.Join("/proc", name, "status"))
	if err != nil {
		return p, fmt.Errorf("read process: %w", err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			ids := strings.Fields(rest)
			p.depth = len(ids)
			if len(ids) > 0 {
				p.nsPid, _ = strconv.Atoi(ids[len(ids)-1])
			}
		}
	}
	return p, nil
}

// sandboxed finds the sandboxes among the descendants of leader:
// launchers are processes of mozi's PID namespace whose child is the init
// of a namespace of its own (bwrap), inside the processes below them, in
// that namespace or deeper, except the namespaces' inits (bwrap's, which
// has no handler for SIGTERM: the kernel drops it anyway).
func sandboxed(procs map[int]proc, leader int) (launchers map[int]bool, inside []int) {
	own := procs[0].depth
	if own == 0 {
		return nil, nil // a kernel without NSpid: no way to tell
	}
	children := map[int][]int{}
	for pid, p := range procs {
		if pid != 0 {
			children[p.ppid] = append(children[p.ppid], pid)
		}
	}
	launchers = map[int]bool{}
	seen := map[int]bool{}
	var walk func(pid int)
	walk = func(pid int) {
		if seen[pid] {
			return
		}
		seen[pid] = true
		p := procs[pid]
		for _, c := range children[pid] {
			cp := procs[c]
			switch {
			case cp.depth > own && cp.nsPid == 1 && p.depth == own:
				launchers[pid] = true
			case cp.depth > own && cp.nsPid != 1:
				inside = append(inside, c)
			}
			walk(c)
		}
	}
	if _, ok := procs[leader]; ok {
		walk(leader)
	}
	return launchers, inside
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

// redacted replaces a secret in the output.
const redacted = "[redacted]"

// minSecret is the shortest value redacted: a shorter one protects nothing
// and would blank out ordinary output.
const minSecret = 4

// redactor replaces secrets in a stream with [redacted]. A write may end
// in the middle of a secret (the pipe hands the output over in arbitrary
// pieces), so what could be the start of one is held back until the next
// write, or Flush, decides.
type redactor struct {
	w       io.Writer
	secrets [][]byte
	longest int
	pending []byte
}

func newRedactor(w io.Writer, secrets []string) *redactor {
	r := &redactor{w: w}
	for _, s := range secrets {
		if len(s) >= minSecret {
			r.secrets = append(r.secrets, []byte(s))
			r.longest = max(r.longest, len(s))
		}
	}
	return r
}

func (r *redactor) Write(p []byte) (int, error) {
	if len(r.secrets) == 0 {
		return r.w.Write(p)
	}
	r.pending = append(r.pending, p...)
	r.redact(false)
	return len(p), nil
}

// Flush writes what was held back; the stream is over.
func (r *redactor) Flush() { r.redact(true) }

func (r *redactor) redact(final bool) {
	buf := r.pending
	var out []byte
	for len(buf) > 0 {
		at, n := r.match(buf)
		if !final {
			if h := r.partial(buf); h >= 0 && h <= at {
				// buf[h:] may still become a secret (a longer one than
				// what matches at h, maybe): wait for more.
				out = append(out, buf[:h]...)
				buf = buf[h:]
				break
			}
		}
		out = append(out, buf[:at]...)
		if n == 0 {
			buf = buf[at:]
			break
		}
		out = append(out, redacted...)
		buf = buf[at+n:]
	}
	r.pending = append(r.pending[:0], buf...)
	if len(out) > 0 {
		_, _ = r.w.Write(out)
	}
}

// match finds the first secret in buf, the longest one where several
// start at the same place: where it is and its length (len(buf), 0: none).
func (r *redactor) match(buf []byte) (at, n int) {
	at = len(buf)
	for _, s := range r.secrets {
		i := bytes.Index(buf[:min(len(buf), at+len(s))], s)
		if i >= 0 && (i < at || i == at && len(s) > n) {
			at, n = i, len(s)
		}
	}
	return at, n
}

// partial is where the earliest end of buf that is the beginning of a
// secret (but not all of it) starts; -1: nowhere.
func (r *redactor) partial(buf []byte) int {
	for i := max(0, len(buf)-r.longest+1); i < len(buf); i++ {
		for _, s := range r.secrets {
			if len(s) > len(buf)-i && bytes.HasPrefix(s, buf[i:]) {
				return i
			}
		}
	}
	return -1
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
