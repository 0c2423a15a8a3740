package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/gitea/giteatest"
	"github.com/moziplus/mozi/repository/pgtest"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/spawner/backend/local"
)

// writeConfig writes a serve configuration with one agent run by this test
// binary in mode. Mode "quick" is a shell one-liner instead: the race-built
// test binary takes a second to start, which would make the 1,000-task test
// measure the race runtime rather than mozi.
func writeConfig(t *testing.T, dir, dbURL, giteaURL, mode string, extra string) (cfg, journal string) {
	t.Helper()
	command := fmt.Sprintf("%q", agentCopy(t, dir))
	if mode == "quick" {
		command = `"/bin/sh", "-c", "echo start task=$MOZI_TASK_ID pid=$$ >> \"$TEST_AGENT_JOURNAL\""`
	}
	journal = sharedFile(t, filepath.Join(dir, "journal"))
	cfg = filepath.Join(dir, "mozi.yaml")
	body := fmt.Sprintf(`listen: 127.0.0.1:0
database: {url: "%s"}
gitea: {url: "%s", token: %s, rate_per_second: 2000, burst: 2000}
webhook: {secrets: [%s], discussion_grace: 100000h}
dispatcher: {lease_ttl: 3s, poll_interval: 500ms, max_concurrency: 8, spawns_per_agent_per_day: 100000}
spawner: {retry_base: 100ms, retry_max: 200ms, kill_grace: 200ms, shutdown_grace: 1s}
ticker: {sweep_every: 250ms, leader_ttl: 3s}
%s
agents:
  - {login: bulk, command: [%s], workspace: none, sandbox: none, workdir: "%s/work", token_env: BULK_TOKEN, max_concurrency: 16,
     env: {TEST_AGENT_MODE: %s, TEST_AGENT_JOURNAL: "%s"}}
`, dbURL, giteaURL, giteatest.Token, testSecret, extra, command, dir, mode, journal)
	require.NoError(t, os.WriteFile(cfg, []byte(body), 0o600))
	return cfg, journal
}

// starts counts the "start task=ID" lines of the agent journal per task.
func starts(t *testing.T, journal string) map[string]int {
	t.Helper()
	out := map[string]int{}
	f, err := os.Open(journal)
	if os.IsNotExist(err) {
		return out
	}
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "start task="); ok {
			id, _, _ := strings.Cut(rest, " ")
			out[id]++
		}
	}
	return out
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// serveFixture prepares what the mozi processes of a test share: a fake
// Gitea, a database, a configuration running the test agent in mode, and
// the environment that points mozi at them.
func serveFixture(t *testing.T, mode string) (dir string, store *repository.Store, journal string, envs []string) {
	t.Helper()
	dir = filepath.Dir(stateDir(t))
	gitea := giteatest.New()
	t.Cleanup(gitea.Close)
	gitea.AddUser("token-bulk", "bulk")
	dbURL := pgtest.URL(t)
	cfg, journal := writeConfig(t, dir, dbURL, gitea.URL, mode, "")
	store, err := repository.Open(context.Background(), dbURL, repository.Options{})
	require.NoError(t, err)
	t.Cleanup(store.Close)
	return dir, store, journal, []string{"MOZI_CONFIG=" + cfg, "BULK_TOKEN=token-bulk", "MOZI_DATABASE_URL="}
}

