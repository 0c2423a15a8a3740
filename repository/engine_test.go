package repository_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/task"
)

func claim(t *testing.T, store *repository.Store, owner string, limit int, agents ...repository.AgentLimit) []task.Task {
	t.Helper()
	tasks, err := store.ClaimTasks(context.Background(), repository.ClaimRequest{Owner: owner, Limit: limit,
		LeaseTTL: time.Minute, Agents: agents})
	require.NoError(t, err)
	return tasks
}

// endRun ends a run whose agent exited while its task waits for Gitea.
func endRun(t *testing.T, store *repository.Store, id int64, owner string) {
	t.Helper()
	_, err := store.FinishRun(context.Background(), repository.RunEnd{Attempt: task.Attempt{TaskID: id}, Owner: owner})
	require.NoError(t, err)
}

func ids(tasks []task.Task) []int64 {
	out := make([]int64, len(tasks))
	for i, t := range tasks {
		out[i] = t.ID
	}
	return out
}

func TestClaimOrderLimitsAndExclusions(t *testing.T) {
	t.Parallel()
	store, raw := setup(t)
	ctx := context.Background()
	mk := func(issue, prio int, agent string, action task.ActionType) task.Task {
		n := newTask(issue)
		n.Priority, n.Agent, n.ActionType = prio, agent, action
		tk, err := store.CreateTask(ctx, n)
		require.NoError(t, err)
		return tk
	}
	low := mk(1, 3, "coder1", task.ActionIssueAssigned)
	urgent := mk(2, 0, "coder1", task.ActionIssueAssigned)
	sameIssue := mk(2, 0, "coder1", task.ActionMention) // same (issue, agent) as urgent
	other := mk(3, 1, "coder2", task.ActionIssueAssigned)
	disabled := mk(4, 0, "coder3", task.ActionIssueAssigned)
	later := mk(5, 0, "coder2", task.ActionIssueAssigned)
	_, err := raw.Exec(ctx, `UPDATE task_state SET not_before = now() + interval '1 hour' WHERE id = $1`, later.ID)
	require.NoError(t, err)

	agents := []repository.AgentLimit{{Login: "coder1", MaxConcurrency: 1}, {Login: "coder2", MaxConcurrency: 5}}
	got := claim(t, store, "r1", 10, agents...)
	assert.Equal(t, []int64{urgent.ID, other.ID}, ids(got),
		"priority order; coder1 at its limit of 1; one run per issue and agent; disabled agents and future tasks wait")
	assert.Equal(t, task.StatusClaimed, got[0].Status)
	assert.Equal(t, "r1", got[0].LeaseOwner)
	assert.Equal(t, 1, got[0].DispatchCount)

	assert.Empty(t, claim(t, store, "r2", 10, agents...), "nothing else is due: coder1 is busy")
	_, err = store.Apply(ctx, urgent.ID, task.EventComplete, repository.Change{Actor: "lead"})
	require.NoError(t, err)
	assert.Empty(t, claim(t, store, "r2", 10, agents...),
		"Gitea ended the task, but its run holds coder1's slot until its runner lets go")
	require.NoError(t, store.DropLease(ctx, urgent.ID, "r1"))
	got = claim(t, store, "r2", 10, agents...)
	assert.Equal(t, []int64{sameIssue.ID}, ids(got), "the issue's other task, then the lower priority one")
	endRun(t, store, sameIssue.ID, "r2")
	got = claim(t, store, "r2", 10, agents...)
	assert.Equal(t, []int64{low.ID}, ids(got), "an ended run frees the agent's slot")
	_ = disabled
}

