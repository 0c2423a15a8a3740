package repository_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/pgtest"
	"github.com/moziplus/mozi/repository/task"
)

// Leases expire when the test's clock says so, not when the test has slept.
func TestClockExpiresLeases(t *testing.T) {
	t.Parallel()
	store, clock := pgtest.StoreWithClock(t)
	ctx := context.Background()

	a, err := store.AcquireLeadership(ctx, "ticker", "a", time.Minute)
	require.NoError(t, err)
	require.True(t, a)
	b, err := store.AcquireLeadership(ctx, "ticker", "b", time.Minute)
	require.NoError(t, err)
	assert.False(t, b, "a's lease runs for a minute")
	clock.Advance(2 * time.Minute)
	b, err = store.AcquireLeadership(ctx, "ticker", "b", time.Minute)
	require.NoError(t, err)
	assert.True(t, b, "a's lease expired on the test's clock")

	tk, err := store.CreateTask(ctx, newTask(1))
	require.NoError(t, err)
	claimed := claim(t, store, "dead-runner", 1, repository.AgentLimit{Login: "coder1", MaxConcurrency: 1})
	require.Len(t, claimed, 1)
	rescued, err := store.RescueExpired(ctx, time.Minute)
	require.NoError(t, err)
	assert.Empty(t, rescued, "the claim's minute has not passed")
	clock.Advance(2 * time.Minute)
	rescued, err = store.RescueExpired(ctx, time.Minute)
	require.NoError(t, err)
	require.Len(t, rescued, 1)
	assert.Equal(t, tk.ID, rescued[0].ID)
	assert.Equal(t, task.StatusPending, rescued[0].Status)
}

// A transaction's statements all see the time it began, as with now().
func TestClockStandsStillInATransaction(t *testing.T) {
	t.Parallel()
	store, clock := pgtest.StoreWithClock(t)
	ctx := context.Background()

	before, err := store.NowForTest(ctx)
	require.NoError(t, err)
	require.NoError(t, store.InTx(ctx, func(tx *repository.Tx) error {
		first, err := tx.NowForTest(ctx)
		require.NoError(t, err)
		clock.Advance(time.Hour)
		second, err := tx.NowForTest(ctx)
		require.NoError(t, err)
		assert.True(t, first.Equal(second), "one transaction, one now(): %s then %s", first, second)
		return nil
	}))
	after, err := store.NowForTest(ctx)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, after.Sub(before), time.Hour, "outside a transaction each statement reads the clock")
}