// mozi is SIGKILLed while an agent runs: its agent dies with it, and after
// a restart the task is rescued and run again, exactly once.
func TestCrashWhileAnAgentRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mozi processes")
	}
	dir, store, journal, envs := serveFixture(t, "slow-once")
	first := startServe(t, filepath.Join(dir, "state"), envs...)
	tk, err := store.CreateTask(context.Background(), repository.NewTask{Repo: "acme/widget", IssueNumber: 3,
		ActionType: task.ActionIssueClosed, Agent: "bulk", Priority: 2})
	require.NoError(t, err)
	id := fmt.Sprint(tk.ID)
	waitFor(t, "the agent to start", 20*time.Second, func() bool { return starts(t, journal)[id] == 1 })

	require.NoError(t, first.cmd.Process.Signal(syscall.SIGKILL))
	_ = first.waitExit(t, 10*time.Second)
	got, err := store.Task(context.Background(), tk.ID)
	require.NoError(t, err)
	assert.Equal(t, task.StatusWorking, got.Status, "the database still says working")

	second := startServe(t, filepath.Join(dir, "state"), envs...)
	defer func() { _ = second.cmd.Process.Signal(syscall.SIGTERM); _ = second.waitExit(t, 30*time.Second) }()
	waitFor(t, "the task to be rescued and done", 30*time.Second, func() bool {
		got, err := store.Task(context.Background(), tk.ID)
		return err == nil && got.Status == task.StatusDone
	})
	tickerPasses(t, "http://"+second.addr, "rescue", 3) // what more the sweeps would do, they did
	assert.Equal(t, 2, starts(t, journal)[id], "run once before the crash, once after")
	attempts, err := store.Attempts(context.Background(), tk.ID)
	require.NoError(t, err)
	require.Len(t, attempts, 2)
	assert.Equal(t, task.AttemptRescued, attempts[0].Outcome)
	assert.Equal(t, task.AttemptSucceeded, attempts[1].Outcome)
}

// Two mozi processes on one database, 1,000 tasks: each spawned once.
func TestTwoReplicasSpawnEachTaskOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mozi processes")
	}
	dir, store, journal, envs := serveFixture(t, "quick")
	var replicas []*serveProc
	for i := range 2 {
		p := startServe(t, filepath.Join(dir, fmt.Sprint("state", i)), envs...)
		replicas = append(replicas, p)
	}
	const total = 1000
	for i := range total {
		_, err := store.CreateTask(context.Background(), repository.NewTask{Repo: "acme/widget", IssueNumber: i + 1,
			ActionType: task.ActionIssueClosed, Agent: "bulk", Priority: 2})
		require.NoError(t, err)
	}
	waitFor(t, "every task to be done", 3*time.Minute, func() bool {
		done, err := store.ListTasks(context.Background(), repository.TaskFilter{Status: task.StatusDone, Limit: total + 1})
		return err == nil && len(done) == total
	})
	for _, p := range replicas {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		require.NoError(t, p.waitExit(t, 30*time.Second))
	}
	counts := starts(t, journal)
	assert.Len(t, counts, total)
	for id, n := range counts {
		if n != 1 {
			t.Errorf("task %s spawned %d times", id, n)
		}
	}
	runners := map[string]int{}
	for i := range total {
		attempts, err := store.Attempts(context.Background(), int64(i+1))
		require.NoError(t, err)
		require.Len(t, attempts, 1)
		runners[attempts[0].Runner]++
	}
	assert.Len(t, runners, 2, "both replicas took part: %v", runners)
}

// SIGTERM while an agent runs: mozi waits out the shutdown grace, then
// kills the agent, records the attempt as interrupted (not a failure) and
// exits cleanly; after a restart the task runs again.
func TestGracefulShutdownInterruptsAndResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mozi processes")
	}
	dir, store, journal, envs := serveFixture(t, "slow-once")
	ctx := context.Background()
	first := startServe(t, filepath.Join(dir, "state"), envs...)
	tk, err := store.CreateTask(ctx, repository.NewTask{Repo: "acme/widget", IssueNumber: 5,
		ActionType: task.ActionIssueClosed, Agent: "bulk", Priority: 2})
	require.NoError(t, err)
	id := fmt.Sprint(tk.ID)
	waitFor(t, "the agent to start", 20*time.Second, func() bool { return starts(t, journal)[id] == 1 })
	pid := agentPID(t, journal, id)

	stopped := time.Now()
	require.NoError(t, first.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, first.waitExit(t, 30*time.Second), "a clean exit")
	assert.GreaterOrEqual(t, time.Since(stopped), time.Second, "the agent had its shutdown grace (1s)")
	assert.Error(t, syscall.Kill(pid, 0), "the agent was killed with mozi")
	got, err := store.Task(ctx, tk.ID)
	require.NoError(t, err)
	assert.Equal(t, task.StatusPending, got.Status)
	assert.Zero(t, got.RetryCount, "an interruption is not a failure")
	attempts, err := store.Attempts(ctx, tk.ID)
	require.NoError(t, err)
	require.Len(t, attempts, 1)
	assert.Equal(t, task.AttemptInterrupted, attempts[0].Outcome)

	second := startServe(t, filepath.Join(dir, "state"), envs...)
	defer func() { _ = second.cmd.Process.Signal(syscall.SIGTERM); _ = second.waitExit(t, 30*time.Second) }()
	waitFor(t, "the task to run again and finish", 30*time.Second, func() bool {
		got, err := store.Task(ctx, tk.ID)
		return err == nil && got.Status == task.StatusDone
	})
	assert.Equal(t, 2, starts(t, journal)[id])
}

