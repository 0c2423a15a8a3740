package workspace_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
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

	"github.com/moziplus/mozi/spawner/backend/local/workspace"
	"github.com/moziplus/mozi/spawner/backend/local/workspace/workspacetest"
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

// forcePush rewrites origin's branch (someone force-pushing): a new commit
// on origin's main replaces whatever the branch had.
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

// agentGit runs git in a worktree as an agent does: with its token in
// $GITEA_TOKEN, and nothing of the test's environment.
func agentGit(t *testing.T, dir, token string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GIT_TERMINAL_PROMPT=0",
		"GITEA_TOKEN=" + token, "GIT_AUTHOR_NAME=coder1", "GIT_AUTHOR_EMAIL=coder1@example.test",
		"GIT_COMMITTER_NAME=coder1", "GIT_COMMITTER_EMAIL=coder1@example.test"}
	out, err := cmd.CombinedOutput()
	return string(out), err
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
	pushed := f.mgr.TreePath("acme/widget", 2)
	assert.Equal(t, "origin refs/heads/fix/5-pushed", workspacetest.Git(t, pushed, "config", "branch.fix/5-pushed.remote")+" "+
		workspacetest.Git(t, pushed, "config", "branch.fix/5-pushed.merge"), "git push and git pull work without -u")
	// A branch origin does not have yet has no upstream (git status would
	// call it gone), and plain git push creates it there.
	assert.NotContains(t, workspacetest.Git(t, fresh, "status"), "upstream is gone")
	require.NoError(t, os.WriteFile(filepath.Join(fresh, "new.txt"), []byte("new\n"), 0o644))
	workspacetest.Git(t, fresh, "add", "new.txt")
	workspacetest.Git(t, fresh, "commit", "-q", "-m", "new")
	out, err := agentGit(t, fresh, agentToken, "push", "-q")
	require.NoError(t, err, out)
	assert.Equal(t, workspacetest.Git(t, fresh, "rev-parse", "HEAD"),
		workspacetest.Git(t, f.work, "ls-remote", "origin", "refs/heads/fix/3-crash")[:40])
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

// A lock on one of the mirror's refs is not the network: a leftover of a
// killed git is removed, and one that a live git holds is a plain error
// (retried, and in the end reported), never ErrUnreachable (a wait
// without end and without a word).
func TestLockedRefIsNotUnreachable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		age     time.Duration
		wantErr bool
	}{
		{"left by a git killed long ago", 2 * time.Minute, false},
		{"held by a git running now", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			f.prepare(t, workspace.Request{TaskID: 1, Mode: workspace.Detached})
			f.mgr.Done(1)
			moved := f.push(t, "main", "z.txt", "z\n")
			lock := filepath.Join(f.mgr.MirrorPath("acme/widget"), "refs", "remotes", "origin", "main.lock")
			require.NoError(t, os.WriteFile(lock, nil, 0o644))
			when := time.Now().Add(-tt.age)
			require.NoError(t, os.Chtimes(lock, when, when))

			ws, err := f.mgr.Prepare(context.Background(), workspace.Request{TaskID: 2, Repo: "acme/widget", Mode: workspace.Detached})
			if !tt.wantErr {
				require.NoError(t, err)
				assert.Equal(t, moved, ws.Head)
				assert.NoFileExists(t, lock)
				return
			}
			require.Error(t, err)
			for _, e := range []error{workspace.ErrUnreachable, workspace.ErrNoAccess, workspace.ErrNoRepository} {
				assert.NotErrorIs(t, err, e)
			}
			assert.FileExists(t, lock, "another git's lock stays")
			assert.Contains(t, err.Error(), "git fetch: cannot lock ref 'refs/remotes/origin/main'", "names the command, not its options")
			assert.NotContains(t, err.Error(), f.root, "no absolute paths of mozi's layout")
			assert.NotContains(t, err.Error(), "\n", "one line")
		})
	}
}

