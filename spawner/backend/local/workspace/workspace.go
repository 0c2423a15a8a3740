// Package workspace gives every agent run its own git worktree, on the
// branch its task needs, prepared from one bare mirror per repository.
//
// Layout under the root directory R:
//
//	R/mirrors/<owner>/<name>.git       bare mirror: origin's branches as refs/remotes/origin/*
//	R/trees/<owner>/<name>/<task id>   the task's worktree
//
// Invariants:
//   - A mirror exists only complete: it is initialised and fetched in a
//     temporary directory and renamed into place.
//   - Fetches are incremental (git fetch into the mirror), one at a time
//     per repository; a caller that finds a fetch started after its own
//     request began reuses it.
//   - One worktree per task, reused by the task's retries (with the
//     previous attempt's changes), never by another task.
//   - At most Config.CheckoutsPerRepo new worktrees of one repository
//     check their files out at once; the others wait their turn, in the
//     order they asked (the bookkeeping before it is serialised by the
//     repository's lock anyway).
//   - One branch has at most one live writer in this process: a request
//     for a branch another running task has checked out fails with
//     ErrBranchBusy; an idle worktree holding it is detached first.
//   - Credentials are never written to disk: mozi's fetches get its token
//     from the environment of the git process, and agents' pushes get
//     theirs through a credential helper that reads $GITEA_TOKEN.
//   - mozi's git commands never run code an agent could have written
//     (see gitRunner).
package workspace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moziplus/mozi/repository/task/conventions"

	"github.com/moziplus/mozi/repository/task"
)

// Mode says what a worktree checks out.
type Mode int

const (
	// NewBranch works on Branch: origin's if it exists there (an earlier
	// attempt pushed it), else a new branch from the default branch.
	NewBranch Mode = iota
	// ExistingBranch works on Branch as origin has it (a pull request's
	// head); ErrBranchGone when origin has no such branch.
	ExistingBranch
	// Detached checks out Ref (default: the default branch) without a
	// branch: for tasks that read and comment but do not push.
	Detached
)

func (m Mode) String() string {
	return [...]string{"new branch", "existing branch", "detached"}[m]
}

// Request is the worktree a run needs.
type Request struct {
	TaskID int64
	Repo   string // owner/name
	Mode   Mode
	Branch string // NewBranch, ExistingBranch
	Ref    string // Detached: a commit or a branch of origin ("" = the default branch)
}

// Workspace is a prepared worktree.
type Workspace struct {
	Dir           string // the worktree
	Mirror        string // the bare repository whose objects and refs it shares
	Branch        string // the branch checked out; "" when detached
	Head          string // the commit checked out
	DefaultBranch string
	// Reused is true for a retry: the worktree is the previous attempt's,
	// with what it left.
	Reused bool
	// Note tells the agent something it must know about a reused
	// worktree: NoteUncommitted or NoteDiverged ("" for nothing).
	Note string
}

// Notes on a reused worktree whose branch (or, detached, whose ref)
// origin moved meanwhile, and that was therefore left where it was.
const (
	// NoteUncommitted: the previous attempt left uncommitted changes.
	NoteUncommitted = "uncommitted"
	// NoteDiverged: the worktree has commits origin never had.
	NoteDiverged = "diverged"
)

// Owner is the user the files of mirrors and worktrees belong to, and
// that mozi's git commands run as: the agents' user when mozi is root.
type Owner struct{ UID, GID int }

// DefaultKeepFinished is how long a finished task's worktree is kept.
const DefaultKeepFinished = time.Hour

// DefaultSweepEvery is how often finished tasks' worktrees are looked for.
const DefaultSweepEvery = time.Minute

// DefaultCheckoutsPerRepo is how many worktrees of one repository check
// their files out at once.
const DefaultCheckoutsPerRepo = 1

