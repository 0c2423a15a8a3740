package workspace_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/spawner/workspace"
	"github.com/moziplus/mozi/spawner/workspace/workspacetest"
)

const (
	moziToken  = "mozi-read-token-0123"
	agentToken = "agent-write-token-4567"
)

type fixture struct {
	server *workspacetest.Server
	root   string
	mgr    *workspace.Manager
	work   string // a clone of acme/widget to change origin with
}

func setup(t *testing.T, opts ...func(*workspace.Config)) *fixture {
	t.Helper()
	f := &fixture{server: workspacetest.New(t, []string{moziToken}, []string{agentToken}), root: t.TempDir()}
	f.work = f.server.NewRepo(t, "acme/widget", map[string]string{"README.md": "widget\n", "src/main.go": "package main\n"})
	cfg := workspace.Config{Root: f.root, Token: moziToken,
		RemoteURL: func(repo string) (string, error) { return f.server.URL(repo), nil }}
	for _, o := range opts {
		o(&cfg)
	}
	mgr, err := workspace.New(cfg)
	require.NoError(t, err)
	f.mgr = mgr
	return f
}

func (f *fixture) prepare(t *testing.T, req workspace.Request) workspace.Workspace {
	t.Helper()
	if req.Repo == "" {
		req.Repo = "acme/widget"
	}
	ws, err := f.mgr.Prepare(context.Background(), req)
	require.NoError(t, err)
	return ws
}

// push commits a change on origin's branch (someone else pushing).
func (f *fixture) push(t *testing.T, branch, file, content string) string {
	t.Helper()
	w := f.work
	workspacetest.Git(t, w, "checkout", "-q", "-B", branch, "origin/main")
	if out := workspacetest.Git(t, w, "ls-remote", "origin", "refs/heads/"+branch); out != "" {
		workspacetest.Git(t, w, "fetch", "-q", "origin", branch)
		workspacetest.Git(t, w, "reset", "-q", "--hard", "FETCH_HEAD")
	}
	require.NoError(t, os.WriteFile(filepath.Join(w, file), []byte(content), 0o644))
	workspacetest.Git(t, w, "add", "-A")
	workspacetest.Git(t, w, "commit", "-q", "-m", "change "+file)
	workspacetest.Git(t, w, "push", "-q", "-f", "origin", branch)
	return workspacetest.Git(t, w, "rev-parse", "HEAD")
}

// forcePush rewrites origin's branch from main, dropping what it had (a
// force-push), and returns the new commit.
func (f *fixture) forcePush(t *testing.T, branch, file, content string) string {
	t.Helper()
	w := f.work
	workspacetest.Git(t, w, "fetch", "-q", "origin")
	workspacetest.Git(t, w, "checkout", "-q", "-B", branch, "origin/main")
	require.NoError(t, os.WriteFile(filepath.Join(w, file), []byte(content), 0o644))
	workspacetest.Git(t, w, "add", "-A")
	workspacetest.Git(t, w, "commit", "-q", "-m", "rewrite with "+file)
	workspacetest.Git(t, w, "push", "-q", "-f", "origin", branch)
	return workspacetest.Git(t, w, "rev-parse", "HEAD")
}

func headBranch(t *testing.T, dir string) string {
	t.Helper()
	return workspacetest.Git(t, dir, "rev-parse", "--abbrev-ref", "HEAD")
}

