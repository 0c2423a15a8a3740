package spawner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/prompts"
	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/pgtest"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/spawner/agenttest"
	"github.com/moziplus/mozi/spawner/backend"
	"github.com/moziplus/mozi/spawner/backend/local"
	"github.com/moziplus/mozi/spawner/backend/local/sandbox"
	"github.com/moziplus/mozi/spawner/backend/local/workspace"
	"github.com/moziplus/mozi/spawner/backend/local/workspace/workspacetest"
)

const (
	moziGitToken  = "mozi-fetch-token-1234"
	agentGitToken = "coder1-push-token-5678"
)

// flow is what a run needs around the spawner, for real: PostgreSQL, a git
// server that checks tokens like Gitea, the worktree manager and the
// sandbox, as mozi serve wires them.
type flow struct {
	store *repository.Store
	git   *workspacetest.Server
	state string
	ws    *workspace.Manager
	sb    *sandbox.Sandbox
	runAs *syscall.Credential
}

func newFlow(t *testing.T) *flow {
	t.Helper()
	if _, err := sandbox.New("", t.TempDir()); err != nil {
		if os.Getenv("MOZI_REQUIRE_SANDBOX") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	f := &flow{store: pgtest.Store(t), git: workspacetest.New(t, []string{moziGitToken}, []string{agentGitToken})}
	state, err := os.MkdirTemp("", "mozi-flow-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(state) })
	require.NoError(t, os.Chmod(state, 0o755)) // the agents' user traverses it, as mozi's data dir
	f.state = state
	var owner *workspace.Owner
	if os.Geteuid() == 0 {
		f.runAs = &syscall.Credential{Uid: nobody, Gid: nobody, NoSetGroups: true}
		owner = &workspace.Owner{UID: nobody, GID: nobody}
	}
	f.ws, err = workspace.New(workspace.Config{Root: filepath.Join(state, "workspaces"), Token: moziGitToken, Owner: owner,
		RemoteURL: func(repo string) (string, error) { return f.git.URL(repo), nil }})
	require.NoError(t, err)
	f.sb, err = sandbox.New("", filepath.Join(state, "sandbox"))
	require.NoError(t, err)
	return f
}

// claim makes an issue_assigned task and claims it.
func (f *flow) claim(t *testing.T, repo string, issue int, title, agent string) task.Task {
	t.Helper()
	ctx := context.Background()
	_, err := f.store.CreateTask(ctx, repository.NewTask{Repo: repo, IssueNumber: issue, Priority: 2,
		ActionType: task.ActionIssueAssigned, BusinessType: task.BusinessBug, Agent: agent,
		Meta: task.Meta{Title: title}})
	require.NoError(t, err)
	tasks, err := f.store.ClaimTasks(ctx, repository.ClaimRequest{Owner: "r1", Limit: 1, LeaseTTL: time.Minute,
		Agents: []repository.AgentLimit{{Login: agent, MaxConcurrency: 4}}})
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	return tasks[0]
}

func (f *flow) spawner(agents map[string]Agent, env map[string]string) *Spawner {
	b := local.New(local.Config{StateDir: f.state, Workspaces: f.ws, Sandbox: f.sb, RunAs: f.runAs})
	return New(Config{Owner: "r1", StateDir: f.state, Agents: agents, KillGrace: time.Second,
		Getenv: func(k string) string { return env[k] }}, f.store, b, titlePrompt{})
}

// titlePrompt gathers a task from its own copy of the issue and renders
// a one-line prompt: the flow tests need the branch name, not a prompt.
type titlePrompt struct{}

func (titlePrompt) Gather(_ context.Context, t task.Task) (*prompts.Input, error) {
	return &prompts.Input{Task: t, Issue: task.Issue{Repo: t.Repo, Number: t.IssueNumber, Title: t.Meta.Title}}, nil
}

func (titlePrompt) Build(in *prompts.Input) (*prompts.Prompt, error) {
	return &prompts.Prompt{Text: fmt.Sprintf("Fix %s#%d in %s.", in.Task.Repo, in.Task.IssueNumber, in.Checkout.Dir)}, nil
}

func (f *flow) attempt(t *testing.T, id int64) task.Attempt {
	t.Helper()
	attempts, err := f.store.Attempts(context.Background(), id)
	require.NoError(t, err)
	require.Len(t, attempts, 1)
	return attempts[0]
}

// Each real agent CLI that is installed, driven through the spawner as
// mozi serve drives it: the task gets a worktree on its new branch, the
// CLI runs in the sandbox as the agents' user, the fake model's tool call
// writes a file there, commits and pushes it with the agent's own token,
// and the attempt records the tokens (and cost) the model reported.
func TestRealAgentWorksInItsWorktree(t *testing.T) {
	for _, preset := range []string{"claude-code", "codex", "opencode"} {
		t.Run(preset, func(t *testing.T) {
			t.Parallel()
			cli := agenttest.FindCLI(t, preset)
			f := newFlow(t)
			f.git.NewRepo(t, "acme/widget", map[string]string{"README.md": "widget\n"})
			script := agenttest.Script{File: "hello.txt", Content: "fixed by " + preset + "\n", Answer: "Done.",
				Then: "git add hello.txt && git commit -qm 'fix: hello' && git push -q",
				Tool: agenttest.Usage{Input: 900, CacheRead: 100, Output: 30}, Final: agenttest.Usage{Input: 1000, Output: 20}}
			model := agenttest.NewServer(t, script)
			home := filepath.Join(f.state, "agents", "coder1", "home")
			require.NoError(t, os.MkdirAll(home, 0o755))
			vars, err := model.Env(preset, home)
			require.NoError(t, err)
			delete(vars, "HOME")
			if f.runAs != nil {
				chownAll(t, filepath.Dir(home), nobody)
			}
			cmd, err := ResolveAgent(preset, nil, "", nil)
			require.NoError(t, err)
			agents := map[string]Agent{"coder1": {Agent: backend.Agent{Login: "coder1", Argv: cmd.Argv,
				Home: home, Worktree: true, Sandboxed: true,
				Limits: backend.Limits{MemoryBytes: 8 << 30, Processes: 4096, CPUTime: time.Hour, OpenFiles: 8192}},
				Usage: cmd.Usage, PresetEnv: cmd.Env, Env: vars, TokenEnv: "CODER1_TOKEN", Timeout: 3 * time.Minute}}
			sp := f.spawner(agents, map[string]string{"PATH": cli.PATH, "LANG": "C.UTF-8", "CODER1_TOKEN": agentGitToken})

			tk := f.claim(t, "acme/widget", 3, "Crash on empty config", "coder1")
			sp.Handle(context.Background(), tk)

			a := f.attempt(t, tk.ID)
			logText, _ := os.ReadFile(a.LogPath)
			require.Equal(t, task.AttemptSucceeded, a.Outcome, "%s\n%s", a.Error, logText)
			require.Empty(t, model.Errors())
			tree := f.ws.TreePath("acme/widget", tk.ID)
			written, err := os.ReadFile(filepath.Join(tree, "hello.txt"))
			require.NoError(t, err, "the file is in the task's worktree")
			assert.Equal(t, script.Content, string(written))
			const branch = "fix/3-crash-on-empty-config"
			assert.Equal(t, branch, workspacetest.Git(t, tree, "rev-parse", "--abbrev-ref", "HEAD"))
			pushed := workspacetest.Git(t, f.git.Bare("acme/widget"), "show", branch+":hello.txt")
			assert.Equal(t, strings.TrimSpace(script.Content), pushed, "the push landed on the remote branch")
			author := workspacetest.Git(t, f.git.Bare("acme/widget"), "log", "-1", "--format=%an", branch)
			assert.Equal(t, "coder1", author)
			assert.Equal(t, script.TokensIn(agenttest.OpenAIWire(preset)), a.TokensIn)
			assert.Equal(t, script.TokensOut(), a.TokensOut)
			if preset != "codex" {
				require.NotNil(t, a.CostUSD)
				assert.InDelta(t, script.Cost(), *a.CostUSD, 1e-9)
			}
			got, err := f.store.Task(context.Background(), tk.ID)
			require.NoError(t, err)
			assert.Equal(t, task.StatusWorking, got.Status, "the task waits for Gitea's pull request event")
		})
	}
}

// Two runs of one agent at once, on two repositories: each works in its
// own worktree and sees no other (nor mozi's data, nor the other mirror).
func TestConcurrentRunsSeeOnlyTheirOwnWorktree(t *testing.T) {
	f := newFlow(t)
	f.git.NewRepo(t, "acme/widget", map[string]string{"widget.txt": "w\n"})
	f.git.NewRepo(t, "acme/gadget", map[string]string{"gadget.txt": "g\n"})
	// The run waits for the other to start, then writes down what it can
	// see of the worktrees, the mirrors and mozi's logs.
	script := fmt.Sprintf(`touch started; for i in $(seq 100); do [ $(ls %[1]s/trees/acme/*/*/started 2>/dev/null | wc -l) -ge 2 ] && break; sleep 0.05; done
ls %[1]s/trees/acme > seen.txt 2>&1; ls %[1]s/mirrors/acme >> seen.txt 2>&1; ls %[2]s/logs >> seen.txt 2>&1; echo end >> seen.txt`,
		filepath.Join(f.state, "workspaces"), f.state)
	cmd, err := ResolveAgent("shell", nil, script, nil)
	require.NoError(t, err)
	agents := map[string]Agent{"coder1": {Agent: backend.Agent{Login: "coder1", Argv: cmd.Argv,
		Home: filepath.Join(f.state, "agents", "coder1", "home"), Worktree: true, Sandboxed: true}, Timeout: time.Minute}}
	sp := f.spawner(agents, map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin"})
	tasks := []task.Task{f.claim(t, "acme/widget", 3, "Widget", "coder1"), f.claim(t, "acme/gadget", 4, "Gadget", "coder1")}
	var wg sync.WaitGroup
	for _, tk := range tasks {
		wg.Go(func() { sp.Handle(context.Background(), tk) })
	}
	wg.Wait()
	for i, repo := range []string{"widget", "gadget"} {
		a := f.attempt(t, tasks[i].ID)
		require.Equal(t, task.AttemptSucceeded, a.Outcome, a.Error)
		tree := f.ws.TreePath("acme/"+repo, tasks[i].ID)
		seen, err := os.ReadFile(filepath.Join(tree, "seen.txt"))
		require.NoError(t, err)
		lines := strings.Fields(string(seen))
		assert.Equal(t, []string{repo, repo + ".git"}, lines[:2], "only its own worktree and mirror: %s", seen)
		assert.Contains(t, string(seen), "No such file or directory", "mozi's logs do not exist in the sandbox: %s", seen)
		assert.FileExists(t, filepath.Join(tree, repo+".txt"))
	}
}

// The branch of an assigned issue's work is chosen once: a later run of
// the task (the watchdog's follow-up, a retry) continues on it even after
// the issue was retitled, instead of starting a second branch.
func TestALaterRunStaysOnTheFirstRunsBranch(t *testing.T) {
	ctx := context.Background()
	f := newFlow(t)
	f.git.NewRepo(t, "acme/widget", map[string]string{"widget.txt": "w\n"})
	cmd, err := ResolveAgent("shell", nil, "true", nil)
	require.NoError(t, err)
	agents := map[string]Agent{"coder1": {Agent: backend.Agent{Login: "coder1", Argv: cmd.Argv,
		Home: filepath.Join(f.state, "agents", "coder1", "home"), Worktree: true, Sandboxed: true}, Timeout: time.Minute}}
	sp := f.spawner(agents, map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin"})
	first := f.claim(t, "acme/widget", 3, "Rate limiter", "coder1")
	sp.Handle(ctx, first)
	tree := f.ws.TreePath("acme/widget", first.ID)
	require.Equal(t, "fix/3-rate-limiter", workspacetest.Git(t, tree, "rev-parse", "--abbrev-ref", "HEAD"))

	require.NoError(t, f.store.PatchTaskMeta(ctx, first.ID, task.Meta{Title: "Token bucket middleware"}))
	res, err := f.store.FollowUp(ctx, first.ID, task.FollowUpPullRequest)
	require.NoError(t, err)
	require.True(t, res.Applied, "the finished run left the task working without a lease")
	again, err := f.store.ClaimTasks(ctx, repository.ClaimRequest{Owner: "r1", Limit: 1, LeaseTTL: time.Minute,
		Agents: []repository.AgentLimit{{Login: "coder1", MaxConcurrency: 4}}})
	require.NoError(t, err)
	require.Len(t, again, 1)
	sp.Handle(ctx, again[0])

	got, err := f.store.Task(ctx, first.ID)
	require.NoError(t, err)
	assert.Equal(t, "fix/3-rate-limiter", got.Meta.WorkBranch)
	assert.Equal(t, "fix/3-rate-limiter", workspacetest.Git(t, f.ws.TreePath("acme/widget", first.ID), "rev-parse", "--abbrev-ref", "HEAD"))
}