// An agent at its limit with a long, urgent backlog must not starve
// another agent's less urgent work.
func TestBusyAgentBacklogDoesNotStarveOthers(t *testing.T) {
	t.Parallel()
	store, _ := setup(t)
	ctx := context.Background()
	for i := range 600 {
		n := newTask(100 + i)
		n.Priority, n.Agent = 0, "coder1"
		_, err := store.CreateTask(ctx, n)
		require.NoError(t, err)
	}
	n := newTask(5)
	n.Priority, n.Agent = 3, "coder2"
	waiting, err := store.CreateTask(ctx, n)
	require.NoError(t, err)

	agents := []repository.AgentLimit{{Login: "coder1", MaxConcurrency: 2}, {Login: "coder2", MaxConcurrency: 1}}
	first := claim(t, store, "r1", 4, agents...)
	require.Len(t, first, 3, "coder1 fills its two slots, coder2 its one")
	assert.Contains(t, ids(first), waiting.ID)
	assert.Empty(t, claim(t, store, "r1", 4, agents...), "both agents are at their limit")
}

func TestClaimWaitsForDependencies(t *testing.T) {
	t.Parallel()
	store, _ := setup(t)
	ctx := context.Background()
	require.NoError(t, store.SaveIssue(ctx, task.Issue{Repo: "acme/widget", Number: 1, State: "open"}))
	n := newTask(2)
	n.DependsOn = []int{1, 99} // 99 is unknown: it does not block
	blocked, err := store.CreateTask(ctx, n)
	require.NoError(t, err)
	mention := newTask(2)
	mention.ActionType, mention.DependsOn = task.ActionMention, []int{1}
	m, err := store.CreateTask(ctx, mention)
	require.NoError(t, err)
	agents := repository.AgentLimit{Login: "coder1", MaxConcurrency: 5}
	assert.Equal(t, []int64{m.ID}, ids(claim(t, store, "r", 5, agents)), "mentions do not wait for dependencies")
	endRun(t, store, m.ID, "r")
	assert.Empty(t, claim(t, store, "r", 5, agents), "issue work waits for #1")
	require.NoError(t, store.SaveIssue(ctx, task.Issue{Repo: "acme/widget", Number: 1, State: "closed"}))
	assert.Equal(t, []int64{blocked.ID}, ids(claim(t, store, "r", 5, agents)))
}

