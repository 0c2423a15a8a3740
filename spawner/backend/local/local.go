// Package local is the backend that runs agents on mozi's own machine: in
// a git worktree of the task's repository (workspace), inside bubblewrap
// (sandbox), as the agents' user when mozi is root, in a process group of
// their own that a stop signals as a whole.
package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/moziplus/mozi/spawner/backend"
	"github.com/moziplus/mozi/spawner/backend/local/sandbox"
	"github.com/moziplus/mozi/spawner/backend/local/workspace"
)

// Config configures the local backend.
type Config struct {
	// StateDir holds runs/ (each run's prompt file and /tmp). It is
	// always hidden from sandboxed agents.
	StateDir string
	// Workspaces prepares the worktrees of agents with Worktree set (nil:
	// such agents cannot run: there is no repository to clone from).
	Workspaces *workspace.Manager
	// Sandbox wraps the runs of sandboxed agents; SandboxErr says why there
	// is none (bwrap missing).
	Sandbox    *sandbox.Sandbox
	SandboxErr error
	// RunAs is the user agents run as when mozi is root (nil: mozi's).
	RunAs *syscall.Credential
	// Hide are paths no sandboxed agent may see besides StateDir: mozi's
	// configuration and secret files, its home, other agents' homes.
	Hide []string
	// Scope marks this mozi's runs (RunScope(StateDir) when empty): a
	// sweep ends what a killed earlier life left running.
	Scope  string
	Logger *slog.Logger
}

// Backend runs agents as local processes.
type Backend struct {
	cfg Config

	// live are the marks of this life's runs, which a sweep leaves alone.
	mu   sync.Mutex
	live map[string]bool
}

var _ backend.Backend = (*Backend)(nil)