// Config configures a Manager.
type Config struct {
	// Root holds mirrors/ and trees/ (required).
	Root string
	// RemoteURL is the clone URL of a repository, without credentials
	// (required).
	RemoteURL func(repo string) (string, error)
	// Token authenticates mozi's own fetches (mozi's Gitea token); empty
	// for anonymous access.
	Token string
	// KeepFinished is how long the worktree of a finished task is kept
	// (default DefaultKeepFinished, 1h).
	KeepFinished time.Duration
	// DiskBudget caps the disk all worktrees use, in bytes; over it, the
	// worktrees of finished tasks are removed oldest first (0: no cap).
	DiskBudget int64
	// CheckoutsPerRepo caps the new worktrees of one repository whose
	// files are checked out at once; the others wait their turn, first
	// come first served (default DefaultCheckoutsPerRepo, 1; negative: no
	// cap). Checkouts started together share the machine and end together,
	// so no agent could start before the last one ended; in turns, the
	// first agent starts after one checkout.
	CheckoutsPerRepo int
	// Owner, when set, owns the files and runs git (mozi as root).
	Owner *Owner
	// Git is the git binary (default "git").
	Git    string
	Logger *slog.Logger
	Now    func() time.Time
}

// Manager prepares and removes worktrees. It is safe for concurrent use.
type Manager struct {
	cfg Config
	git *gitRunner

	mu     sync.Mutex
	repos  map[string]*repoState
	active map[int64]activeRun
}

type repoState struct {
	mu sync.Mutex
	// fetchedFrom is when the latest successful fetch started.
	fetchedFrom time.Time
	// checkouts holds a token per checkout running (nil: no cap); a
	// checkout waits to put its own.
	checkouts chan struct{}
}

// checkoutTurn waits for the repository's turn to check files out for
// req and returns what ends the turn; ctx ending first gives up the wait.
func (m *Manager) checkoutTurn(ctx context.Context, rs *repoState, req Request) (func(), error) {
	if rs.checkouts == nil {
		return func() {}, nil
	}
	done := func() { <-rs.checkouts }
	select {
	case rs.checkouts <- struct{}{}:
		return done, nil
	default:
	}
	m.cfg.Logger.Debug("checkout waits for its turn", "repo", req.Repo, "task_id", req.TaskID,
		"checkouts_per_repo", m.cfg.CheckoutsPerRepo)
	select {
	case rs.checkouts <- struct{}{}:
		return done, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for a checkout of the repository: %w", context.Cause(ctx))
	}
}

type activeRun struct {
	repo, branch string
}

// New builds a manager. It touches nothing until the first Prepare.
func New(cfg Config) (*Manager, error) {
	if cfg.Root == "" || cfg.RemoteURL == nil {
		return nil, errors.New("workspace: root directory and remote URL are required")
	}
	root, err := filepath.Abs(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	cfg.Root = root
	if cfg.KeepFinished <= 0 {
		cfg.KeepFinished = DefaultKeepFinished
	}
	if cfg.Git == "" {
		cfg.Git = "git"
	}
	if cfg.CheckoutsPerRepo == 0 {
		cfg.CheckoutsPerRepo = DefaultCheckoutsPerRepo
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	g := &gitRunner{bin: cfg.Git, home: root}
	if cfg.Owner != nil {
		g.cred = &syscall.Credential{Uid: uint32(cfg.Owner.UID), Gid: uint32(cfg.Owner.GID), NoSetGroups: true}
	}
	return &Manager{cfg: cfg, git: g, repos: map[string]*repoState{}, active: map[int64]activeRun{}}, nil
}

// checkRepo refuses names that would escape the root.
func checkRepo(repo string) error {
	if !task.ValidRepo(repo) {
		return fmt.Errorf("workspace: %q is not a repository name", repo)
	}
	return nil
}

// MirrorPath is the bare mirror of a repository.
func (m *Manager) MirrorPath(repo string) string {
	return filepath.Join(m.cfg.Root, "mirrors", filepath.FromSlash(repo)+".git")
}

// TreePath is the worktree a task gets (whether it exists or not).
func (m *Manager) TreePath(repo string, taskID int64) string {
	return filepath.Join(m.cfg.Root, "trees", filepath.FromSlash(repo), fmt.Sprint(taskID))
}

// Root is the directory that holds every mirror and worktree.
func (m *Manager) Root() string { return m.cfg.Root }

func (m *Manager) repo(name string) *repoState {
	m.mu.Lock()
	defer m.mu.Unlock()
	rs, ok := m.repos[name]
	if !ok {
		rs = &repoState{}
		if m.cfg.CheckoutsPerRepo > 0 {
			rs.checkouts = make(chan struct{}, m.cfg.CheckoutsPerRepo)
		}
		m.repos[name] = rs
	}
	return rs
}

// Prepare makes the task's worktree ready: the mirror fetched, the
// worktree created (or, for a retry, reused) on the requested branch. The
// task counts as running until Done.
func (m *Manager) Prepare(ctx context.Context, req Request) (Workspace, error) {
	if err := checkRepo(req.Repo); err != nil {
		return Workspace{}, err
	}
	if req.Mode != Detached && !validBranch(req.Branch) {
		return Workspace{}, fmt.Errorf("workspace: %q is not a branch name", req.Branch)
	}
	if req.Ref != "" && !validBranch(req.Ref) { // a commit id passes too; nothing read as an option does
		return Workspace{}, fmt.Errorf("workspace: %q is not a branch or commit", req.Ref)
	}
	if req.Mode == Detached {
		req.Branch = ""
	}
	if err := m.claim(req); err != nil {
		return Workspace{}, err
	}
	ws, err := m.prepare(ctx, req)
	if err != nil {
		m.Done(req.TaskID)
		return Workspace{}, err
	}
	return ws, nil
}

// Done marks the task's run over: its worktree stays for a retry until
// the task is finished and KeepFinished has passed.
func (m *Manager) Done(taskID int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.active, taskID)
}

// claim marks the task running, unless another running task writes the
// same branch.
func (m *Manager) claim(req Request) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if req.Branch != "" {
		for id, run := range m.active {
			if id != req.TaskID && run.repo == req.Repo && run.branch == req.Branch {
				return fmt.Errorf("%w: %s of %s is checked out by task %d", ErrBranchBusy, req.Branch, req.Repo, id)
			}
		}
	}
	m.active[req.TaskID] = activeRun{repo: req.Repo, branch: req.Branch}
	return nil
}

