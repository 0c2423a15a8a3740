package repository_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/pgtest"
)

// Each new reset of a credential is one unattended resume on the reset's
// day (UTC): runs that hit the same limit count once, a backoff not at
// all, another day starts again; every agent named is paused until the
// latest reset, and only while it lasts, as the metric says (0 for an
// agent not paused).
func TestPauseCredentialCountsResumesPerDay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, clock := pgtest.StoreWithClock(t)
	day := time.Now().UTC().Truncate(24 * time.Hour).Add(48 * time.Hour)
	steps := []struct {
		name    string
		p       repository.Pause
		resumes int
	}{
		{"a first limit", repository.Pause{Credential: "k1", Agents: []string{"a1", "a2"}, Until: day.Add(time.Hour), Counted: true}, 1},
		{"the same limit again", repository.Pause{Credential: "k1", Agents: []string{"a1", "a2"}, Until: day.Add(time.Hour), Counted: true}, 1},
		{"a backoff is not counted", repository.Pause{Credential: "k1", Agents: []string{"a1", "a2"}, Until: day.Add(30 * time.Minute)}, 1},
		{"another credential", repository.Pause{Credential: "k2", Agents: []string{"b1"}, Until: day.Add(time.Hour), Counted: true}, 1},
		{"a later limit", repository.Pause{Credential: "k1", Agents: []string{"a1", "a2"}, Until: day.Add(5 * time.Hour), Counted: true}, 2},
		{"the next day", repository.Pause{Credential: "k1", Agents: []string{"a1", "a2"}, Until: day.Add(25 * time.Hour), Counted: true}, 1},
	}
	for _, s := range steps {
		got, err := store.PauseCredential(ctx, s.p)
		require.NoError(t, err, s.name)
		assert.Equal(t, s.resumes, got, s.name)
	}
	pauses, err := store.AgentPauses(ctx)
	require.NoError(t, err)
	require.Len(t, pauses, 3)
	for _, p := range pauses {
		want := day.Add(25 * time.Hour)
		if p.Agent == "b1" {
			want = day.Add(time.Hour)
		}
		assert.True(t, want.Equal(p.Until), "%s until %s", p.Agent, p.Until)
	}
	metric := repository.NewPauseCollector(store, []string{"a1", "a2", "b1", "c1"}, slog.New(slog.DiscardHandler))
	const head = `
# HELP mozi_agent_paused_until_seconds When an agent paused at its account's usage limit resumes, in unix seconds (0: not paused; year 9999: it waits for a person).
# TYPE mozi_agent_paused_until_seconds gauge
`
	late, early := day.Add(25*time.Hour).Unix(), day.Add(time.Hour).Unix()
	require.NoError(t, testutil.CollectAndCompare(metric, strings.NewReader(head+fmt.Sprintf(`mozi_agent_paused_until_seconds{agent="a1"} %d
mozi_agent_paused_until_seconds{agent="a2"} %d
mozi_agent_paused_until_seconds{agent="b1"} %d
mozi_agent_paused_until_seconds{agent="c1"} 0
`, late, late, early))))

	clock.Advance(time.Until(day.Add(time.Hour)) + time.Second)
	pauses, err = store.AgentPauses(ctx)
	require.NoError(t, err)
	require.Len(t, pauses, 2, "b1's limit has reset")
	assert.Equal(t, []string{"a1", "a2"}, []string{pauses[0].Agent, pauses[1].Agent})
	require.NoError(t, testutil.CollectAndCompare(metric, strings.NewReader(head+fmt.Sprintf(`mozi_agent_paused_until_seconds{agent="a1"} %d
mozi_agent_paused_until_seconds{agent="a2"} %d
mozi_agent_paused_until_seconds{agent="b1"} 0
mozi_agent_paused_until_seconds{agent="c1"} 0
`, late, late))))
}
