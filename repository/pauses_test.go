package repository_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/pgtest"
)

// Each new reset of a credential is one unattended resume on the reset's
// day (UTC): runs that hit the same limit count once, a backoff not at
// all, another day starts again; every agent named is paused until the
// latest reset, and only while it lasts.
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
	clock.Advance(time.Until(day.Add(time.Hour)) + time.Second)
	pauses, err = store.AgentPauses(ctx)
	require.NoError(t, err)
	require.Len(t, pauses, 2, "b1's limit has reset")
	assert.Equal(t, []string{"a1", "a2"}, []string{pauses[0].Agent, pauses[1].Agent})
}