// agentPID reads the pid a test agent journaled when it started task id.
func agentPID(t *testing.T, journal, id string) int {
	t.Helper()
	data, err := os.ReadFile(journal)
	require.NoError(t, err)
	for line := range strings.Lines(string(data)) {
		if !strings.HasPrefix(line, "start task="+id+" ") {
			continue
		}
		_, pidText, ok := strings.Cut(strings.TrimSpace(line), "pid=")
		require.True(t, ok, line)
		pid, err := strconv.Atoi(pidText)
		require.NoError(t, err)
		return pid
	}
	t.Fatalf("task %s never started", id)
	return 0
}

// marked lists the live processes that carry this mozi's run mark of
// task id (any attempt).
func marked(scope string, id int64) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	mark := []byte(fmt.Sprintf("%s=%s:%d-", local.RunEnv, scope, id))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		environ, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(environ, mark) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) > 0 && f[0] == "Z" {
			continue // a zombie: dead, waiting to be reaped
		}
		out = append(out, pid)
	}
	return out
}

// mozi is SIGKILLed again and again as it starts sandboxed agents, at
// moments spread over the sandbox's start: no process of a run of an
// earlier life survives the next start.
func TestKilledDuringSandboxStartsLeavesNothingBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mozi processes")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv("CI") == "true" || os.Getenv("MOZI_REQUIRE_SANDBOX") != "" {
			t.Fatal("bwrap is not installed")
		}
		t.Skip("bwrap is not installed")
	}
	state := stateDir(t)
	dir := filepath.Dir(state)
	gitea := giteatest.New()
	t.Cleanup(gitea.Close)
	dbURL := pgtest.URL(t)
	cfg := filepath.Join(dir, "mozi.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`listen: 127.0.0.1:0
database: {url: "%s"}
gitea: {url: "%s", token: %s}
webhook: {secrets: [%s], discussion_grace: 100000h}
dispatcher: {lease_ttl: 3s, poll_interval: 100ms}
ticker: {sweep_every: 250ms, leader_ttl: 3s}
agents:
  - {login: sandy, command: ["/bin/sh", "-c", "sleep 600"], workspace: none, workdir: "%s/work"}
`, dbURL, gitea.URL, giteatest.Token, testSecret, dir)), 0o600))
	store, err := repository.Open(context.Background(), dbURL, repository.Options{})
	require.NoError(t, err)
	t.Cleanup(store.Close)
	envs := []string{"MOZI_CONFIG=" + cfg, "MOZI_DATABASE_URL="}
	scope := local.RunScope(state)

	var earlier []int64
	for i := range 20 {
		p := startServe(t, state, envs...)
		// This start ended what the previous life left.
		for _, id := range earlier {
			waitFor(t, fmt.Sprintf("round %d: no process of task %d", i, id), 10*time.Second,
				func() bool { return len(marked(scope, id)) == 0 })
		}
		tk, err := store.CreateTask(context.Background(), repository.NewTask{Repo: "acme/widget", IssueNumber: 100 + i,
			ActionType: task.ActionIssueClosed, Agent: "sandy", Priority: 2})
		require.NoError(t, err)
		earlier = append(earlier, tk.ID)
		waitFor(t, "the sandbox to start", 30*time.Second, func() bool { return len(marked(scope, tk.ID)) > 0 })
		time.Sleep(time.Duration(i%5) * 3 * time.Millisecond) // 0–12 ms into the sandbox's start
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
		_ = p.waitExit(t, 10*time.Second)
	}
	startServe(t, state, envs...)
	for _, id := range earlier {
		waitFor(t, fmt.Sprintf("no process of task %d", id), 10*time.Second, func() bool { return len(marked(scope, id)) == 0 })
	}
}