func (m *Manager) isActive(taskID int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.active[taskID]
	return ok
}

func (m *Manager) prepare(ctx context.Context, req Request) (Workspace, error) {
	asked := m.cfg.Now()
	mirror := m.MirrorPath(req.Repo)
	dir := m.TreePath(req.Repo, req.TaskID)
	rs := m.repo(req.Repo)

	rs.mu.Lock()
	ws, populate, err := m.prepareLocked(ctx, rs, req, mirror, dir, asked)
	rs.mu.Unlock()
	if err != nil {
		return Workspace{}, err
	}
	// Checking out thousands of files needs no lock on the mirror: other
	// tasks of the repository prepare meanwhile, and check out in turns
	// (Config.CheckoutsPerRepo).
	if populate {
		done, err := m.checkoutTurn(ctx, rs, req)
		if err == nil {
			_, err = m.git.run(ctx, m.inTree(mirror, dir, "reset", "-q", "--hard"))
			done()
		}
		if err != nil {
			// Also when the run was stopped: a worktree left registered
			// without its directory would refuse the task's next run.
			_ = m.removeTree(context.WithoutCancel(ctx), req.Repo, dir)
			return Workspace{}, classifyLocal(fmt.Errorf("check out %s: %w", dir, err))
		}
	}
	head, err := m.git.run(ctx, m.inTree(mirror, dir, "rev-parse", "HEAD"))
	if err != nil {
		return Workspace{}, fmt.Errorf("read the worktree's commit: %w", err)
	}
	ws.Head = head
	return ws, nil
}

