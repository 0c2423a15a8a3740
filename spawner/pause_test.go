package spawner

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/pgtest"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/spawner/backend"
	"github.com/moziplus/mozi/spawner/backend/backendtest"
)

// The outcome policy of a paused run: it waits for the reset, held for
// usage_limit, not counted as a failure; with no reset, the hold backoff.
func TestJudgePaused(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	p := Policy{Owner: "r1", RetryBase: 30 * time.Second, RetryMax: 30 * time.Minute, HoldBase: 15 * time.Second, HoldMax: 10 * time.Minute}
	lastTry := task.Task{ActionType: task.ActionIssueAssigned, Agent: "coder1", MaxRetries: 2, RetryCount: 2, Holds: 1}
	tests := []struct {
		name  string
		reset time.Time
		want  time.Time
	}{
		{"at the reset", now.Add(3 * time.Hour), now.Add(3 * time.Hour)},
		{"no reset: the hold backoff", time.Time{}, now.Add(30 * time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Judge(p, lastTry, Result{Outcome: OutcomePaused, Err: "usage limit reached", Reset: tt.reset}, now)
			assert.Equal(t, task.EventInterrupt, v.Event, "not a retry, not a failure, even on the last try")
			assert.Equal(t, task.HeldForUsageLimit, v.Change.HeldFor)
			assert.Equal(t, "r1", v.Change.LeaseOwner)
			if tt.reset.IsZero() { // jittered
				assert.WithinRange(t, v.Change.NotBefore, now.Add(time.Second), tt.want)
			} else {
				assert.True(t, tt.want.Equal(v.Change.NotBefore), "not before %s", v.Change.NotBefore)
			}
			assert.Zero(t, v.Retry)
		})
	}
}

func TestCredential(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SHARED_KEY": "k1", "ANTHROPIC_API_KEY": "k1"}
	getenv := func(k string) string { return env[k] }
	a1 := credential("a1", Agent{Env: map[string]string{"ANTHROPIC_API_KEY": "k1"}}, getenv)
	a2 := credential("a2", Agent{PassEnv: []string{"ANTHROPIC_API_KEY"}}, getenv)
	a3 := credential("a3", Agent{Env: map[string]string{"ANTHROPIC_API_KEY": "k2"}}, getenv)
	assert.Equal(t, a1, a2, "the same key, from env or passed")
	assert.NotEqual(t, a1, a3)
	assert.True(t, strings.HasPrefix(a1, "key:"))
	assert.NotContains(t, a1, "k1")
	assert.Equal(t, "agent:a4", credential("a4", Agent{}, getenv), "no key: the agent alone")
	assert.Equal(t, "agent:a5", credential("a5", Agent{Env: map[string]string{"OTHER": "k1"}}, getenv))
	assert.Equal(t, "team", credential("a6", Agent{Credential: "team", Env: map[string]string{"ANTHROPIC_API_KEY": "k1"}}, getenv))
}

// limitOutput is what Claude Code prints at a usage limit that resets at
// reset (testdata/limit).
func limitOutput(reset time.Time) []string {
	return []string{
		fmt.Sprintf(`{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":%d,"rateLimitType":"five_hour"}}`+"\n", reset.Unix()),
		`{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"api_error":"usage_limit_reached","result":"You've hit your 5-hour limit"}` + "\n",
	}
}