// New builds the local backend.
func New(cfg Config) *Backend {
	if cfg.Scope == "" {
		cfg.Scope = RunScope(cfg.StateDir)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Backend{cfg: cfg, live: map[string]bool{}}
}

// Name is "local".
func (b *Backend) Name() string { return "local" }

// Workspaces is the worktree manager (nil without a repository to clone
// from): the container backend prepares its places with it too.
func (b *Backend) Workspaces() *workspace.Manager { return b.cfg.Workspaces }

// AgentsUser is who agents run as: nobody special when mozi is not root;
// when it is, the named unprivileged user (mozi never runs an agent as
// root).
func AgentsUser(name string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("sandbox.user: mozi runs as root and runs agents as %q, which does not exist: create it (useradd --system %s) or name another user", name, name)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if uid == 0 {
		return nil, fmt.Errorf("sandbox.user: %q is root; agents need an unprivileged user", name)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

// Check says what only an operator can fix: the agent's command exists,
// its sandbox too, and the command can be seen from inside it. The agent
// comes back with its command's absolute path, the one to run: inside the
// sandbox a bare name would be looked up again, and could find another
// copy (or none).
func (b *Backend) Check(a backend.Agent, env []string) (backend.Agent, error) {
	if len(a.Argv) == 0 {
		return a, fmt.Errorf("agent %s has no command", a.Login)
	}
	path, err := lookPath(a.Argv[0], envValue(env, "PATH"))
	if err != nil {
		return a, fmt.Errorf("agent %s: %w", a.Login, err)
	}
	if path, err = filepath.Abs(path); err != nil {
		return a, fmt.Errorf("agent %s: %w", a.Login, err)
	}
	if a.Sandboxed && b.cfg.Sandbox == nil {
		why := b.cfg.SandboxErr
		if why == nil {
			why = sandbox.ErrUnavailable
		}
		return a, fmt.Errorf("agent %s runs sandboxed: %w", a.Login, why)
	}
	if a.Sandboxed {
		if by, hidden := b.sandboxSpec(a).Conceals(path); hidden {
			return a, fmt.Errorf("agent %s: its command %s cannot be seen inside its sandbox (%s is hidden there): install it elsewhere, or set sandbox: none",
				a.Login, path, by)
		}
	}
	if a.Worktree && b.cfg.Workspaces == nil {
		return a, fmt.Errorf("agent %s works in a worktree, but mozi has no repository to clone from (set gitea.url or workspace.remote)", a.Login)
	}
	a.Argv = append([]string{path}, a.Argv[1:]...)
	return a, nil
}

// sandboxSpec is the view every sandboxed run of agent a gets; a run adds
// its worktree and run directory.
func (b *Backend) sandboxSpec(a backend.Agent) sandbox.Spec {
	spec := sandbox.Spec{Hide: append([]string{b.cfg.StateDir}, b.cfg.Hide...), RunAs: b.cfg.RunAs}
	if a.Home != "" {
		spec.Writable = append(spec.Writable, a.Home)
	}
	return spec
}

// place is what one run has on disk.
type place struct {
	agent  backend.Agent
	where  backend.Where
	mirror string // the worktree's mirror ("" without a worktree)
	runDir string // prompt file, and the run's /tmp
	done   func()
}

func (p *place) Where() backend.Where { return p.where }

// Binds are the host paths a container mounts to run in this place: the
// worktree and its mirror (whose configuration and hooks stay read-only),
// the agent's home, the run directory read-only.
func (p *place) Binds() []backend.Bind {
	binds := []backend.Bind{{Path: p.where.Dir}}
	if p.mirror != "" {
		binds = append(binds, backend.Bind{Path: p.mirror})
		for _, ro := range mirrorReadOnly(p.mirror) {
			binds = append(binds, backend.Bind{Path: ro, ReadOnly: true})
		}
	}
	if p.agent.Home != "" {
		binds = append(binds, backend.Bind{Path: p.agent.Home})
	}
	return append(binds, backend.Bind{Path: p.runDir, ReadOnly: true})
}

// mirrorReadOnly are the parts of a writable mirror that stay read-only:
// commits write its objects and refs, but nothing an agent writes into
// its configuration or hooks may run later as mozi.
func mirrorReadOnly(mirror string) []string {
	return []string{filepath.Join(mirror, "config"), filepath.Join(mirror, "hooks"), filepath.Join(mirror, "info")}
}

func (p *place) Release() {
	if p.done != nil {
		p.done()
	}
	if p.runDir != "" {
		_ = removeAll(p.runDir)
	}
}

func (b *Backend) runDir(r backend.Run) string {
	return filepath.Join(b.cfg.StateDir, "runs", fmt.Sprintf("%d-%d", r.TaskID, r.Attempt))
}

// request is the worktree request of a run.
func request(r backend.Run) workspace.Request {
	mode := map[backend.Mode]workspace.Mode{backend.NewBranch: workspace.NewBranch,
		backend.ExistingBranch: workspace.ExistingBranch, backend.Detached: workspace.Detached}[r.Checkout.Mode]
	return workspace.Request{TaskID: r.TaskID, Repo: r.Repo, Mode: mode, Branch: r.Checkout.Branch, Ref: r.Checkout.Ref}
}

// where is what the prompt says of a worktree.
func where(req workspace.Request, ws workspace.Workspace) backend.Where {
	ref := req.Ref
	if req.Mode == workspace.Detached && ref != "" {
		ref = "origin/" + ref
	}
	return backend.Where{Dir: ws.Dir, Branch: ws.Branch, Ref: ref, Base: ws.DefaultBranch, Note: ws.Note}
}

// Describe is where r would run, without preparing anything.
func (b *Backend) Describe(ctx context.Context, r backend.Run) backend.Where {
	promptFile := filepath.Join(b.runDir(r), "prompt.md")
	if !r.Agent.Worktree || b.cfg.Workspaces == nil {
		return backend.Where{Dir: r.Agent.Workdir, PromptFile: promptFile}
	}
	req := request(r)
	ws := workspace.Workspace{Dir: b.cfg.Workspaces.TreePath(r.Repo, r.TaskID),
		DefaultBranch: b.cfg.Workspaces.DefaultBranch(ctx, r.Repo)}
	if req.Mode != workspace.Detached {
		ws.Branch = req.Branch
	}
	w := where(req, ws)
	w.PromptFile = promptFile
	return w
}

// Prepare makes the run's directories: the worktree, the agent's home,
// the run's private directory.
func (b *Backend) Prepare(ctx context.Context, r backend.Run) (backend.Place, error) {
	p := &place{agent: r.Agent, runDir: b.runDir(r), where: backend.Where{Dir: r.Agent.Workdir}}
	if r.Agent.Worktree {
		if b.cfg.Workspaces == nil {
			return nil, fmt.Errorf("agent %s works in a worktree, but mozi has no repository to clone from", r.Agent.Login)
		}
		req := request(r)
		ws, err := b.cfg.Workspaces.Prepare(ctx, req)
		if err != nil {
			return nil, err
		}
		p.done = func() { b.cfg.Workspaces.Done(r.TaskID) }
		p.where, p.mirror = where(req, ws), ws.Mirror
	}
	p.where.PromptFile = filepath.Join(p.runDir, "prompt.md")
	dirs := []string{p.runDir, filepath.Join(p.runDir, "tmp")}
	if r.Agent.Home != "" {
		dirs = append(dirs, r.Agent.Home)
	}
	if !r.Agent.Worktree {
		dirs = append(dirs, r.Agent.Workdir)
	}
	for _, d := range dirs {
		if err := b.mkdirForAgent(d); err != nil {
			p.Release()
			return nil, err
		}
	}
	return p, nil
}

// mkdirForAgent creates a directory the agent's user owns (mozi's parts
// of the path stay mozi's and traversable).
func (b *Backend) mkdirForAgent(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if b.cfg.RunAs != nil {
		if err := os.Chown(dir, int(b.cfg.RunAs.Uid), int(b.cfg.RunAs.Gid)); err != nil {
			return fmt.Errorf("give %s to the agents' user: %w", dir, err)
		}
	}
	return nil
}

// Sweep ends what an earlier life of this mozi left running, then removes
// finished tasks' worktrees after their delay and within the disk budget.
func (b *Backend) Sweep(ctx context.Context, l backend.Ledger) (backend.SweepResult, error) {
	var res backend.SweepResult
	ended, err := b.endLeftovers()
	res.Ended = len(ended)
	if len(ended) > 0 {
		b.cfg.Logger.Warn("ended agent processes an earlier mozi left running", "pids", ended)
	}
	if b.cfg.Workspaces == nil {
		return res, err
	}
	ws, werr := b.cfg.Workspaces.Sweep(ctx, ledgerTasks{l})
	res.Removed, res.Bytes, res.OverBudget = ws.Removed, ws.Bytes, ws.OverBudget
	return res, errors.Join(err, werr)
}

// ledgerTasks tells the worktree sweep which tasks are finished.
type ledgerTasks struct{ l backend.Ledger }

func (t ledgerTasks) TaskEnds(ctx context.Context, ids []int64) (map[int64]workspace.TaskEnd, error) {
	ends, err := t.l.TaskEnds(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]workspace.TaskEnd, len(ends))
	for id, e := range ends {
		out[id] = workspace.TaskEnd{Terminal: e.Terminal, FinishedAt: e.FinishedAt}
	}
	return out, nil
}

// removeAll removes a run's directory even where the agent left
// directories without write permission in its /tmp.
func removeAll(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

func envValue(env []string, k string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, k+"="); ok {
			return v
		}
	}
	return ""
}

// setEnv sets k in an environment list, replacing an earlier value.
func setEnv(env []string, k, v string) []string {
	for i, kv := range env {
		if strings.HasPrefix(kv, k+"=") {
			env[i] = k + "=" + v
			return env
		}
	}
	return append(env, k+"="+v)
}

// lookPath finds a command on a PATH other than mozi's own.
func lookPath(name, path string) (string, error) {
	if strings.Contains(name, "/") {
		if st, err := os.Stat(name); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return "", fmt.Errorf("command %s is not an executable file", name)
		}
		return name, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("command %q not found on PATH (%s): install it or fix the agent's command", name, path)
}

// Scope is the mark of this mozi's runs (its data directory's).
func (b *Backend) Scope() string { return b.cfg.Scope }

// User is "uid:gid" of the agents' user ("" when agents run as mozi's
// own user): the owner of the places' files, which a container backend
// runs its agents as.
func (b *Backend) User() string {
	if b.cfg.RunAs == nil {
		return ""
	}
	return fmt.Sprintf("%d:%d", b.cfg.RunAs.Uid, b.cfg.RunAs.Gid)
}