// prepareLocked does, under the repository's lock, what touches the
// mirror: fetch, branch bookkeeping, worktree registration. populate says
// whether the new worktree's files still have to be checked out.
func (m *Manager) prepareLocked(ctx context.Context, rs *repoState, req Request, mirror, dir string, asked time.Time) (Workspace, bool, error) {
	created, err := m.ensureMirror(ctx, req.Repo, mirror)
	if err != nil {
		return Workspace{}, false, err
	}
	if !created {
		m.removeStaleLocks(mirror)
	}
	if created {
		rs.fetchedFrom = asked
	} else if rs.fetchedFrom.Before(asked) {
		start := m.cfg.Now()
		if err := m.fetch(ctx, mirror); err != nil {
			return Workspace{}, false, err
		}
		rs.fetchedFrom = start
	}
	defaultBranch, err := m.defaultBranch(ctx, mirror)
	if err != nil {
		return Workspace{}, false, err
	}
	ws := Workspace{Dir: dir, Mirror: mirror, Branch: req.Branch, DefaultBranch: defaultBranch}

	reuse, err := m.registered(ctx, mirror, dir)
	if err != nil {
		return Workspace{}, false, err
	}
	if reuse {
		current, _ := m.git.run(ctx, m.inTree(mirror, dir, "symbolic-ref", "-q", "--short", "HEAD"))
		if current != req.Branch {
			// The task now needs another branch (its pull request's head
			// changed): start over.
			if err := m.removeTreeLocked(ctx, mirror, dir); err != nil {
				return Workspace{}, false, err
			}
			reuse = false
		}
	} else if _, err := os.Stat(dir); err == nil {
		// Left by a crash before it was registered.
		if err := m.removeTreeLocked(ctx, mirror, dir); err != nil {
			return Workspace{}, false, err
		}
	}
	if req.Branch != "" {
		if err := m.releaseBranch(ctx, mirror, dir, req.Branch); err != nil {
			return Workspace{}, false, err
		}
	}
	if reuse {
		ws.Reused = true
		// A branch follows origin's branch of that name; a detached
		// worktree follows its ref (a review's pull request head moves
		// between attempts too).
		target := "refs/remotes/origin/" + req.Branch
		if req.Mode == Detached {
			if target, err = m.detachedTarget(ctx, mirror, req.Ref, defaultBranch); err != nil {
				return Workspace{}, false, err
			}
		}
		if ws.Note, err = m.refresh(ctx, mirror, dir, target); err != nil {
			return Workspace{}, false, err
		}
		return ws, false, nil
	}
	if err := m.addWorktree(ctx, req, mirror, dir, defaultBranch); err != nil {
		return Workspace{}, false, err
	}
	return ws, true, nil
}

// ensureMirror creates the repository's mirror when it has none yet, and
// reports whether it did (then it is freshly fetched).
func (m *Manager) ensureMirror(ctx context.Context, repo, mirror string) (bool, error) {
	if _, err := os.Stat(filepath.Join(mirror, "HEAD")); err == nil {
		return false, nil
	}
	url, err := m.cfg.RemoteURL(repo)
	if err != nil {
		return false, fmt.Errorf("clone URL of %s: %w", repo, err)
	}
	if err := m.mkdirs(filepath.Dir(mirror)); err != nil {
		return false, err
	}
	// The first clone of a large repository can take minutes, with the
	// task's run waiting on it: say so before, not only after.
	m.cfg.Logger.Info("mirroring repository: its first clone", "repo", repo, "url", url, "mirror", mirror)
	began := time.Now()
	tmp := filepath.Join(filepath.Dir(mirror), ".new-"+filepath.Base(mirror)+"-"+randomSuffix())
	defer os.RemoveAll(tmp)
	steps := [][]string{
		{"init", "-q", "--bare", tmp},
		{"--git-dir=" + tmp, "config", "remote.origin.url", url},
		{"--git-dir=" + tmp, "config", "remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"},
		// Agents push with their own token: the helper reads it from
		// their environment at push time; nothing secret is stored.
		{"--git-dir=" + tmp, "config", "credential.helper",
			`!f() { test "$1" = get || exit 0; echo "username=${GITEA_USER:-mozi-agent}"; echo "password=$GITEA_TOKEN"; }; f`},
		{"--git-dir=" + tmp, "config", "push.default", "current"},
		{"--git-dir=" + tmp, "config", "core.logAllRefUpdates", "true"},
	}
	for _, args := range steps {
		if _, err := m.git.run(ctx, gitCall{args: args}); err != nil {
			return false, classifyLocal(fmt.Errorf("create mirror of %s: %w", repo, err))
		}
	}
	if err := m.fetch(ctx, tmp); err != nil {
		return false, err
	}
	if _, err := m.git.run(ctx, gitCall{args: []string{"--git-dir=" + tmp, "remote", "set-head", "origin", "--auto"}, token: m.cfg.Token}); err != nil {
		return false, classify(fmt.Errorf("read the default branch of %s: %w", repo, err))
	}
	if err := os.Rename(tmp, mirror); err != nil {
		return false, classifyLocal(fmt.Errorf("create mirror of %s: %w", repo, err))
	}
	m.cfg.Logger.Info("repository mirrored", "repo", repo, "mirror", mirror, "took", time.Since(began).Round(time.Millisecond).String())
	return true, nil
}