// Concurrent claimers on one database never get the same task.
func TestConcurrentClaimsAreExclusive(t *testing.T) {
	t.Parallel()
	store, _ := setup(t)
	ctx := context.Background()
	const total = 300
	for i := range total {
		n := newTask(i + 1)
		n.Agent = fmt.Sprintf("agent%d", i%3)
		_, err := store.CreateTask(ctx, n)
		require.NoError(t, err)
	}
	agents := []repository.AgentLimit{{Login: "agent0", MaxConcurrency: 1000}, {Login: "agent1", MaxConcurrency: 1000},
		{Login: "agent2", MaxConcurrency: 1000}}
	var (
		mu   sync.Mutex
		seen = map[int64]string{}
		wg   sync.WaitGroup
	)
	for r := range 6 {
		owner := fmt.Sprintf("runner-%d", r)
		wg.Go(func() {
			for {
				tasks, err := store.ClaimTasks(ctx, repository.ClaimRequest{Owner: owner, Limit: 7, LeaseTTL: time.Minute, Agents: agents})
				if !assert.NoError(t, err) || len(tasks) == 0 {
					return
				}
				mu.Lock()
				for _, tk := range tasks {
					if prev, dup := seen[tk.ID]; dup {
						t.Errorf("task %d claimed by %s and %s", tk.ID, prev, owner)
					}
					seen[tk.ID] = owner
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	assert.Len(t, seen, total)
}

func TestPerAgentLimitHoldsAcrossRunners(t *testing.T) {
	t.Parallel()
	store, _ := setup(t)
	ctx := context.Background()
	for i := range 50 {
		_, err := store.CreateTask(ctx, newTask(i+1))
		require.NoError(t, err)
	}
	limit := repository.AgentLimit{Login: "coder1", MaxConcurrency: 3}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int
	)
	for r := range 5 {
		wg.Go(func() {
			tasks := claim(t, store, fmt.Sprint("r", r), 10, limit)
			mu.Lock()
			total += len(tasks)
			mu.Unlock()
		})
	}
	wg.Wait()
	assert.Equal(t, 3, total, "five runners claiming at once respect the agent's limit of 3")
}

func TestRescueExactlyOnce(t *testing.T) {
	t.Parallel()
	store, raw := setup(t)
	ctx := context.Background()
	tk, err := store.CreateTask(ctx, newTask(1))
	require.NoError(t, err)
	claimed := claim(t, store, "dead-runner", 1, repository.AgentLimit{Login: "coder1", MaxConcurrency: 1})
	require.Len(t, claimed, 1)
	_, err = store.Apply(ctx, tk.ID, task.EventStart, repository.Change{LeaseOwner: "dead-runner"})
	require.NoError(t, err)
	attempt, err := store.StartAttempt(ctx, claimed[0], "dead-runner", "/tmp/x.log")
	require.NoError(t, err)

	held, err := store.Heartbeat(ctx, tk.ID, "dead-runner", time.Minute)
	require.NoError(t, err)
	assert.True(t, held.Held)
	rescued, err := store.RescueExpired(ctx, time.Minute)
	require.NoError(t, err)
	assert.Empty(t, rescued, "a live lease is not rescued")

	_, err = raw.Exec(ctx, `UPDATE task_state SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, tk.ID)
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	count := 0
	for range 4 { // rescuers racing (a stale leader and a new one)
		wg.Go(func() {
			r, err := store.RescueExpired(ctx, time.Minute)
			assert.NoError(t, err)
			mu.Lock()
			count += len(r)
			mu.Unlock()
		})
	}
	wg.Wait()
	assert.Equal(t, 1, count, "rescued exactly once")
	got, err := store.Task(ctx, tk.ID)
	require.NoError(t, err)
	assert.Equal(t, task.StatusPending, got.Status)
	attempts, err := store.Attempts(ctx, tk.ID)
	require.NoError(t, err)
	require.Len(t, attempts, 1)
	assert.Equal(t, attempt.ID, attempts[0].ID)
	assert.Equal(t, task.AttemptRescued, attempts[0].Outcome)

	held, err = store.Heartbeat(ctx, tk.ID, "dead-runner", time.Minute)
	require.NoError(t, err)
	assert.False(t, held.Held, "the old runner learns it lost the task")
}

func TestLeaderElection(t *testing.T) {
	t.Parallel()
	store, raw := setup(t)
	ctx := context.Background()
	a, err := store.AcquireLeadership(ctx, "ticker", "a", time.Minute)
	require.NoError(t, err)
	b, err := store.AcquireLeadership(ctx, "ticker", "b", time.Minute)
	require.NoError(t, err)
	assert.True(t, a)
	assert.False(t, b, "one leader at a time")
	a, err = store.AcquireLeadership(ctx, "ticker", "a", time.Minute)
	require.NoError(t, err)
	assert.True(t, a, "the leader renews")
	_, err = raw.Exec(ctx, `UPDATE leader_leases SET expires_at = now() - interval '1 second'`)
	require.NoError(t, err)
	b, err = store.AcquireLeadership(ctx, "ticker", "b", time.Minute)
	require.NoError(t, err)
	assert.True(t, b, "an expired lease passes to another replica")
	require.NoError(t, store.ReleaseLeadership(ctx, "ticker", "b"))
	a, err = store.AcquireLeadership(ctx, "ticker", "a", time.Minute)
	require.NoError(t, err)
	assert.True(t, a, "a released lease is free at once")
}

func TestSpawnCountsAndAttempts(t *testing.T) {
	t.Parallel()
	store, _ := setup(t)
	ctx := context.Background()
	tk, err := store.CreateTask(ctx, newTask(1))
	require.NoError(t, err)
	claimed := claim(t, store, "r", 1, repository.AgentLimit{Login: "coder1", MaxConcurrency: 1})
	a, err := store.StartAttempt(ctx, claimed[0], "r", "/logs/1-1.log")
	require.NoError(t, err)
	code := 1
	a.ExitCode, a.Outcome, a.Error, a.OutputTail, a.Duration = &code, task.AttemptFailed, "exit status 1", "boom", 1500*time.Millisecond
	cost := 0.42
	a.TokensIn, a.TokensOut, a.CostUSD = 100, 20, &cost
	require.NoError(t, store.FinishAttempt(ctx, a))
	perIssue, perAgent, err := store.SpawnCounts(ctx, "acme/widget", 1, "coder1", time.Now().Add(-time.Hour))
	require.NoError(t, err)
	assert.Equal(t, 1, perIssue)
	assert.Equal(t, 1, perAgent)
	attempts, err := store.Attempts(ctx, tk.ID)
	require.NoError(t, err)
	require.Len(t, attempts, 1)
	got := attempts[0]
	assert.Equal(t, 1, *got.ExitCode)
	assert.Equal(t, "boom", got.OutputTail)
	assert.Equal(t, 1500*time.Millisecond, got.Duration)
	require.NotNil(t, got.CostUSD)
	assert.InDelta(t, 0.42, *got.CostUSD, 1e-9)

	// An agent that reports no cost (codex): unknown, not $0.
	a.CostUSD = nil
	require.NoError(t, store.FinishAttempt(ctx, a))
	attempts, err = store.Attempts(ctx, tk.ID)
	require.NoError(t, err)
	assert.Nil(t, attempts[0].CostUSD)
}

// TestWakeHeldWakesOnlyTasksHeldForThatReason: the end of a Gitea outage
// makes the tasks held for Gitea due, not those waiting for a budget or a
// dependency.
func TestWakeHeldWakesOnlyTasksHeldForThatReason(t *testing.T) {
	t.Parallel()
	store, _ := setup(t)
	ctx := context.Background()
	later := time.Now().Add(time.Hour)
	held := map[task.HoldReason]int64{}
	for i, reason := range []task.HoldReason{task.HeldForGitea, task.HeldForBudget, task.HeldForDependency} {
		tk, err := store.CreateTask(ctx, newTask(i+1))
		require.NoError(t, err)
		_, err = store.Apply(ctx, tk.ID, task.EventClaim, repository.Change{LeaseOwner: "r1"})
		require.NoError(t, err)
		res, err := store.Apply(ctx, tk.ID, task.EventRelease, repository.Change{NotBefore: later, Error: "held", HeldFor: reason})
		require.NoError(t, err)
		require.True(t, res.Applied)
		held[reason] = tk.ID
	}
	n, err := store.WakeHeld(ctx, task.HeldForGitea)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	for reason, id := range held {
		tk, err := store.Task(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, reason, tk.HeldFor)
		assert.Equal(t, reason == task.HeldForGitea, !tk.NotBefore.After(time.Now()), "%s: not_before %s", reason, tk.NotBefore)
	}
}

// A run whose runner lives is not rescued when its lease expired (the
// database was away); one whose runner stopped beating is. A task that
// ended while its dead runner's agent ran only loses the lease.
func TestRescueOnlyWhatDeadRunnersHeld(t *testing.T) {
	t.Parallel()
	store, raw := setup(t)
	ctx := context.Background()
	running := func(issue int, owner string) task.Task {
		tk, err := store.CreateTask(ctx, newTask(issue))
		require.NoError(t, err)
		for _, ev := range []task.Event{task.EventClaim, task.EventStart} {
			res, err := store.Apply(ctx, tk.ID, ev, repository.Change{LeaseOwner: owner})
			require.NoError(t, err)
			require.True(t, res.Applied)
		}
		_, err = store.StartAttempt(ctx, tk, owner, "/tmp/x.log")
		require.NoError(t, err)
		return tk
	}
	alive := running(1, "alive")
	dead := running(2, "dead")
	ended := running(3, "dead")
	_, err := store.Apply(ctx, ended.ID, task.EventComplete, repository.Change{Actor: "lead"})
	require.NoError(t, err)
	require.NoError(t, store.BeatRunner(ctx, "alive"))
	require.NoError(t, store.BeatRunner(ctx, "dead"))
	_, err = raw.Exec(ctx, `UPDATE runners SET heartbeat_at = now() - interval '5 minutes' WHERE owner = 'dead'`)
	require.NoError(t, err)
	_, err = raw.Exec(ctx, `UPDATE task_state SET lease_expires_at = now() - interval '1 second'`)
	require.NoError(t, err)

	rescued, err := store.RescueExpired(ctx, 2*time.Minute)
	require.NoError(t, err)
	assert.Equal(t, []int64{dead.ID}, ids(rescued))
	for _, c := range []struct {
		tk     task.Task
		status task.Status
		owner  string
	}{{alive, task.StatusWorking, "alive"}, {dead, task.StatusPending, ""}, {ended, task.StatusDone, ""}} {
		got, err := store.Task(ctx, c.tk.ID)
		require.NoError(t, err)
		assert.Equal(t, c.status, got.Status, "task %d", c.tk.ID)
		assert.Equal(t, c.owner, got.LeaseOwner, "task %d", c.tk.ID)
		attempts, err := store.Attempts(ctx, c.tk.ID)
		require.NoError(t, err)
		assert.Equal(t, c.owner == "", !attempts[0].FinishedAt.IsZero(), "task %d: the attempt is closed when its runner died", c.tk.ID)
	}
}

// A run keeps its lease after its task ended (Gitea finished it while the
// agent ran) and gives it up when its outcome is recorded.
func TestFinishRunDropsTheLeaseOfAnEndedTask(t *testing.T) {
	t.Parallel()
	store, _ := setup(t)
	ctx := context.Background()
	tk, err := store.CreateTask(ctx, newTask(1))
	require.NoError(t, err)
	claimed := claim(t, store, "r1", 1, repository.AgentLimit{Login: "coder1", MaxConcurrency: 1})
	require.Len(t, claimed, 1)
	a, started, err := store.StartRun(ctx, claimed[0], "r1", "/tmp/x.log")
	require.NoError(t, err)
	require.True(t, started)
	res, err := store.Apply(ctx, tk.ID, task.EventCancel, repository.Change{Error: "issue closed", Actor: "alice"})
	require.NoError(t, err)
	require.True(t, res.Applied)

	st, err := store.Heartbeat(ctx, tk.ID, "r1", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, repository.LeaseState{Held: true, Status: task.StatusCancelled, EndedBy: "alice"}, st)

	a.Outcome = task.AttemptSucceeded
	res, err = store.FinishRun(ctx, repository.RunEnd{Attempt: a, Owner: "r1",
		Event: task.EventFail, Change: repository.Change{Error: "exit 1"}})
	require.NoError(t, err)
	assert.False(t, res.Applied, "an ended task does not move")
	got, err := store.Task(ctx, tk.ID)
	require.NoError(t, err)
	assert.Equal(t, task.StatusCancelled, got.Status)
	assert.Equal(t, "alice", got.EndedBy)
	assert.Empty(t, got.LeaseOwner, "the recorded run gave the lease up")
}

// A runner that could not reach the database when its run ended finds its
// task rescued; it takes the task back to record the outcome (reclaim)
// only if nobody claimed the task since. Otherwise the outcome is an old
// run's: taking the task back would put a task whose newer run already
// ended into working, under a lease nobody renews, and its retry would
// wait for the lease to expire and a second rescue.
func TestReclaimOnlyIfNobodyClaimedTheTaskSince(t *testing.T) {
	t.Parallel()
	agent := repository.AgentLimit{Login: "coder1", MaxConcurrency: 1}
	tests := []struct {
		name string
		// since is what happens to the task between its rescue and the
		// first runner recording its run.
		since     func(t *testing.T, store *repository.Store, id int64)
		reclaimed bool
	}{
		{name: "nobody claimed it since: the first runner records its run", reclaimed: true},
		{
			name: "another runner claimed it, ran it and retried it since: the first run's outcome moves nothing",
			since: func(t *testing.T, store *repository.Store, id int64) {
				ctx := context.Background()
				claimed := claim(t, store, "r2", 1, agent)
				require.Equal(t, []int64{id}, ids(claimed))
				a, started, err := store.StartRun(ctx, claimed[0], "r2", "/tmp/r2.log")
				require.NoError(t, err)
				require.True(t, started)
				a.Outcome = task.AttemptFailed
				res, err := store.FinishRun(ctx, repository.RunEnd{Attempt: a, Owner: "r2", Reclaim: true,
					Event: task.EventRetry, Change: repository.Change{Error: "r2's run failed"}})
				require.NoError(t, err)
				require.True(t, res.Applied, "r2 holds the task: its retry applies")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store, raw := setup(t)
			ctx := context.Background()
			tk, err := store.CreateTask(ctx, newTask(1))
			require.NoError(t, err)
			claimed := claim(t, store, "r1", 1, agent)
			require.Equal(t, []int64{tk.ID}, ids(claimed))
			first, started, err := store.StartRun(ctx, claimed[0], "r1", "/tmp/r1.log")
			require.NoError(t, err)
			require.True(t, started)
			require.Equal(t, 1, first.Attempt)

			// r1 loses the database: its lease expires and, as it never
			// beat in the runners table, the ticker takes it for dead.
			_, err = raw.Exec(ctx, `UPDATE task_state SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, tk.ID)
			require.NoError(t, err)
			rescued, err := store.RescueExpired(ctx, time.Minute)
			require.NoError(t, err)
			require.Equal(t, []int64{tk.ID}, ids(rescued))
			if tt.since != nil {
				tt.since(t, store, tk.ID)
			}
			before, err := store.Task(ctx, tk.ID)
			require.NoError(t, err)
			require.Equal(t, task.StatusPending, before.Status)

			// r1 reaches the database again: its agent's run failed.
			first.Outcome = task.AttemptFailed
			res, err := store.FinishRun(ctx, repository.RunEnd{Attempt: first, Owner: "r1", Reclaim: true,
				Event: task.EventRetry, Change: repository.Change{Error: "r1's run failed"}})
			require.NoError(t, err)
			assert.Equal(t, tt.reclaimed, res.Applied, "r1's retry applied")

			got, err := store.Task(ctx, tk.ID)
			require.NoError(t, err)
			assert.Equal(t, task.StatusPending, got.Status, "the retry leaves the task pending; no run holds it")
			assert.Empty(t, got.LeaseOwner, "no lease is left behind")
			if tt.reclaimed {
				assert.Equal(t, "r1's run failed", got.LastError)
				assert.Equal(t, 1, got.RetryCount)
			} else {
				assert.Equal(t, before, got, "the stale run changed nothing in the task's row")
			}
			attempts, err := store.Attempts(ctx, tk.ID)
			require.NoError(t, err)
			require.NotEmpty(t, attempts)
			assert.Equal(t, task.AttemptFailed, attempts[0].Outcome, "r1's attempt is recorded either way")
		})
	}
}

// A release gives a claim back un-run (Gitea is down, a budget is spent,
// mozi stops before the agent starts): the claim's dispatch is given back
// with it, so a task held through a long outage never reaches the
// dispatch guardrail and its next run is numbered as if the hold never
// happened; and its lease goes, so the agent's slot is free at once.
func TestReleaseGivesTheDispatchBack(t *testing.T) {
	t.Parallel()
	agent := repository.AgentLimit{Login: "coder1", MaxConcurrency: 1}
	tests := []struct {
		name  string
		runs  int // runs the task had before the holds (each a claim that was not given back)
		holds int
	}{
		{name: "a task that never ran", runs: 0, holds: 1},
		{name: "a task held through a long outage", runs: 0, holds: 12},
		{name: "a task that ran and failed once", runs: 1, holds: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store, _ := setup(t)
			ctx := context.Background()
			tk, err := store.CreateTask(ctx, newTask(1))
			require.NoError(t, err)
			for range tt.runs {
				claimed := claim(t, store, "r1", 1, agent)
				require.Len(t, claimed, 1)
				a, started, err := store.StartRun(ctx, claimed[0], "r1", "/tmp/x.log")
				require.NoError(t, err)
				require.True(t, started)
				res, err := store.FinishRun(ctx, repository.RunEnd{Attempt: a, Owner: "r1",
					Event: task.EventRetry, Change: repository.Change{Error: "exit status 1"}})
				require.NoError(t, err)
				require.True(t, res.Applied)
			}

			for hold := range tt.holds {
				claimed := claim(t, store, "r1", 1, agent)
				require.Len(t, claimed, 1, "hold %d: the released claim freed the agent's only slot", hold)
				assert.Equal(t, tt.runs+1, claimed[0].DispatchCount, "hold %d: the claim counts one dispatch", hold)
				res, err := store.Apply(ctx, tk.ID, task.EventRelease, repository.Change{
					Error: "Gitea down", HeldFor: task.HeldForGitea})
				require.NoError(t, err)
				require.True(t, res.Applied)

				got, err := store.Task(ctx, tk.ID)
				require.NoError(t, err)
				assert.Equal(t, task.StatusPending, got.Status)
				assert.Equal(t, tt.runs, got.DispatchCount, "hold %d: the release gave the claim's dispatch back", hold)
				assert.Equal(t, hold+1, got.Holds)
				assert.Empty(t, got.LeaseOwner, "hold %d: the release dropped the lease", hold)
			}

			claimed := claim(t, store, "r1", 1, agent)
			require.Len(t, claimed, 1)
			a, started, err := store.StartRun(ctx, claimed[0], "r1", "/tmp/x.log")
			require.NoError(t, err)
			require.True(t, started)
			assert.Equal(t, tt.runs+1, a.Attempt, "the run after the holds is numbered by runs, not claims")
		})
	}
}

