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

func TestDeferPendingRestartsTheQuietPeriod(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := &pgtest.Clock{}
	store, err := repository.Open(ctx, pgtest.URL(t), repository.Options{Clock: clock})
	require.NoError(t, err)
	t.Cleanup(store.Close)
	tk, err := store.CreateTask(ctx, newTask(1))
	require.NoError(t, err)
	notBefore := func() time.Time {
		t.Helper()
		got, err := store.Task(ctx, tk.ID)
		require.NoError(t, err)
		return got.NotBefore
	}
	claim := func() []task.Task {
		t.Helper()
		claimed, err := store.ClaimTasks(ctx, repository.ClaimRequest{Owner: "r1", Limit: 1, LeaseTTL: time.Minute,
			Agents: []repository.AgentLimit{{Login: "coder1", MaxConcurrency: 1}}})
		require.NoError(t, err)
		return claimed
	}

	at := clock.Now()
	ok, err := store.DeferPending(ctx, tk.ID, time.Minute)
	require.NoError(t, err)
	assert.True(t, ok)
	first := notBefore()
	assert.False(t, first.Before(at.Add(time.Minute)), "due a quiet period from now: %s", first)

	ok, err = store.DeferPending(ctx, tk.ID, time.Second)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.True(t, first.Equal(notBefore()), "a shorter wait never brings it forward")

	clock.Advance(50 * time.Second)
	assert.Empty(t, claim(), "not quiet yet")
	ok, err = store.DeferPending(ctx, tk.ID, time.Minute)
	require.NoError(t, err)
	assert.True(t, ok)
	second := notBefore()
	assert.True(t, second.After(first), "the next comment restarts the quiet period")

	clock.Advance(50 * time.Second)
	assert.Empty(t, claim(), "quiet since the last comment for 50s of 60s")
	clock.Advance(11 * time.Second)
	require.Len(t, claim(), 1)

	ok, err = store.DeferPending(ctx, tk.ID, time.Minute)
	require.NoError(t, err)
	assert.False(t, ok, "a claimed task is not moved")
	assert.True(t, second.Equal(notBefore()))
}
