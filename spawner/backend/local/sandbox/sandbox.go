// Package sandbox runs an agent inside bubblewrap: its own PID, IPC and
// UTS namespaces, a read-only view of the system, its worktree, its home
// and a private /tmp writable, and mozi's own files absent.
//
// Invariants of a sandboxed run:
//   - Nothing outside the sandbox is visible in its /proc: mozi's process
//     (and its environment, which holds mozi's secrets) does not exist
//     there.
//   - The whole process tree dies with the run: bwrap dies with mozi
//     (--die-with-parent) and everything in the PID namespace dies with
//     bwrap, whatever a process did to leave its process group (setsid).
//     A run that is stopped gets SIGTERM and a grace period first: the
//     runner signals the processes inside the namespace itself, since
//     bwrap, in its group, would die of it and take them all at once.
//   - mozi's data directory, configuration file, secret files, database
//     socket, its own home and the other agents' homes and worktrees are
//     hidden; the network stays (agents need their model API and Gitea).
//   - Limits (memory, processes, CPU time) are set before bwrap starts, so
//     every process of the run inherits them.
package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Limits bound one run; zero fields are unlimited.
type Limits struct {
	// MemoryBytes caps each process's data segment (RLIMIT_DATA): the
	// memory it allocates, not the address space it reserves (Node.js
	// reserves far more than it uses).
	MemoryBytes int64
	// Processes caps the processes of the agents' user (RLIMIT_NPROC).
	Processes int
	// CPUTime caps each process's CPU time (RLIMIT_CPU).
	CPUTime time.Duration
	// OpenFiles caps each process's open files (RLIMIT_NOFILE).
	OpenFiles int
}

// Spec is the view one run gets.
type Spec struct {
	// Chdir is where the agent starts (its worktree).
	Chdir string
	// Writable paths are bound read-write at the same place.
	Writable []string
	// ReadOnly paths are bound read-only at the same place, after the
	// writable ones (a repository's configuration inside a writable mirror).
	ReadOnly []string
	// Tmp is bound as the run's private /tmp (empty: an in-memory one).
	Tmp string
	// Hide are paths that must not exist inside: directories become
	// empty, files unreadable. Writable and read-only binds inside them
	// come back.
	Hide []string
	// RunAs is the user bwrap runs as (nil: mozi's own). A path that user
	// cannot reach anyway (inside root's 0700 home) needs no hiding, and
	// bwrap could not mount over it.
	RunAs *syscall.Credential
}

// Sandbox builds bwrap command lines.
type Sandbox struct {
	bwrap   string
	prlimit string
	// blank is an empty file nobody may read, bound over hidden files.
	blank string
}

// ErrUnavailable means bwrap (or prlimit, for limits) is not installed.
var ErrUnavailable = errors.New("sandbox unavailable")

// New finds bwrap (default: on PATH) and prlimit, and keeps in stateDir
// the file it hides files with.
func New(bwrap, stateDir string) (*Sandbox, error) {
	if bwrap == "" {
		bwrap = "bwrap"
	}
	path, err := exec.LookPath(bwrap)
	if err != nil {
		return nil, fmt.Errorf("%w: bubblewrap (%s) not found: install it (apt-get install bubblewrap) or set sandbox: none for the agent", ErrUnavailable, bwrap)
	}
	s := &Sandbox{bwrap: path, blank: filepath.Join(stateDir, "sandbox-blank")}
	if p, err := exec.LookPath("prlimit"); err == nil {
		s.prlimit = p
	}
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	if err := os.WriteFile(s.blank, nil, 0o000); err != nil && !errors.Is(err, os.ErrPermission) {
		return nil, fmt.Errorf("sandbox: create %s: %w", s.blank, err)
	}
	// WriteFile keeps an existing file's mode: make sure nobody reads it.
	if err := os.Chmod(s.blank, 0o000); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	return s, nil
}

// Bwrap is the bwrap binary used.
func (s *Sandbox) Bwrap() string { return s.bwrap }

// always hidden: where database sockets, secrets mounted by Docker or
// systemd, and other services' runtime files live.
var systemHide = []string{"/run", "/var/run", "/dev/shm", "/var/tmp"}