func (m *Manager) fetch(ctx context.Context, mirror string) error {
	_, err := m.git.run(ctx, gitCall{args: []string{"--git-dir=" + mirror, "fetch", "-q", "--prune", "origin"},
		token: m.cfg.Token})
	if err != nil {
		return classify(fmt.Errorf("fetch %s: %w", m.repoOf(mirror), err))
	}
	return nil
}

// staleLock is the age from which a ref's lock file in a mirror is taken
// for a leftover. mozi's own git commands on the mirror run under the
// repository's lock, which the caller holds, and an agent's push holds a
// ref's lock for milliseconds.
const staleLock = time.Minute

// removeStaleLocks removes the lock files a git process left on the
// mirror's refs when it was killed (mozi itself killed, a machine that
// went down): every later fetch would fail on them ("cannot lock ref").
func (m *Manager) removeStaleLocks(mirror string) {
	stale := func(p string) {
		info, err := os.Lstat(p)
		if err != nil || !info.Mode().IsRegular() || time.Since(info.ModTime()) < staleLock {
			return
		}
		if err := os.Remove(p); err != nil {
			m.cfg.Logger.Warn("stale lock file left in place", "file", p, "error", err)
			return
		}
		m.cfg.Logger.Warn("stale lock file removed", "file", p, "age", time.Since(info.ModTime()).Round(time.Second).String())
	}
	for _, name := range []string{"packed-refs.lock", "HEAD.lock"} {
		stale(filepath.Join(mirror, name))
	}
	_ = filepath.WalkDir(filepath.Join(mirror, "refs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".lock") {
			stale(p)
		}
		return nil
	})
}

// repoOf names a mirror's repository for messages.
func (m *Manager) repoOf(mirror string) string {
	rel, err := filepath.Rel(filepath.Join(m.cfg.Root, "mirrors"), mirror)
	if err != nil {
		return mirror
	}
	return strings.TrimSuffix(filepath.ToSlash(rel), ".git")
}

// DefaultBranch is the repository's default branch as its mirror knows
// it, without fetching; "" when mozi has no mirror of it yet.
func (m *Manager) DefaultBranch(ctx context.Context, repo string) string {
	if checkRepo(repo) != nil {
		return ""
	}
	b, _ := m.defaultBranch(ctx, m.MirrorPath(repo))
	return b
}

func (m *Manager) defaultBranch(ctx context.Context, mirror string) (string, error) {
	ref, err := m.git.run(ctx, m.inMirror(mirror, "symbolic-ref", "-q", "refs/remotes/origin/HEAD"))
	if err != nil || ref == "" {
		return "", fmt.Errorf("%s has no default branch (is the repository empty?)", m.repoOf(mirror))
	}
	return strings.TrimPrefix(ref, "refs/remotes/origin/"), nil
}

// registered reports whether dir is a worktree of mirror.
func (m *Manager) registered(ctx context.Context, mirror, dir string) (bool, error) {
	data, err := os.ReadFile(filepath.Join(mirror, "worktrees", filepath.Base(dir), "gitdir"))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read worktree registration: %w", err)
	}
	if strings.TrimSpace(string(data)) != filepath.Join(dir, ".git") {
		return false, nil
	}
	_, err = os.Stat(dir)
	return err == nil, nil
}