func TestPrepareChecksOutTheRightBranch(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.push(t, "fix/4-pr-head", "pr.txt", "from the pull request\n")
	f.push(t, "fix/5-pushed", "earlier.txt", "an earlier attempt pushed this\n")
	mainHead := workspacetest.Git(t, f.work, "rev-parse", "origin/main")

	tests := []struct {
		name       string
		req        workspace.Request
		wantBranch string // HEAD as git names it ("HEAD" when detached)
		wantFile   string
	}{
		{"new branch from the default branch", workspace.Request{TaskID: 1, Mode: workspace.NewBranch, Branch: "fix/3-crash"},
			"fix/3-crash", "README.md"},
		{"new branch that an earlier run pushed", workspace.Request{TaskID: 2, Mode: workspace.NewBranch, Branch: "fix/5-pushed"},
			"fix/5-pushed", "earlier.txt"},
		{"a pull request's head", workspace.Request{TaskID: 3, Mode: workspace.ExistingBranch, Branch: "fix/4-pr-head"},
			"fix/4-pr-head", "pr.txt"},
		{"detached default branch", workspace.Request{TaskID: 4, Mode: workspace.Detached}, "HEAD", "src/main.go"},
		{"detached branch of origin", workspace.Request{TaskID: 5, Mode: workspace.Detached, Ref: "fix/4-pr-head"}, "HEAD", "pr.txt"},
	}
	for _, tt := range tests {
		ws := f.prepare(t, tt.req)
		assert.Equal(t, f.mgr.TreePath("acme/widget", tt.req.TaskID), ws.Dir, tt.name)
		assert.Equal(t, tt.wantBranch, headBranch(t, ws.Dir), tt.name)
		assert.FileExists(t, filepath.Join(ws.Dir, tt.wantFile), tt.name)
		assert.Equal(t, "main", ws.DefaultBranch, tt.name)
		assert.False(t, ws.Reused, tt.name)
		f.mgr.Done(tt.req.TaskID)
	}
	fresh := f.mgr.TreePath("acme/widget", 1)
	assert.Equal(t, mainHead, workspacetest.Git(t, fresh, "rev-parse", "HEAD"), "a new branch starts at origin's main")
	assert.Equal(t, "origin refs/heads/fix/3-crash", workspacetest.Git(t, fresh, "config", "branch.fix/3-crash.remote")+" "+
		workspacetest.Git(t, fresh, "config", "branch.fix/3-crash.merge"), "git push and git pull work without -u")
}

func TestPrepareRefusesWhatCannotWork(t *testing.T) {
	t.Parallel()
	f := setup(t)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	deadAddr := closed.Addr().String()
	closed.Close()

	tests := []struct {
		name string
		cfg  func(*workspace.Config)
		req  workspace.Request
		want error
	}{
		{"deleted pull request branch", nil,
			workspace.Request{TaskID: 1, Repo: "acme/widget", Mode: workspace.ExistingBranch, Branch: "fix/9-deleted"}, workspace.ErrBranchGone},
		{"no such repository", nil,
			workspace.Request{TaskID: 2, Repo: "acme/nothing", Mode: workspace.NewBranch, Branch: "fix/1-x"}, workspace.ErrNoRepository},
		{"wrong token", func(c *workspace.Config) { c.Token = "stolen-or-expired" },
			workspace.Request{TaskID: 3, Repo: "acme/widget", Mode: workspace.NewBranch, Branch: "fix/1-x"}, workspace.ErrNoAccess},
		{"network down", func(c *workspace.Config) {
			c.RemoteURL = func(repo string) (string, error) { return "http://" + deadAddr + "/" + repo + ".git", nil }
		}, workspace.Request{TaskID: 4, Repo: "acme/widget", Mode: workspace.NewBranch, Branch: "fix/1-x"}, workspace.ErrUnreachable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mgr := f.mgr
			if tt.cfg != nil {
				cfg := workspace.Config{Root: t.TempDir(), Token: moziToken,
					RemoteURL: func(repo string) (string, error) { return f.server.URL(repo), nil }}
				tt.cfg(&cfg)
				mgr, err = workspace.New(cfg)
				require.NoError(t, err)
			}
			_, err := mgr.Prepare(context.Background(), tt.req)
			require.ErrorIs(t, err, tt.want)
			assert.NotContains(t, err.Error(), moziToken)
			assert.NotContains(t, err.Error(), "stolen-or-expired")
			assert.NotContains(t, err.Error(), "\n", "one line")
		})
	}

	t.Run("Gitea down, then back", func(t *testing.T) {
		f.server.SetDown(true)
		_, err := f.mgr.Prepare(context.Background(), workspace.Request{TaskID: 10, Repo: "acme/widget",
			Mode: workspace.NewBranch, Branch: "fix/1-x"})
		f.server.SetDown(false)
		require.ErrorIs(t, err, workspace.ErrUnreachable)
		ws := f.prepare(t, workspace.Request{TaskID: 10, Mode: workspace.NewBranch, Branch: "fix/1-x"})
		assert.Equal(t, "fix/1-x", headBranch(t, ws.Dir))
	})
}

func TestRetryReusesTheWorktree(t *testing.T) {
	t.Parallel()
	f := setup(t)
	req := workspace.Request{TaskID: 7, Mode: workspace.NewBranch, Branch: "fix/7-retry"}
	first := f.prepare(t, req)
	require.NoError(t, os.WriteFile(filepath.Join(first.Dir, "half-done.txt"), []byte("work in progress\n"), 0o644))
	f.mgr.Done(7)

	again := f.prepare(t, req)
	assert.True(t, again.Reused)
	assert.Equal(t, first.Dir, again.Dir)
	assert.FileExists(t, filepath.Join(again.Dir, "half-done.txt"), "the previous attempt's work is still there")
}