// A git command cancelled with its context (mozi shutting down, a run's
// deadline) gets to remove its lock files, which a SIGKILL would leave.
func TestCancelledGitRemovesItsLocks(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.prepare(t, workspace.Request{TaskID: 1, Mode: workspace.Detached})
	f.mgr.Done(1)
	f.push(t, "main", "z.txt", "z\n")
	lock := filepath.Join(f.mgr.MirrorPath("acme/widget"), "refs", "remotes", "origin", "main.lock")

	// A fetch that takes its lock and then hangs, and removes the lock
	// on SIGTERM as git does; every other command is git itself.
	fakeGit := filepath.Join(t.TempDir(), "git")
	gitPath, err := exec.LookPath("git")
	require.NoError(t, err)
	script := `#!/bin/sh
for a; do case "$a" in fetch) exec 3>"` + lock + `"; trap 'rm -f "` + lock + `"; exit 143' TERM
	sleep 30 >/dev/null 2>&1 & wait $!; exit 1;; esac; done
exec ` + gitPath + ` "$@"
`
	require.NoError(t, os.WriteFile(fakeGit, []byte(script), 0o755))
	mgr, err := workspace.New(workspace.Config{Root: f.root, Token: moziToken, Git: fakeGit,
		RemoteURL: func(repo string) (string, error) { return f.server.URL(repo), nil }})
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = mgr.Prepare(ctx, workspace.Request{TaskID: 2, Repo: "acme/widget", Mode: workspace.Detached})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "git fetch:")
	assert.NoFileExists(t, lock, "the cancelled fetch removed its lock")
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
	ws = f.prepare(t, req)
	assert.Equal(t, rewritten, ws.Head, "a force-pushed branch is followed when nothing local would be lost")
	assert.Empty(t, ws.Note)
	assert.NoFileExists(t, filepath.Join(ws.Dir, "b.txt"), "the rewritten commits are gone")
	f.mgr.Done(8)

	// The worktree has its own commit; origin moves on: nothing is lost.
	workspacetest.Git(t, ws.Dir, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "--allow-empty", "-m", "local")
	local := workspacetest.Git(t, ws.Dir, "rev-parse", "HEAD")
	f.push(t, "fix/4-pr", "d.txt", "moved on\n")
	ws = f.prepare(t, req)
	assert.Equal(t, local, ws.Head, "local commits are never thrown away")
	assert.Equal(t, workspace.NoteDiverged, ws.Note)
}

// Whether a retry follows a force-push depends on what the worktree has,
// not on which fetch of the mirror saw the rewrite first.
func TestRetryFollowsAForcePush(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// attempt is what the previous attempt did in its worktree.
		attempt func(t *testing.T, ws workspace.Workspace)
		// between runs after the force-push, before the retry.
		between  func(t *testing.T, f *fixture)
		wantMove bool
		wantNote string
	}{
		{"nothing happened meanwhile", nil, nil, true, ""},
		{"another task of the repository fetched first", nil, func(t *testing.T, f *fixture) {
			f.prepare(t, workspace.Request{TaskID: 99, Mode: workspace.Detached})
			f.mgr.Done(99)
		}, true, ""},
		{"the attempt pushed its commit, which was rewritten", func(t *testing.T, ws workspace.Workspace) {
			workspacetest.Git(t, ws.Dir, "commit", "-q", "--allow-empty", "-m", "pushed by the agent")
			out, err := agentGit(t, ws.Dir, agentToken, "push", "-q")
			require.NoError(t, err, out)
		}, nil, true, ""},
		{"a local commit never pushed", func(t *testing.T, ws workspace.Workspace) {
			workspacetest.Git(t, ws.Dir, "commit", "-q", "--allow-empty", "-m", "local")
		}, nil, false, workspace.NoteDiverged},
		{"uncommitted changes", func(t *testing.T, ws workspace.Workspace) {
			require.NoError(t, os.WriteFile(filepath.Join(ws.Dir, "a.txt"), []byte("edited\n"), 0o644))
		}, nil, false, workspace.NoteUncommitted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			f.push(t, "fix/4-pr", "a.txt", "one\n")
			req := workspace.Request{TaskID: 8, Mode: workspace.ExistingBranch, Branch: "fix/4-pr"}
			ws := f.prepare(t, req)
			if tt.attempt != nil {
				tt.attempt(t, ws)
			}
			f.mgr.Done(8)
			rewritten := f.forcePush(t, "fix/4-pr", "c.txt", "rewritten\n")
			if tt.between != nil {
				tt.between(t, f)
			}
			before := workspacetest.Git(t, ws.Dir, "rev-parse", "HEAD")

			again := f.prepare(t, req)
			assert.True(t, again.Reused)
			assert.Equal(t, tt.wantNote, again.Note)
			if tt.wantMove {
				assert.Equal(t, rewritten, again.Head, "nothing would be lost: the worktree follows the rewritten branch")
			} else {
				assert.Equal(t, before, again.Head, "the worktree keeps what origin does not have")
			}
		})
	}
}