// A run at a usage limit pauses its task and every agent on its
// credential until the reset, with no retry counted; agents on another
// credential go on; at the reset the held tasks are claimed again. Past
// the daily cap of unattended resumes the task waits for a person, whose
// mozi task resume makes it due.
func TestPausedRunHoldsTheAgentsOfItsCredential(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, clock := pgtest.StoreWithClock(t)
	tk := claimed(t, store) // coder1's, issue 3
	for i, agent := range []string{"coder2", "coder3"} {
		_, err := store.CreateTask(ctx, repository.NewTask{Repo: "acme/widget", IssueNumber: 4 + i,
			ActionType: task.ActionIssueAssigned, BusinessType: task.BusinessBug, Agent: agent, Priority: 2})
		require.NoError(t, err)
	}
	// Both resets on one day (UTC), whenever the test runs.
	reset := time.Now().UTC().Truncate(24 * time.Hour).Add(25 * time.Hour)
	b := &backendtest.Backend{Play: func(backend.Step) backendtest.Script {
		return backendtest.Script{Output: limitOutput(reset), Exit: backend.Exit{Code: 1, Why: "exited with status 1"}}
	}}
	agent := func(login, key string) Agent {
		return Agent{Agent: backend.Agent{Login: login, Argv: []string{"claude"}, Workdir: "/w"}, Usage: UsageClaudeStreamJSON,
			Env: map[string]string{"ANTHROPIC_API_KEY": key}}
	}
	sp := New(Config{Owner: "r1", StateDir: t.TempDir(), KillGrace: 50 * time.Millisecond, Pauses: store, MaxResumesPerDay: 1,
		Agents: map[string]Agent{"coder1": agent("coder1", "k1"), "coder2": agent("coder2", "k1"),
			"coder3": agent("coder3", "k2")}}, store, b, staticPrompt{})
	sp.Handle(ctx, tk)

	got, err := store.Task(ctx, tk.ID)
	require.NoError(t, err)
	assert.Equal(t, task.StatusPending, got.Status)
	assert.Equal(t, task.HeldForUsageLimit, got.HeldFor)
	assert.True(t, reset.Equal(got.NotBefore), "not before %s", got.NotBefore)
	assert.Equal(t, 0, got.RetryCount)
	assert.Empty(t, got.LeaseOwner)
	assert.Contains(t, got.LastError, "usage limit reached", "the task says why it waits")
	attempts, err := store.Attempts(ctx, tk.ID)
	require.NoError(t, err)
	require.Len(t, attempts, 1)
	assert.Equal(t, task.AttemptPaused, attempts[0].Outcome)
	assert.Contains(t, attempts[0].Error, "usage limit reached; it resets at "+reset.UTC().Format(time.RFC3339))

	every := []repository.AgentLimit{{Login: "coder1", MaxConcurrency: 1}, {Login: "coder2", MaxConcurrency: 1},
		{Login: "coder3", MaxConcurrency: 1}}
	var claimedNow []task.Task
	claim := func() []string {
		var err error
		claimedNow, err = store.ClaimTasks(ctx, repository.ClaimRequest{Owner: "r1", Limit: 5, LeaseTTL: time.Minute, Agents: every})
		require.NoError(t, err)
		var agents []string
		for _, c := range claimedNow {
			agents = append(agents, c.Agent)
		}
		return agents
	}
	assert.Equal(t, []string{"coder3"}, claim(), "coder2 shares coder1's credential: paused too")

	clock.Advance(time.Until(reset) + time.Second)
	resumed := claim()
	assert.ElementsMatch(t, []string{"coder1", "coder2"}, resumed, "at the reset")

	// The second limit of the day is over the cap of 1: a person decides.
	for _, c := range claimedNow {
		if c.Agent == "coder1" {
			tk = c
		}
	}
	reset = reset.Add(time.Hour)
	sp.Handle(ctx, tk)
	got, err = store.Task(ctx, tk.ID)
	require.NoError(t, err)
	assert.Equal(t, task.HeldForUsageLimit, got.HeldFor)
	assert.True(t, task.HeldForAPerson.Equal(got.NotBefore), "not before %s", got.NotBefore)
	attempts, err = store.Attempts(ctx, tk.ID)
	require.NoError(t, err)
	require.Len(t, attempts, 2)
	assert.Contains(t, attempts[1].Error, fmt.Sprintf("over the daily cap of 1: held until a person runs mozi task resume %d", tk.ID))
	assert.Equal(t, 0, got.RetryCount)

	ok, err := store.ResumeHeld(ctx, tk.ID)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = store.ResumeHeld(ctx, tk.ID)
	require.NoError(t, err)
	assert.False(t, ok, "no longer held")
	// coder2's task is still claimed by the runner above; coder1's is due.
	assert.Equal(t, []string{"coder1"}, claim())
}
