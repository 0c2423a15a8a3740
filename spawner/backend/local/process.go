package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moziplus/mozi/spawner/backend"
	"github.com/moziplus/mozi/spawner/backend/local/sandbox"
)

// DefaultKillGrace is how long SIGTERM has before SIGKILL when a step
// names no grace.
const DefaultKillGrace = 10 * time.Second

// Start starts the step's process in its own process group, as the
// agents' user, inside its sandbox when the agent has one.
func (b *Backend) Start(_ context.Context, pl backend.Place, s backend.Step, out io.Writer) (backend.Process, error) {
	p, ok := pl.(*place)
	if !ok {
		return nil, fmt.Errorf("local backend: a place of another backend (%T)", pl)
	}
	if len(s.Argv) == 0 {
		return nil, errors.New("no command")
	}
	grace := s.KillGrace
	if grace <= 0 {
		grace = DefaultKillGrace
	}
	if err := os.WriteFile(p.where.PromptFile, []byte(s.Prompt), 0o644); err != nil {
		return nil, fmt.Errorf("write prompt: %w", err)
	}
	mark := runMark(b.cfg.Scope, s.TaskID, s.Attempt)
	env := setEnv(append([]string(nil), s.Env...), RunEnv, mark)
	argv := s.Argv
	if s.Agent.Sandboxed {
		if b.cfg.Sandbox == nil {
			return nil, fmt.Errorf("agent %s runs sandboxed: %w", s.Agent.Login, sandbox.ErrUnavailable)
		}
		spec := b.sandboxSpec(s.Agent)
		spec.Chdir, spec.Tmp = p.where.Dir, filepath.Join(p.runDir, "tmp")
		spec.Writable = append(spec.Writable, p.where.Dir)
		spec.ReadOnly = append(spec.ReadOnly, p.runDir)
		if p.mirror != "" {
			spec.Writable = append(spec.Writable, p.mirror)
			spec.ReadOnly = append(spec.ReadOnly, mirrorReadOnly(p.mirror)...)
		}
		l := s.Agent.Limits
		wrapped, err := b.cfg.Sandbox.Command(spec, sandbox.Limits{MemoryBytes: l.MemoryBytes, Processes: l.Processes,
			CPUTime: l.CPUTime, OpenFiles: l.OpenFiles}, argv)
		if err != nil {
			return nil, err
		}
		argv = wrapped
	}

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = p.where.Dir, env
	cmd.Stdout, cmd.Stderr = out, out
	if s.Stdin != nil {
		cmd.Stdin = bytes.NewReader(s.Stdin)
	}
	// Its own process group, so a kill reaches everything it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: b.cfg.RunAs}
	setParentDeathSignal(cmd.SysProcAttr)
	// Children that keep the output open must not keep Wait waiting.
	cmd.WaitDelay = grace
	b.setLive(mark, true)
	if err := cmd.Start(); err != nil {
		b.setLive(mark, false)
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	proc := &process{pgid: cmd.Process.Pid, done: make(chan struct{})}
	go func() {
		waitErr := cmd.Wait()
		// Whatever ended the leader, take its group with it.
		_ = syscall.Kill(-proc.pgid, syscall.SIGKILL)
		proc.exit = exitStatus(cmd, waitErr)
		b.setLive(mark, false)
		close(proc.done)
	}()
	return proc, nil
}

func (b *Backend) setLive(mark string, on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if on {
		b.live[mark] = true
	} else {
		delete(b.live, mark)
	}
}

// process is a started local run: a process group.
type process struct {
	pgid     int
	done     chan struct{}
	exit     backend.Exit
	stopOnce sync.Once
}

func (p *process) Done() <-chan struct{} { return p.done }
func (p *process) Exit() backend.Exit    { return p.exit }

// Stop asks the whole process group to stop, then forces it after grace.
func (p *process) Stop(grace time.Duration) {
	p.stopOnce.Do(func() {
		terminate(p.pgid)
		go func() {
			select {
			case <-p.done:
			case <-time.After(grace):
				_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
			}
		}()
	})
}

// exitStatus is how a process that Wait returned for ended.
func exitStatus(cmd *exec.Cmd, waitErr error) backend.Exit {
	var exitErr *exec.ExitError
	switch {
	case waitErr == nil:
		return backend.Exit{}
	case errors.Is(waitErr, exec.ErrWaitDelay) && cmd.ProcessState != nil && cmd.ProcessState.Success():
		// The agent exited 0 but something it started in the background
		// (npm run dev &, nohup …) still held its output after the grace
		// period. The agent's work is done: the group kill took the
		// leftover with it, and the output read until then is kept.
		return backend.Exit{Lingered: true}
	case errors.As(waitErr, &exitErr):
		why := "exited with status " + fmt.Sprint(exitErr.ExitCode())
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			why = "killed by signal " + ws.Signal().String()
		}
		return backend.Exit{Code: exitErr.ExitCode(), Why: why}
	default:
		return backend.Exit{Code: -1, Why: waitErr.Error()}
	}
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