func TestReusedBranchFollowsOrigin(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.push(t, "fix/4-pr", "a.txt", "one\n")
	req := workspace.Request{TaskID: 8, Mode: workspace.ExistingBranch, Branch: "fix/4-pr"}
	f.prepare(t, req)
	f.mgr.Done(8)

	advanced := f.push(t, "fix/4-pr", "b.txt", "two\n")
	ws := f.prepare(t, req)
	assert.Equal(t, advanced, ws.Head, "a clean worktree behind origin is fast-forwarded")
	f.mgr.Done(8)

	// Someone rewrites the branch (force-push) that the worktree had
	// nothing on top of.
	rewritten := f.forcePush(t, "fix/4-pr", "c.txt", "rewritten\n")
	require.NotEqual(t, "0", workspacetest.Git(t, f.work, "rev-list", "--count", rewritten+".."+advanced),
		"sanity: the rewrite dropped the branch's commits")
	ws = f.prepare(t, req)
	assert.Equal(t, rewritten, ws.Head, "a force-pushed branch is followed when nothing local would be lost")
	assert.Empty(t, ws.Note)
	f.mgr.Done(8)

	// The worktree has its own commit; origin moves on: nothing is lost.
	workspacetest.Git(t, ws.Dir, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "--allow-empty", "-m", "local")
	local := workspacetest.Git(t, ws.Dir, "rev-parse", "HEAD")
	f.push(t, "fix/4-pr", "d.txt", "moved on\n")
	ws = f.prepare(t, req)
	assert.Equal(t, local, ws.Head, "local commits are never thrown away")
	assert.Equal(t, workspace.NoteDiverged, ws.Note)
}

func TestOneWriterPerBranch(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.push(t, "fix/3-shared", "x.txt", "x\n")
	author := f.prepare(t, workspace.Request{TaskID: 1, Mode: workspace.ExistingBranch, Branch: "fix/3-shared"})

	_, err := f.mgr.Prepare(context.Background(), workspace.Request{TaskID: 2, Repo: "acme/widget",
		Mode: workspace.ExistingBranch, Branch: "fix/3-shared"})
	require.ErrorIs(t, err, workspace.ErrBranchBusy, "task 1 runs on the branch")

	reader := f.prepare(t, workspace.Request{TaskID: 3, Mode: workspace.Detached, Ref: "fix/3-shared"})
	assert.Equal(t, "HEAD", headBranch(t, reader.Dir), "readers do not need the branch")

	f.mgr.Done(1)
	second := f.prepare(t, workspace.Request{TaskID: 2, Mode: workspace.ExistingBranch, Branch: "fix/3-shared"})
	assert.Equal(t, "fix/3-shared", headBranch(t, second.Dir))
	assert.Equal(t, "HEAD", headBranch(t, author.Dir), "the idle worktree let go of the branch")
	assert.NotEqual(t, author.Dir, second.Dir, "two tasks never share a worktree")
}

// The agent pushes with its own token, which a credential helper reads
// from its environment: the token is nowhere on disk, and mozi's read
// token cannot push.
func TestAgentPushesWithItsOwnToken(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ws := f.prepare(t, workspace.Request{TaskID: 11, Mode: workspace.NewBranch, Branch: "fix/11-push"})
	require.NoError(t, os.WriteFile(filepath.Join(ws.Dir, "fix.txt"), []byte("fixed\n"), 0o644))

	agentGit := func(token string, args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = ws.Dir
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GIT_TERMINAL_PROMPT=0",
			"GITEA_TOKEN=" + token, "GIT_AUTHOR_NAME=coder1", "GIT_AUTHOR_EMAIL=coder1@example.test",
			"GIT_COMMITTER_NAME=coder1", "GIT_COMMITTER_EMAIL=coder1@example.test"}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	_, err := agentGit(agentToken, "add", "-A")
	require.NoError(t, err)
	_, err = agentGit(agentToken, "commit", "-q", "-m", "fix")
	require.NoError(t, err)

	out, err := agentGit(moziToken, "push", "origin", "fix/11-push")
	require.Error(t, err, "mozi's read token cannot push: %s", out)
	out, err = agentGit(agentToken, "push")
	require.NoError(t, err, out)

	local := workspacetest.Git(t, ws.Dir, "rev-parse", "HEAD")
	remote := workspacetest.Git(t, f.server.Bare("acme/widget"), "rev-parse", "refs/heads/fix/11-push")
	assert.Equal(t, local, remote, "the push landed on the remote branch")

	err = filepath.WalkDir(f.root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Type()&os.ModeSymlink != 0 || strings.Contains(p, "/objects/") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		assert.NotContains(t, string(data), agentToken, p)
		assert.NotContains(t, string(data), moziToken, p)
		return nil
	})
	require.NoError(t, err)
}