// An open circuit breaker (an agent comment storm on a repository) pauses
// new runs on its repository, whatever their agent, and only there; the
// tasks run once it closes.
func TestClaimPausesOnlyTheRepositoryWhoseBreakerIsOpen(t *testing.T) {
	t.Parallel()
	store, raw := setup(t)
	ctx := context.Background()
	mk := func(repo string, issue int, agent string) task.Task {
		n := newTask(issue)
		n.Repo, n.Agent = repo, agent
		tk, err := store.CreateTask(ctx, n)
		require.NoError(t, err)
		return tk
	}
	stormy1 := mk("acme/stormy", 1, "coder1")
	stormy2 := mk("acme/stormy", 2, "coder2")
	calm := mk("acme/calm", 1, "coder1")
	agents := []repository.AgentLimit{{Login: "coder1", MaxConcurrency: 5}, {Login: "coder2", MaxConcurrency: 5}}

	policy := repository.BreakerPolicy{Comments: 1, Window: time.Hour, Cooldown: time.Hour}
	var tripped bool
	for id := range int64(2) {
		var err error
		_, tripped, err = store.RecordAgentComment(ctx, "acme/stormy", 1, "coder1", id+1, policy)
		require.NoError(t, err)
	}
	require.True(t, tripped, "two agent comments within the hour trip a breaker of one")

	assert.Equal(t, []int64{calm.ID}, ids(claim(t, store, "r1", 10, agents...)),
		"the stormy repository's tasks wait, both agents'; the same agent's task on another repository runs")
	assert.Empty(t, claim(t, store, "r1", 10, agents...), "still open: nothing more is due")

	// The cooldown passes.
	_, err := raw.Exec(ctx, `UPDATE repo_breakers SET open_until = now() - interval '1 second' WHERE repo = 'acme/stormy'`)
	require.NoError(t, err)
	open, err := store.OpenBreakers(ctx)
	require.NoError(t, err)
	require.Zero(t, open)
	assert.ElementsMatch(t, []int64{stormy1.ID, stormy2.ID}, ids(claim(t, store, "r1", 10, agents...)),
		"the closed breaker lets the repository's tasks run")
}
