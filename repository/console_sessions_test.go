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

// Expired console sessions are pruned oldest first, a bounded batch at a
// time; a live one stays.
func TestPruneConsoleSessionsIsBoundedAndSparesLiveOnes(t *testing.T) {
	ctx := context.Background()
	store, clock := pgtest.StoreWithClock(t)
	for i, ttl := range []time.Duration{time.Minute, 2 * time.Minute, 3 * time.Minute, time.Hour} {
		require.NoError(t, store.CreateConsoleSession(ctx, []byte{byte(i)}, repository.ConsoleSession{Login: "alice",
			Token: "t", CSRF: "c", ExpiresAt: clock.Now().Add(ttl)}))
	}
	n, err := store.PruneConsoleSessions(ctx, 10)
	require.NoError(t, err)
	assert.Zero(t, n, "none expired yet")

	clock.Advance(5 * time.Minute)
	for _, want := range []int{2, 1, 0} {
		n, err := store.PruneConsoleSessions(ctx, 2)
		require.NoError(t, err)
		assert.Equal(t, want, n)
	}
	_, err = store.ConsoleSession(ctx, []byte{3})
	assert.NoError(t, err, "the live session stays")
}