// releaseBranch detaches any other, idle worktree that has branch checked
// out (git allows a branch in one worktree only). Running ones were
// refused by claim.
func (m *Manager) releaseBranch(ctx context.Context, mirror, dir, branch string) error {
	list, err := m.git.run(ctx, m.inMirror(mirror, "worktree", "list", "--porcelain"))
	if err != nil {
		return fmt.Errorf("list worktrees: %w", err)
	}
	var path, head string
	for _, line := range strings.Split(list, "\n") {
		switch {
		case strings.HasPrefix(line, "worktree "):
			path, head = strings.TrimPrefix(line, "worktree "), ""
		case strings.HasPrefix(line, "HEAD "):
			head = strings.TrimPrefix(line, "HEAD ")
		case line == "branch refs/heads/"+branch && path != dir && head != "":
			admin := filepath.Join(mirror, "worktrees", filepath.Base(path))
			if _, err := m.git.run(ctx, gitCall{gitDir: admin, commonDir: mirror,
				args: []string{"update-ref", "--no-deref", "HEAD", head}}); err != nil {
				return fmt.Errorf("detach idle worktree %s from %s: %w", path, branch, err)
			}
			m.cfg.Logger.Info("idle worktree detached from its branch for another task", "worktree", path, "branch", branch)
		}
	}
	return nil
}

// addWorktree registers the task's worktree on its branch, without
// checking files out yet.
func (m *Manager) addWorktree(ctx context.Context, req Request, mirror, dir, defaultBranch string) error {
	if err := m.mkdirs(filepath.Dir(dir)); err != nil {
		return err
	}
	remoteRef := "refs/remotes/origin/" + req.Branch
	exists := func(ref string) bool { return m.exists(ctx, mirror, ref) }
	add := []string{"worktree", "add", "-q", "--no-checkout"}
	onOrigin := false
	switch req.Mode {
	case Detached:
		ref, err := m.detachedTarget(ctx, mirror, req.Ref, defaultBranch)
		if err != nil {
			return err
		}
		add = append(add, "--detach", dir, ref)
	case ExistingBranch:
		if !exists(remoteRef) {
			return fmt.Errorf("%w: %s has no branch %s", ErrBranchGone, m.repoOf(mirror), req.Branch)
		}
		add = append(add, "--no-track", "-B", req.Branch, dir, remoteRef)
		onOrigin = true
	default:
		switch {
		case exists(remoteRef): // pushed by an earlier run: continue it
			add = append(add, "--no-track", "-B", req.Branch, dir, remoteRef)
			onOrigin = true
		case exists("refs/heads/" + req.Branch): // committed, never pushed
			add = append(add, dir, req.Branch)
		default:
			add = append(add, "--no-track", "-b", req.Branch, dir, "refs/remotes/origin/"+defaultBranch)
		}
	}
	if _, err := m.git.run(ctx, m.inMirror(mirror, add...)); err != nil {
		return classifyLocal(fmt.Errorf("add worktree %s: %w", dir, err))
	}
	if req.Branch != "" && onOrigin {
		// `git push` and `git pull` work without -u (the agent cannot
		// write the mirror's configuration). A branch origin does not have
		// yet gets no upstream (git status would call it gone): the
		// mirror's push.default=current pushes it all the same.
		for _, kv := range [][2]string{{"remote", "origin"}, {"merge", "refs/heads/" + req.Branch}} {
			if _, err := m.git.run(ctx, m.inMirror(mirror, "config", "branch."+req.Branch+"."+kv[0], kv[1])); err != nil {
				return fmt.Errorf("set upstream of %s: %w", req.Branch, err)
			}
		}
	}
	return nil
}

// exists reports whether ref names a commit in the mirror.
func (m *Manager) exists(ctx context.Context, mirror, ref string) bool {
	_, err := m.git.run(ctx, m.inMirror(mirror, "rev-parse", "--verify", "-q", ref+"^{commit}"))
	return err == nil
}

// detachedTarget is what a detached worktree checks out for ref: origin's
// branch of that name, else the commit ref names ("": the default branch).
func (m *Manager) detachedTarget(ctx context.Context, mirror, ref, defaultBranch string) (string, error) {
	switch {
	case ref == "":
		return "refs/remotes/origin/" + defaultBranch, nil
	case m.exists(ctx, mirror, "refs/remotes/origin/"+ref):
		return "refs/remotes/origin/" + ref, nil
	case m.exists(ctx, mirror, ref):
		return ref, nil
	}
	return "", fmt.Errorf("%w: %s has no commit or branch %q", ErrBranchGone, m.repoOf(mirror), ref)
}

