package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/pgtest"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/webhook/console"
)

// agentsPageRow is the cells of one agent's row on the agents page.
func agentsPageRow(t *testing.T, page, agent string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<tr data-agent="` + agent + `">(.*?)</tr>`).FindStringSubmatch(page)
	require.NotNil(t, m, "a row for %s", agent)
	return m[1]
}

// The agents page shows each agent's work by what it waits for, its
// spawn budget and usage in the window against its limits, its pause,
// and the open circuit breakers of the repositories the user can read.
func TestConsoleAgentsPageShowsWorkBudgetsPausesAndBreakers(t *testing.T) {
	ctx := context.Background()
	store, clock := pgtest.StoreWithClock(t)
	f := &fixture{store: store, gitea: newFakeGitea(t)}
	f.serveWith(t, console.Config{SpawnsPerAgentPerDay: 3, Agents: []console.AgentLimits{
		{Login: "coder", MaxConcurrency: 2, MaxCostUSD: 5, MaxTokens: 100000},
		{Login: "idle", MaxConcurrency: 1, Disabled: true}}})

	f.task(t, "acme/app", 1) // queued
	held := f.task(t, "acme/app", 2)
	claimForR1(t, f.store, held.ID)
	res, err := f.store.Apply(ctx, held.ID, task.EventRelease, repository.Change{HeldFor: task.HeldForGitea,
		NotBefore: time.Now().Add(time.Hour), Error: "Gitea did not answer"})
	require.NoError(t, err)
	require.True(t, res.Applied)
	asking := f.task(t, "acme/app", 3)
	a := f.startedAttempt(t, asking)
	cost := 1.25
	a.Outcome, a.TokensIn, a.TokensOut, a.CostUSD = task.AttemptFailed, 1000, 200, &cost
	_, err = f.store.FinishRun(ctx, repository.RunEnd{Attempt: a, Owner: "r1"})
	require.NoError(t, err)
	res, err = f.store.Apply(ctx, asking.ID, task.EventWait, repository.Change{WaitReason: task.WaitQuestion,
		Question: "Which database?"})
	require.NoError(t, err)
	require.True(t, res.Applied)
	f.startedAttempt(t, f.task(t, "acme/app", 4)) // working
	_, err = f.store.PauseCredential(ctx, repository.Pause{Credential: "anthropic-1", Agents: []string{"coder"},
		Until: time.Now().Add(time.Hour), Reason: "usage limit"})
	require.NoError(t, err)
	storm := repository.BreakerPolicy{Comments: 1, Window: time.Hour, Cooldown: time.Hour}
	for i, repo := range []string{"acme/app", "acme/app", "acme/secret", "acme/secret"} {
		_, _, err := f.store.RecordAgentComment(ctx, repo, 7, "coder", int64(i+1), storm)
		require.NoError(t, err)
	}

	alice := f.signIn(t, "alice", map[string]perm{"acme/app": {pull: true}})
	page := alice.page(t, "/agents", http.StatusOK)
	coder := agentsPageRow(t, page, "coder")
	cells := regexp.MustCompile(`<td[^>]*>(.*?)</td>`).FindAllStringSubmatch(coder, -1)
	require.Len(t, cells, 15)
	col := func(i int) string { return cells[i][1] }
	assert.Equal(t, "1", col(1), "working")
	assert.Equal(t, "0", col(2), "claimed")
	assert.Equal(t, "2", col(3), "pending: one queued, one held")
	assert.Equal(t, "gitea 1", col(6), "held, by reason")
	assert.Contains(t, col(7), "question 1", "waiting, by reason")
	assert.Equal(t, "1 of 2", col(8), "concurrency")
	assert.Equal(t, "2 / 3", col(9), "spawns in the window against the budget")
	assert.Equal(t, "1", col(10), "failed runs")
	assert.Equal(t, "1000/200", col(11))
	assert.Equal(t, "$1.25", col(12))
	assert.Equal(t, "$5.00, 100000 tokens a run", col(13))
	assert.Contains(t, col(14), "(credential anthropic-1): usage limit")
	assert.Contains(t, agentsPageRow(t, page, "idle"), "(disabled)", "a configured agent without work is listed")

	assert.Contains(t, page, "<td>acme/app</td>", "an open breaker of a readable repository")
	assert.NotContains(t, page, "acme/secret", "nor one the user cannot read")

	// Two hours on: the hold's wait, the pause and the breaker's cooldown
	// are over, and the running task's lease has lapsed.
	clock.Advance(2 * time.Hour)
	page = alice.page(t, "/agents", http.StatusOK)
	cells = regexp.MustCompile(`<td[^>]*>(.*?)</td>`).FindAllStringSubmatch(agentsPageRow(t, page, "coder"), -1)
	require.Len(t, cells, 15)
	assert.Equal(t, "2", col(3), "pending: both queued now")
	assert.Equal(t, "–", col(6), "a hold whose wait is over is not counted as held")
	assert.Equal(t, "0 of 2", col(8))
	assert.Equal(t, "2 / 3", col(9), "still in the window")
	assert.Equal(t, "–", col(14), "the pause is over")
	assert.NotContains(t, page, "<td>acme/app</td>", "the breaker closed")
}

// A pause past the daily cap of unattended resumes waits for a person.
func TestConsoleAgentsPageSaysAPauseWaitsForAPerson(t *testing.T) {
	f := newFixture(t, false)
	_, err := f.store.PauseCredential(context.Background(), repository.Pause{Credential: "k2", Agents: []string{"coder"},
		Until: task.HeldForAPerson, Reason: "daily resumes spent"})
	require.NoError(t, err)
	page := f.signIn(t, "alice", nil).page(t, "/agents", http.StatusOK)
	assert.Contains(t, agentsPageRow(t, page, "coder"), "until a person resumes it (mozi task resume) (credential k2)")
}

// claimForR1 claims the task for runner r1, as the dispatcher does.
func claimForR1(t *testing.T, store *repository.Store, id int64) {
	t.Helper()
	res, err := store.Apply(context.Background(), id, task.EventClaim, repository.Change{LeaseOwner: "r1"})
	require.NoError(t, err)
	require.True(t, res.Applied)
}

// serveWith starts the console with cfg, signing in against the fixture's
// Gitea.
func (f *fixture) serveWith(t *testing.T, cfg console.Config) {
	t.Helper()
	cfg.Store, cfg.GiteaURL, cfg.PublicURL = f.store, f.gitea.URL, "http://console.test"
	cfg.ClientID, cfg.ClientSecret = "mozi-console", f.gitea.secret
	srv, err := console.New(cfg)
	require.NoError(t, err)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	f.url = hs.URL
}
