//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/gitea/realgitea"
	"github.com/moziplus/mozi/repository/task"
)

// attemptsOf are a task's attempts, oldest first.
func (w *world) attemptsOf(id int64) []task.Attempt {
	w.t.Helper()
	list, err := w.store.Attempts(w.t.Context(), id)
	require.NoError(w.t, err)
	return list
}

// TestE2EMergeStopsTheRunningAgentAndKeepsItsSlot: a person merges the
// pull request while the author's review_result run is going. The run is
// stopped at once, and the agent's next task starts only after that run
// ended and was recorded: two runs of one agent never overlap.
func TestE2EMergeStopsTheRunningAgentAndKeepsItsSlot(t *testing.T) {
	t.Parallel()
	// The default lease: its heartbeat (every 20 s) must not be what
	// notices the end.
	w := newWorld(t, worldOptions{agents: []agentSpec{{name: "coder", role: "coder",
		env: map[string]string{"E2E_SLEEP": "60s", "E2E_SLEEP_ON": "review_result"}}},
		tune: func(cfg map[string]any) { section(cfg, "dispatcher")["lease_ttl"] = "60s" }})
	coder := w.login("coder")
	w.createIssue("Add a greeting", "Please add a greeting file.", coder)
	w.waitTask("the assigned task", 2*time.Minute, task.StatusReview, isAction(task.ActionIssueAssigned, coder))
	pr := w.pulls()[0]

	w.call(w.human, http.MethodPost, fmt.Sprintf("/repos/%s/pulls/%d/reviews", w.repo, pr.Number),
		map[string]any{"event": "REQUEST_CHANGES", "body": "Please say hello louder."}, nil)
	var result task.Task
	w.eventually("the review_result run going", 2*time.Minute, func() (bool, string) {
		list := w.tasksWhere(isAction(task.ActionReviewResult, coder))
		if len(list) != 1 {
			return false, describe(w.tasks())
		}
		result = list[0]
		attempts := w.attemptsOf(result.ID)
		return len(attempts) == 1 && attempts[0].FinishedAt.IsZero(), describe(list)
	})
	next := w.createIssue("Add a farewell", "Please add a farewell file.", coder)
	w.eventually("the next assignment queued", time.Minute, func() (bool, string) {
		list := w.tasksWhere(func(t task.Task) bool { return t.IssueNumber == next })
		return len(list) == 1, describe(w.tasks())
	})

	w.call(w.human, http.MethodPost, fmt.Sprintf("/repos/%s/pulls/%d/merge", w.repo, pr.Number),
		map[string]any{"Do": "merge"}, nil)
	merged := time.Now()
	var stopped task.Attempt
	w.eventually("the review_result run stopped", time.Minute, func() (bool, string) {
		attempts := w.attemptsOf(result.ID)
		stopped = attempts[0]
		return !stopped.FinishedAt.IsZero(), fmt.Sprintf("%+v", attempts)
	})
	assert.Equal(t, "stopped", stopped.Outcome, stopped.Error)
	assert.Contains(t, stopped.Error, "done by "+w.human.Login)
	t.Logf("run stopped %s after the merge", stopped.FinishedAt.Sub(merged).Round(time.Millisecond))
	assert.Less(t, stopped.FinishedAt.Sub(merged), 15*time.Second, "stopped when the task ended, not at the next heartbeat")

	second := w.waitTask("the next assignment", 2*time.Minute, task.StatusReview,
		func(t task.Task) bool { return t.IssueNumber == next })
	attempts := w.attemptsOf(second.ID)
	require.Len(t, attempts, 1)
	assert.False(t, attempts[0].StartedAt.Before(stopped.FinishedAt),
		"the next run started %s, before the stopped one was recorded at %s", attempts[0].StartedAt, stopped.FinishedAt)
	w.checkRuns()
}