// refresh brings a reused worktree up to target (origin's branch, or the
// ref a detached worktree reads) when that loses nothing: the worktree is
// clean and its HEAD is a commit origin has or had — behind target
// (fast-forward), or rewritten away by a force-push. Otherwise the
// worktree is left as it is and the note says why.
func (m *Manager) refresh(ctx context.Context, mirror, dir, target string) (string, error) {
	remote, err := m.git.run(ctx, m.inMirror(mirror, "rev-parse", "--verify", "-q", target+"^{commit}"))
	if err != nil || remote == "" {
		return "", nil // not pushed yet: nothing to catch up with
	}
	head, err := m.git.run(ctx, m.inTree(mirror, dir, "rev-parse", "HEAD"))
	if err != nil || head == remote {
		return "", err
	}
	status, err := m.git.run(ctx, m.inTree(mirror, dir, "status", "--porcelain", "--untracked-files=no"))
	if err != nil {
		return "", fmt.Errorf("read the worktree's state: %w", err)
	}
	switch {
	case status != "":
		return NoteUncommitted, nil
	case m.originHad(ctx, mirror, head, target):
		if _, err := m.git.run(ctx, m.inTree(mirror, dir, "reset", "-q", "--hard", remote)); err != nil {
			return "", fmt.Errorf("bring the worktree up to %s: %w", target, err)
		}
		return "", nil
	}
	return NoteDiverged, nil
}

// originHad reports whether origin has or had commit, so that moving a
// worktree off it loses nothing: it is in target's history, or in any of
// origin's branches, or target pointed to it at some time. The last one
// is what recognises a force-push: what the mirror held just before this
// fetch says nothing of this worktree (another task's fetch may have seen
// the rewrite first), but the reflog of origin's branch (the mirror has
// core.logAllRefUpdates) keeps every value mozi's fetches and the agents'
// pushes gave it.
func (m *Manager) originHad(ctx context.Context, mirror, commit, target string) bool {
	if _, err := m.git.run(ctx, m.inMirror(mirror, "merge-base", "--is-ancestor", commit, target)); err == nil {
		return true
	}
	if on, err := m.git.run(ctx, m.inMirror(mirror, "for-each-ref", "--count=1", "--contains", commit,
		"--format=%(refname)", "refs/remotes/origin/")); err == nil && on != "" {
		return true
	}
	if !strings.HasPrefix(target, "refs/remotes/origin/") {
		return false
	}
	log, err := m.git.run(ctx, m.inMirror(mirror, "reflog", "show", "--format=%H", target, "--"))
	if err != nil {
		return false
	}
	return slices.Contains(strings.Fields(log), commit)
}

// inMirror is a git command on the mirror itself.
func (m *Manager) inMirror(mirror string, args ...string) gitCall {
	return gitCall{args: append([]string{"--git-dir=" + mirror}, args...)}
}

// inTree is a git command in a worktree, with its git directories named
// explicitly (never read from the worktree's files).
func (m *Manager) inTree(mirror, dir string, args ...string) gitCall {
	return gitCall{args: args, gitDir: filepath.Join(mirror, "worktrees", filepath.Base(dir)),
		commonDir: mirror, workTree: dir}
}

// mkdirs creates dir and its parents, owned by the owner when there is one.
func (m *Manager) mkdirs(dir string) error {
	var missing []string
	for p := dir; ; p = filepath.Dir(p) {
		if _, err := os.Stat(p); err == nil || p == filepath.Dir(p) {
			break
		}
		missing = append(missing, p)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return classifyLocal(fmt.Errorf("create %s: %w", dir, err))
	}
	if m.cfg.Owner != nil {
		for _, p := range missing {
			if err := os.Chown(p, m.cfg.Owner.UID, m.cfg.Owner.GID); err != nil {
				return fmt.Errorf("give %s to the agents' user: %w", p, err)
			}
		}
	}
	return nil
}

// classifyLocal marks a full disk as such; other local failures stay as
// they are.
func classifyLocal(err error) error {
	if errors.Is(err, syscall.ENOSPC) || strings.Contains(strings.ToLower(err.Error()), "no space left") {
		return fmt.Errorf("%w: %w", ErrDiskFull, err)
	}
	return err
}

func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// validBranch is git's check-ref-format for a branch, as mozi's naming
// conventions define it.
func validBranch(b string) bool { return conventions.Valid(b) }