// Command returns the argv that runs argv in the sandbox under limits.
func (s *Sandbox) Command(spec Spec, limits Limits, argv []string) ([]string, error) {
	if len(argv) == 0 {
		return nil, errors.New("sandbox: no command")
	}
	if spec.Chdir == "" || !filepath.IsAbs(spec.Chdir) {
		return nil, fmt.Errorf("sandbox: working directory %q is not absolute", spec.Chdir)
	}
	var out []string
	if limits != (Limits{}) {
		if s.prlimit == "" {
			return nil, fmt.Errorf("%w: resource limits need prlimit (util-linux)", ErrUnavailable)
		}
		out = append(out, s.prlimit)
		if limits.MemoryBytes > 0 {
			out = append(out, "--data="+strconv.FormatInt(limits.MemoryBytes, 10))
		}
		if limits.Processes > 0 {
			out = append(out, "--nproc="+strconv.Itoa(limits.Processes))
		}
		if limits.CPUTime > 0 {
			out = append(out, "--cpu="+strconv.FormatInt(int64(max(limits.CPUTime/time.Second, 1)), 10))
		}
		if limits.OpenFiles > 0 {
			out = append(out, "--nofile="+strconv.Itoa(limits.OpenFiles))
		}
		out = append(out, "--")
	}
	out = append(out, s.bwrap,
		"--die-with-parent", "--new-session",
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--hostname", "mozi-agent",
		"--ro-bind", "/", "/",
		"--dev", "/dev",
		"--proc", "/proc",
	)
	if spec.Tmp != "" {
		out = append(out, "--bind", spec.Tmp, "/tmp")
	} else {
		out = append(out, "--tmpfs", "/tmp")
	}
	for _, p := range systemHide {
		if isDir(p) && !isSymlink(p) {
			out = append(out, "--tmpfs", p)
		}
	}
	hide := slices.Clone(spec.Hide)
	slices.Sort(hide) // parents before children
	for _, p := range slices.Compact(hide) {
		st, err := os.Stat(p)
		switch {
		case err != nil:
			continue // nothing to hide
		case !reachable(p, spec.RunAs):
			continue // out of the agent's reach without a sandbox too
		case st.IsDir():
			out = append(out, "--tmpfs", p)
		default:
			out = append(out, "--ro-bind", s.blank, p)
		}
	}
	// Hiding /run must not take DNS away where resolv.conf lives there
	// (systemd-resolved).
	if target, err := filepath.EvalSymlinks("/etc/resolv.conf"); err == nil && target != "/etc/resolv.conf" {
		out = append(out, "--ro-bind", target, target)
	}
	for _, p := range spec.Writable {
		out = append(out, "--bind", p, p)
	}
	for _, p := range spec.ReadOnly {
		if _, err := os.Stat(p); err == nil {
			out = append(out, "--ro-bind", p, p)
		}
	}
	out = append(out, "--chdir", spec.Chdir, "--")
	return append(out, argv...), nil
}

// Conceals says whether path is out of sight inside a sandbox of this
// spec, and which mount hides it: the private /tmp, the hidden system
// directories (/run…), or one of Hide, unless a bind brings it back (the
// agent's home, its worktree). Symbolic links are followed: the target
// must be visible too.
func (spec Spec) Conceals(path string) (by string, hidden bool) {
	paths := []string{filepath.Clean(path)}
	if target, err := filepath.EvalSymlinks(path); err == nil && target != paths[0] {
		paths = append(paths, target)
	}
	for _, p := range paths {
		if by, hidden := spec.conceals(p); hidden {
			return by, true
		}
	}
	return "", false
}

func (spec Spec) conceals(p string) (string, bool) {
	for _, bind := range append(slices.Clone(spec.Writable), spec.ReadOnly...) {
		if within(p, bind) {
			return "", false
		}
	}
	for _, dir := range append([]string{"/tmp"}, systemHide...) {
		if within(p, dir) {
			return dir, true
		}
	}
	for _, h := range spec.Hide {
		if within(p, h) {
			return h, true
		}
	}
	return "", false
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(filepath.Clean(dir), p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// reachable reports whether user can traverse every directory above p.
func reachable(p string, user *syscall.Credential) bool {
	if user == nil || user.Uid == 0 {
		return true
	}
	for dir := filepath.Dir(p); ; dir = filepath.Dir(dir) {
		st, err := os.Stat(dir)
		if err != nil {
			return false
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		if !ok {
			return true
		}
		perm := st.Mode().Perm()
		var x os.FileMode = 0o001
		switch {
		case sys.Uid == user.Uid:
			x = 0o100
		case sys.Gid == user.Gid || slices.Contains(user.Groups, sys.Gid):
			x = 0o010
		}
		if perm&x == 0 {
			return false
		}
		if dir == filepath.Dir(dir) {
			return true
		}
	}
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func isSymlink(p string) bool {
	st, err := os.Lstat(p)
	return err == nil && st.Mode()&os.ModeSymlink != 0
}

// Check runs a trivial command in a sandbox like the agents' to prove
// bwrap works here (user namespaces allowed, as the given user). It
// returns bwrap's own explanation when it does not.
func (s *Sandbox) Check(run func(argv []string) ([]byte, error)) error {
	argv, err := s.Command(Spec{Chdir: "/"}, Limits{}, []string{"/bin/true"})
	if err != nil {
		return err
	}
	out, err := run(argv)
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("%w: %s", ErrUnavailable, strings.ReplaceAll(msg, "\n", " | "))
	}
	return nil
}