// TestE2EDatabaseOutageLongerThanTheLease: PostgreSQL goes away for longer
// than the run lease while three agents' runs end. Each run is recorded
// once the database is back and no agent runs again. (The agents do
// nothing in Gitea, whose speed must not decide whether a run ends within
// the outage: their tasks stay working, waiting for Gitea.)
func TestE2EDatabaseOutageLongerThanTheLease(t *testing.T) {
	t.Parallel()
	agents := []agentSpec{}
	for _, name := range []string{"a1", "a2", "a3"} {
		agents = append(agents, agentSpec{name: name, role: "idle", env: map[string]string{"E2E_WAIT_FILE": "go"}})
	}
	w := newWorld(t, worldOptions{ownDatabase: true, agents: agents,
		tune: func(cfg map[string]any) { section(cfg, "dispatcher")["lease_ttl"] = "10s" }})
	for _, name := range []string{"a1", "a2", "a3"} {
		w.createIssue("Job for "+name, "Do it.", w.login(name))
	}
	w.eventually("three runs going", 2*time.Minute, func() (bool, string) {
		running := 0
		for _, tk := range w.tasks() {
			if a := w.attemptsOf(tk.ID); len(a) == 1 && a[0].FinishedAt.IsZero() {
				running++
			}
		}
		return running == 3, describe(w.tasks())
	})
	// A run of a replica that died meanwhile: the one task to rescue.
	ghost, err := w.store.CreateTask(t.Context(), repository.NewTask{Repo: w.repo, IssueNumber: 99,
		ActionType: task.ActionMention, Agent: "ghost", Priority: 2})
	require.NoError(t, err)
	for _, ev := range []task.Event{task.EventClaim, task.EventStart} {
		res, err := w.store.Apply(t.Context(), ghost.ID, ev, repository.Change{LeaseOwner: "dead-replica", LeaseTTL: time.Millisecond})
		require.NoError(t, err)
		require.True(t, res.Applied)
	}
	w.stopDatabase()
	for _, a := range w.agents {
		require.NoError(t, os.WriteFile(filepath.Join(a.home, "go"), nil, 0o644)) // the runs end now
	}
	time.Sleep(15 * time.Second) // the outage goes on: the 10 s lease expires
	w.startDatabase()

	w.eventually("every run recorded", 3*time.Minute, func() (bool, string) {
		tasks := w.tasksWhere(func(t task.Task) bool { return t.Agent != "ghost" })
		done := 0
		for _, tk := range tasks {
			if a := w.attemptsOf(tk.ID); tk.LeaseOwner == "" && len(a) > 0 && !a[0].FinishedAt.IsZero() {
				done++
			}
		}
		return done == 3, describe(tasks)
	})
	// Once the dead replica's task is rescued, rescues happen: the live
	// runs' tasks were not among them.
	w.eventually("the dead replica's task rescued", time.Minute, func() (bool, string) {
		tk, err := w.store.Task(t.Context(), ghost.ID)
		require.NoError(t, err)
		return tk.Status != task.StatusWorking, describe([]task.Task{tk})
	})
	for _, tk := range w.tasksWhere(func(t task.Task) bool { return t.ID != ghost.ID }) {
		assert.Equal(t, task.StatusWorking, tk.Status, "the run succeeded: the task waits for Gitea")
		assert.Equal(t, 1, tk.DispatchCount, describe([]task.Task{tk}))
		attempts := w.attemptsOf(tk.ID)
		require.Len(t, attempts, 1, describe([]task.Task{tk}))
		assert.Equal(t, "succeeded", attempts[0].Outcome)
	}
	for _, a := range w.agents {
		assert.Equal(t, 1, strings.Count(w.runsOf(a), "start "), "agent %s ran more than once", a.Login)
	}
	w.checkRuns()
}

// TestE2ECommentsPostedOnceThoughGiteaRefusedTheFirstTry: the comment on a
// task that failed for good and the circuit breaker's comment appear once
// each, though Gitea answered mozi's first try at each with a 500.
func TestE2ECommentsPostedOnceThoughGiteaRefusedTheFirstTry(t *testing.T) {
	t.Parallel()
	g := realgitea.Shared(t)
	proxy := newGiteaProxy(t, g.URL)
	w := newWorld(t, worldOptions{gitea: g, giteaURL: proxy.URL(),
		agents: []agentSpec{
			{name: "flaky", role: "coder", env: map[string]string{"E2E_FAIL": "1"}},
			{name: "chatty", role: "coder"},
		},
		tune: func(cfg map[string]any) {
			section(cfg, "dispatcher")["max_retries"] = 0
			section(cfg, "webhook")["circuit_breaker"] = map[string]any{"comments": 3, "window": "10m", "cooldown": "1m"}
			// Only the outbox's comments: the status comment is posted
			// (and refused) apart, and has its own test.
			section(cfg, "progress")["enabled"] = false
		}})
	// Gitea answers 500 to mozi's first comment on each issue.
	var mu sync.Mutex
	refused := map[string]bool{}
	proxy.setFault(func(r *http.Request) int {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/comments") ||
			r.Header.Get("Authorization") != "token "+w.bot.Token {
			return 0
		}
		mu.Lock()
		defer mu.Unlock()
		if refused[r.URL.Path] {
			return 0
		}
		refused[r.URL.Path] = true
		return http.StatusInternalServerError
	})

	failing := w.createIssue("Fix the flaky thing", "It fails.", w.login("flaky"))
	stormy := w.createIssue("Talk a lot", "Agents chat here.")
	chatty := w.agents["chatty"].User
	for i := range 4 {
		w.call(chatty, http.MethodPost, fmt.Sprintf("/repos/%s/issues/%d/comments", w.repo, stormy),
			map[string]any{"body": fmt.Sprintf("Thinking out loud, part %d.", i+1)}, nil)
	}

	byMozi := func(issue int, text string) []comment {
		var out []comment
		for _, c := range w.commentsBy(issue, w.bot.Login) {
			if strings.Contains(c.Body, text) {
				out = append(out, c)
			}
		}
		return out
	}
	w.eventually("the failure comment", 2*time.Minute, func() (bool, string) {
		return len(byMozi(failing, "failed after")) > 0, describe(w.tasks())
	})
	w.eventually("the circuit breaker's comment", 2*time.Minute, func() (bool, string) {
		return len(byMozi(stormy, "circuit breaker")) > 0, fmt.Sprint(w.comments(stormy))
	})
	w.eventually("the outbox empty", time.Minute, func() (bool, string) {
		st, err := w.store.OutboxStats(t.Context())
		require.NoError(t, err)
		return st.Waiting == 0, fmt.Sprintf("%+v", st)
	})
	assert.Len(t, byMozi(failing, "failed after"), 1)
	assert.Len(t, byMozi(stormy, "circuit breaker"), 1)
	assert.Len(t, w.commentsBy(failing, w.bot.Login), 1)
	assert.Len(t, w.commentsBy(stormy, w.bot.Login), 1)
	mu.Lock()
	assert.Len(t, refused, 2, "Gitea refused a first try on both issues")
	mu.Unlock()
	failed := w.tasksWhere(isAction(task.ActionIssueAssigned, w.login("flaky")))
	require.Len(t, failed, 1)
	assert.Equal(t, task.StatusFailed, failed[0].Status)
}