func TestRepositoriesAreIndependent(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.server.NewRepo(t, "acme/gadget", map[string]string{"gadget.txt": "gadget\n"})
	var wg sync.WaitGroup
	got := make([]workspace.Workspace, 2)
	errs := make([]error, 2)
	for i, repo := range []string{"acme/widget", "acme/gadget"} {
		wg.Go(func() {
			got[i], errs[i] = f.mgr.Prepare(context.Background(), workspace.Request{TaskID: int64(20 + i), Repo: repo,
				Mode: workspace.NewBranch, Branch: "fix/1-same-name"})
		})
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	assert.FileExists(t, filepath.Join(got[0].Dir, "README.md"))
	assert.FileExists(t, filepath.Join(got[1].Dir, "gadget.txt"))
	assert.NoFileExists(t, filepath.Join(got[1].Dir, "README.md"))
	assert.NotEqual(t, got[0].Mirror, got[1].Mirror)
}

type fakeTasks map[int64]workspace.TaskEnd

func (f fakeTasks) TaskEnds(_ context.Context, ids []int64) (map[int64]workspace.TaskEnd, error) {
	out := map[int64]workspace.TaskEnd{}
	for _, id := range ids {
		if e, ok := f[id]; ok {
			out[id] = e
		}
	}
	return out, nil
}

func TestSweepRemovesFinishedWorktrees(t *testing.T) {
	t.Parallel()
	now := time.Now()
	clock := now
	f := setup(t, func(c *workspace.Config) {
		c.KeepFinished = time.Hour
		c.Now = func() time.Time { return clock }
	})
	for id := int64(1); id <= 5; id++ {
		f.prepare(t, workspace.Request{TaskID: id, Mode: workspace.Detached})
		if id != 5 {
			f.mgr.Done(id)
		}
	}
	tasks := fakeTasks{
		1: {Terminal: true, FinishedAt: now.Add(-2 * time.Hour)},    // finished long ago
		2: {Terminal: true, FinishedAt: now.Add(-10 * time.Minute)}, // finished recently
		3: {},                                                       // live, idle
		// 4: gone from the database
		5: {Terminal: true, FinishedAt: now.Add(-2 * time.Hour)}, // still running (a late webhook finished it)
	}
	res, err := f.mgr.Sweep(context.Background(), tasks)
	require.NoError(t, err)
	assert.Equal(t, 2, res.Removed)
	exists := func(id int64) bool {
		_, err := os.Stat(f.mgr.TreePath("acme/widget", id))
		return err == nil
	}
	assert.False(t, exists(1))
	assert.True(t, exists(2))
	assert.True(t, exists(3))
	assert.False(t, exists(4))
	assert.True(t, exists(5), "a running task's worktree is never removed")
	list := workspacetest.Git(t, f.mgr.MirrorPath("acme/widget"), "worktree", "list")
	assert.NotContains(t, list, "/1\n")
	assert.Len(t, strings.Split(list, "\n"), 4, "the mirror and three worktrees remain registered: %s", list)

	// Over the disk budget, finished worktrees go, oldest first; live ones stay.
	mgr, err := workspace.New(workspace.Config{Root: f.root, DiskBudget: 1, Token: moziToken,
		RemoteURL: func(repo string) (string, error) { return f.server.URL(repo), nil }})
	require.NoError(t, err)
	res, err = mgr.Sweep(context.Background(), tasks)
	require.NoError(t, err)
	assert.Equal(t, 2, res.Removed, "#2 (finished) and #5 (finished, not running in this manager)")
	assert.True(t, res.OverBudget, "#3 is live: it stays, over budget or not")
	assert.True(t, exists(3))
}

func TestBranchNamesAreChecked(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, bad := range []string{"", "-f", "../x", "a..b", "a b", "x.lock", "refs/../..", "a\x00b"} {
		_, err := f.mgr.Prepare(context.Background(), workspace.Request{TaskID: 1, Repo: "acme/widget",
			Mode: workspace.NewBranch, Branch: bad})
		assert.Error(t, err, "%q", bad)
	}
	for _, bad := range []string{"../etc", "acme/../x", "acme", "a/b/c"} {
		_, err := f.mgr.Prepare(context.Background(), workspace.Request{TaskID: 1, Repo: bad, Mode: workspace.Detached})
		assert.Error(t, err, "%q", bad)
	}
}

// A force-push is recognised whichever task's fetch saw it first: the
// retry of the pull request's task follows the rewritten branch even when
// another task of the repository fetched in between.
func TestForcePushSeenByAnotherTaskFirst(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.push(t, "fix/4-pr", "a.txt", "one\n")
	req := workspace.Request{TaskID: 8, Mode: workspace.ExistingBranch, Branch: "fix/4-pr"}
	f.prepare(t, req)
	f.mgr.Done(8)

	rewritten := f.forcePush(t, "fix/4-pr", "b.txt", "rewritten\n")
	f.prepare(t, workspace.Request{TaskID: 99, Mode: workspace.Detached}) // fetches the rewrite first
	f.mgr.Done(99)
	ws := f.prepare(t, req)
	assert.Equal(t, rewritten, ws.Head)
	assert.Empty(t, ws.Note)
}

// A detached worktree reused by a retry (a review request) shows what the
// pull request has now, not what it had at the first run.
func TestReusedDetachedWorktreeFollowsItsRef(t *testing.T) {
	t.Parallel()
	f := setup(t)
	first := f.push(t, "fix/4-pr", "a.txt", "one\n")
	req := workspace.Request{TaskID: 8, Mode: workspace.Detached, Ref: "fix/4-pr"}
	assert.Equal(t, first, f.prepare(t, req).Head)
	f.mgr.Done(8)

	second := f.push(t, "fix/4-pr", "b.txt", "two\n")
	ws := f.prepare(t, req)
	assert.True(t, ws.Reused)
	assert.Equal(t, second, ws.Head, "the retry reviews the pull request's new commit")
	f.mgr.Done(8)

	require.NoError(t, os.WriteFile(filepath.Join(ws.Dir, "README.md"), []byte("edited\n"), 0o644))
	f.push(t, "fix/4-pr", "c.txt", "three\n")
	ws = f.prepare(t, req)
	assert.Equal(t, second, ws.Head, "uncommitted changes are not thrown away")
	assert.Equal(t, workspace.NoteUncommitted, ws.Note)
}

// A local failure (a ref lock left by a killed git) is not "the remote is
// unreachable": that would hold the task for ever without a word. It is a
// plain error naming the git command, retried and in the end failed.
func TestALocalGitFailureIsNotUnreachable(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.prepare(t, workspace.Request{TaskID: 1, Mode: workspace.Detached})
	f.mgr.Done(1)
	f.push(t, "main", "z.txt", "z\n")
	lock := filepath.Join(f.mgr.MirrorPath("acme/widget"), "refs", "remotes", "origin", "main.lock")
	require.NoError(t, os.WriteFile(lock, nil, 0o644))

	_, err := f.mgr.Prepare(context.Background(), workspace.Request{TaskID: 2, Repo: "acme/widget", Mode: workspace.Detached})
	require.Error(t, err)
	assert.NotErrorIs(t, err, workspace.ErrUnreachable)
	assert.Contains(t, err.Error(), "git fetch:")
	assert.NotContains(t, err.Error(), "--git-dir")
}

// One worktree that cannot be removed does not stop the sweep: the others
// still go, and the error says which failed.
func TestSweepGoesOnPastAWorktreeItCannotRemove(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.server.NewRepo(t, "acme/gadget", map[string]string{"g.txt": "g\n"})
	f.prepare(t, workspace.Request{TaskID: 1, Repo: "acme/gadget", Mode: workspace.Detached})
	f.prepare(t, workspace.Request{TaskID: 2, Mode: workspace.Detached})
	f.mgr.Done(1)
	f.mgr.Done(2)
	// acme/gadget's mirror is broken: forgetting its worktree fails.
	require.NoError(t, os.Remove(filepath.Join(f.mgr.MirrorPath("acme/gadget"), "HEAD")))

	res, err := f.mgr.Sweep(context.Background(), fakeTasks{}) // both tasks gone
	require.Error(t, err)
	assert.Contains(t, err.Error(), "worktree")
	assert.Equal(t, 1, res.Removed)
	_, statErr := os.Stat(f.mgr.TreePath("acme/widget", 2))
	assert.ErrorIs(t, statErr, os.ErrNotExist, "acme/widget's worktree went despite acme/gadget's failure")
}