// A retry of a task that reads (a review request) reads what its ref has
// now, unless the previous attempt left changes there.
func TestRetryOfDetachedTaskFollowsItsRef(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		ref      string
		dirty    bool
		move     func(t *testing.T, f *fixture) string
		wantMove bool
		wantNote string
	}{
		{"pull request head pushed to", "fix/4-pr", false,
			func(t *testing.T, f *fixture) string { return f.push(t, "fix/4-pr", "b.txt", "two\n") }, true, ""},
		{"pull request head force-pushed", "fix/4-pr", false,
			func(t *testing.T, f *fixture) string { return f.forcePush(t, "fix/4-pr", "c.txt", "rewritten\n") }, true, ""},
		{"default branch moved", "", false,
			func(t *testing.T, f *fixture) string { return f.push(t, "main", "d.txt", "main moved\n") }, true, ""},
		{"previous attempt left changes", "fix/4-pr", true,
			func(t *testing.T, f *fixture) string { return f.push(t, "fix/4-pr", "b.txt", "two\n") }, false, workspace.NoteUncommitted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			f.push(t, "fix/4-pr", "a.txt", "one\n")
			req := workspace.Request{TaskID: 8, Mode: workspace.Detached, Ref: tt.ref}
			first := f.prepare(t, req)
			if tt.dirty {
				require.NoError(t, os.WriteFile(filepath.Join(first.Dir, "README.md"), []byte("notes\n"), 0o644))
			}
			f.mgr.Done(8)
			moved := tt.move(t, f)

			again := f.prepare(t, req)
			assert.True(t, again.Reused)
			assert.Equal(t, "HEAD", headBranch(t, again.Dir), "still detached")
			assert.Equal(t, tt.wantNote, again.Note)
			if tt.wantMove {
				assert.Equal(t, moved, again.Head)
			} else {
				assert.Equal(t, first.Head, again.Head)
				assert.FileExists(t, filepath.Join(again.Dir, "README.md"))
			}
		})
	}
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

	_, err := agentGit(t, ws.Dir, agentToken, "add", "-A")
	require.NoError(t, err)
	_, err = agentGit(t, ws.Dir, agentToken, "commit", "-q", "-m", "fix")
	require.NoError(t, err)

	out, err := agentGit(t, ws.Dir, moziToken, "push", "origin", "fix/11-push")
	require.Error(t, err, "mozi's read token cannot push: %s", out)
	out, err = agentGit(t, ws.Dir, agentToken, "push")
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

// One worktree that cannot be removed does not keep the sweep from the
// others.
func TestSweepGoesOnPastAWorktreeItCannotRemove(t *testing.T) {
	t.Parallel()
	now := time.Now()
	tests := []struct {
		name   string
		budget int64
		ended  time.Duration // how long ago the tasks finished
	}{
		{"finished long ago", 0, 2 * time.Hour},
		{"over the disk budget", 1, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, func(c *workspace.Config) {
				c.DiskBudget = tt.budget
				c.Now = func() time.Time { return now }
			})
			f.server.NewRepo(t, "acme/gadget", map[string]string{"gadget.txt": "gadget\n"})
			// acme/gadget comes first, by name and by age.
			f.prepare(t, workspace.Request{TaskID: 1, Repo: "acme/gadget", Mode: workspace.Detached})
			f.prepare(t, workspace.Request{TaskID: 2, Mode: workspace.Detached})
			f.mgr.Done(1)
			f.mgr.Done(2)
			// A broken mirror: its worktrees cannot be unregistered.
			require.NoError(t, os.WriteFile(filepath.Join(f.mgr.MirrorPath("acme/gadget"), "config"), []byte("[broken\n"), 0o644))

			res, err := f.mgr.Sweep(context.Background(), fakeTasks{
				1: {Terminal: true, FinishedAt: now.Add(-tt.ended - time.Minute)},
				2: {Terminal: true, FinishedAt: now.Add(-tt.ended)},
			})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "task 1 of acme/gadget")
			assert.Equal(t, 1, res.Removed)
			assert.NoDirExists(t, f.mgr.TreePath("acme/widget", 2), "the sweep went on to the next worktree")
		})
	}
}

// A task requeued while the sweep runs keeps the worktree it is prepared
// in: the sweep looks again, under the repository's lock, whether it runs.
func TestSweepSparesATaskRequeuedMeanwhile(t *testing.T) {
	t.Parallel()
	now := time.Now()
	var mgr *workspace.Manager
	var requeued workspace.Workspace
	var once sync.Once
	// An operator requeues task 2 just as the sweep has removed #1, after
	// it chose #2 to go as well.
	hook := logHook(func(r slog.Record) {
		if r.Message != "worktree removed" {
			return
		}
		once.Do(func() {
			var err error
			requeued, err = mgr.Prepare(context.Background(), workspace.Request{TaskID: 2, Repo: "acme/widget", Mode: workspace.Detached})
			require.NoError(t, err)
		})
	})
	f := setup(t, func(c *workspace.Config) {
		c.DiskBudget = 1
		c.Logger = slog.New(hook)
	})
	mgr = f.mgr
	for id := int64(1); id <= 2; id++ {
		f.prepare(t, workspace.Request{TaskID: id, Mode: workspace.Detached})
		f.mgr.Done(id)
	}
	res, err := f.mgr.Sweep(context.Background(), fakeTasks{
		1: {Terminal: true, FinishedAt: now.Add(-20 * time.Minute)},
		2: {Terminal: true, FinishedAt: now.Add(-10 * time.Minute)},
	})
	require.NoError(t, err)
	require.True(t, requeued.Reused, "task 2 was requeued during the sweep")
	assert.Equal(t, 1, res.Removed)
	assert.True(t, res.OverBudget, "what is left runs")
	assert.NoDirExists(t, f.mgr.TreePath("acme/widget", 1))
	assert.FileExists(t, filepath.Join(requeued.Dir, "README.md"), "the requeued task keeps its worktree")
}

// logHook is a slog handler that passes every record to a function.
type logHook func(slog.Record)

func (h logHook) Enabled(context.Context, slog.Level) bool { return true }

func (h logHook) Handle(_ context.Context, r slog.Record) error {
	h(r)
	return nil
}

func (h logHook) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h logHook) WithGroup(string) slog.Handler { return h }

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
	for _, bad := range []string{"--upload-pack=evil", "-q", "a..b", "x y"} {
		_, err := f.mgr.Prepare(context.Background(), workspace.Request{TaskID: 1, Repo: "acme/widget", Mode: workspace.Detached, Ref: bad})
		assert.ErrorContains(t, err, "is not a branch or commit", "%q", bad)
	}
}

// gatedGit is a git whose checkouts (reset --hard in a new worktree) each
// wait for the file go in dir before running, and that leaves in dir
// started.<pid> and done.<pid> for each checkout, and booked.<pid> when a
// worktree is added (the last step before its checkout).
func gatedGit(t *testing.T, dir string) string {
	t.Helper()
	gitPath, err := exec.LookPath("git")
	require.NoError(t, err)
	// A failed test opens the gate, so no checkout waits past its end.
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(dir, "go"), nil, 0o644) })
	fake := filepath.Join(t.TempDir(), "git")
	script := `#!/bin/sh
case " $* " in
*" reset -q --hard "*)
	touch "` + dir + `/started.$$"
	n=0
	while [ ! -e "` + dir + `/go" ]; do
		# The test is gone (its directory removed) or stuck: never outlive it.
		[ -d "` + dir + `" ] && [ $n -lt 6000 ] || exit 1
		n=$((n+1)); sleep 0.01
	done
	` + gitPath + ` "$@"; rc=$?
	touch "` + dir + `/done.$$"
	exit $rc;;
*" worktree add "*)
	` + gitPath + ` "$@"; rc=$?
	touch "` + dir + `/booked.$$"
	exit $rc;;
esac
exec ` + gitPath + ` "$@"
`
	require.NoError(t, os.WriteFile(fake, []byte(script), 0o755))
	return fake
}

// booked counts the worktrees added, whose checkout may start.
func booked(t *testing.T, dir string) int {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(dir, "booked.*"))
	require.NoError(t, err)
	return len(matches)
}

// checkouts counts the checkouts started and not finished in dir.
func checkouts(t *testing.T, dir string) (running, started int) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		switch {
		case strings.HasPrefix(e.Name(), "started."):
			started++
			running++
		case strings.HasPrefix(e.Name(), "done."):
			running--
		}
	}
	return running, started
}

// Worktrees of one repository check their files out in turns: with a cap
// of n, the n first run and the others wait until one is done; all get
// their worktree. Without a cap, all run at once.
func TestCheckoutsOfARepositoryTakeTurns(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		cap      int
		together int // checkouts that run at once, of three
	}{
		{"one at a time (the default)", 0, 1},
		{"two at a time", 2, 2},
		{"no cap", -1, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gate := t.TempDir()
			f := setup(t, func(c *workspace.Config) { c.Git, c.CheckoutsPerRepo = gatedGit(t, gate), tt.cap })
			require.NoError(t, os.WriteFile(filepath.Join(gate, "go"), nil, 0o644))
			f.prepare(t, workspace.Request{TaskID: 1, Mode: workspace.Detached}) // the mirror
			f.mgr.Done(1)
			require.NoError(t, os.Remove(filepath.Join(gate, "go")))

			errs := make(chan error, 3)
			for id := int64(2); id <= 4; id++ {
				go func() {
					_, err := f.mgr.Prepare(context.Background(), workspace.Request{TaskID: id, Repo: "acme/widget",
						Mode: workspace.NewBranch, Branch: fmt.Sprintf("fix/%d-turns", id)})
					errs <- err
				}()
			}
			// Every worktree is added and may check out: the first ones do,
			// the others wait for their turn.
			require.Eventually(t, func() bool { return booked(t, gate) == 1+3 }, 30*time.Second, 10*time.Millisecond,
				"the mirror's worktree and the three new ones are added")
			require.Eventually(t, func() bool { _, started := checkouts(t, gate); return started == tt.together+1 },
				10*time.Second, 10*time.Millisecond, "%d checkouts start at once", tt.together)
			require.Never(t, func() bool { _, started := checkouts(t, gate); return started > tt.together+1 },
				500*time.Millisecond, 10*time.Millisecond, "no more than %d checkouts run at once", tt.together)

			require.NoError(t, os.WriteFile(filepath.Join(gate, "go"), nil, 0o644))
			for range 3 {
				require.NoError(t, <-errs)
			}
			running, started := checkouts(t, gate)
			assert.Equal(t, 4, started, "every worktree was checked out")
			assert.Zero(t, running)
			for id := int64(2); id <= 4; id++ {
				assert.FileExists(t, filepath.Join(f.mgr.TreePath("acme/widget", id), "README.md"))
			}
		})
	}
}

// A run stopped while its checkout waits for its turn gives up the wait
// and leaves no half-made worktree: the task's next run starts afresh.
func TestCheckoutWaitEndsWithTheRun(t *testing.T) {
	t.Parallel()
	gate := t.TempDir()
	var logs syncBuffer
	f := setup(t, func(c *workspace.Config) {
		c.Git = gatedGit(t, gate)
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	require.NoError(t, os.WriteFile(filepath.Join(gate, "go"), nil, 0o644))
	f.prepare(t, workspace.Request{TaskID: 1, Mode: workspace.Detached})
	f.mgr.Done(1)
	require.NoError(t, os.Remove(filepath.Join(gate, "go")))

	first := make(chan error, 1)
	go func() {
		_, err := f.mgr.Prepare(context.Background(), workspace.Request{TaskID: 2, Repo: "acme/widget", Mode: workspace.Detached})
		first <- err
	}()
	require.Eventually(t, func() bool { _, started := checkouts(t, gate); return started == 2 }, 10*time.Second, 10*time.Millisecond)

	ctx, cancel := context.WithCancel(context.Background())
	waiting := make(chan error, 1)
	req := workspace.Request{TaskID: 3, Repo: "acme/widget", Mode: workspace.NewBranch, Branch: "fix/3-stopped"}
	go func() {
		_, err := f.mgr.Prepare(ctx, req)
		waiting <- err
	}()
	// Its worktree added, it waits for the turn task 2 holds.
	require.Eventually(t, func() bool {
		return strings.Contains(logs.String(), "checkout waits for its turn") && strings.Contains(logs.String(), "task_id=3")
	}, 10*time.Second, 10*time.Millisecond)
	cancel()
	err := <-waiting
	require.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), "wait for a checkout")
	assert.NoDirExists(t, f.mgr.TreePath("acme/widget", 3))
	_, started := checkouts(t, gate)
	assert.Equal(t, 2, started, "the stopped run never checked out")

	require.NoError(t, os.WriteFile(filepath.Join(gate, "go"), nil, 0o644))
	require.NoError(t, <-first)
	ws := f.prepare(t, req)
	assert.False(t, ws.Reused)
	assert.FileExists(t, filepath.Join(ws.Dir, "README.md"))
}

// syncBuffer is a bytes.Buffer for a logger and a test reading it at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
