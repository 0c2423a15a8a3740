package repository_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository/task"
)

// Unsettled counts the work mozi will do without further news, and not
// the tasks that wait for an issue to close.
func TestUnsettledCountsWhatMoziStillDoes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, raw := setup(t)
	u, err := store.Unsettled(ctx)
	require.NoError(t, err)
	assert.True(t, u.Zero(), "an empty database is settled: %s", u)
	assert.Equal(t, "settled", u.String())

	now := time.Now()
	require.NoError(t, store.SaveIssue(ctx, task.Issue{Repo: "acme/widget", Number: 1, State: task.StateOpen, UpdatedAt: now}))
	waiting := newTask(5)
	waiting.DependsOn = []int{1}
	_, err = store.CreateTask(ctx, waiting)
	require.NoError(t, err)
	u, err = store.Unsettled(ctx)
	require.NoError(t, err)
	assert.True(t, u.Zero(), "a task waiting for open #1 waits for news: %s", u)

	due, err := store.CreateTask(ctx, newTask(6))
	require.NoError(t, err)
	backoff := newTask(7)
	backoff.Agent = "coder2"
	later, err := store.CreateTask(ctx, backoff)
	require.NoError(t, err)
	_, err = raw.Exec(ctx, `UPDATE task_state SET not_before = now() + interval '1 hour' WHERE id = $1`, later.ID)
	require.NoError(t, err)
	u, err = store.Unsettled(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, u.Pending, "due now and after its backoff: both will run without news")

	_, err = raw.Exec(ctx, `UPDATE task_state SET status = 'claimed', lease_owner = 'r1', lease_expires_at = now() + interval '1 minute' WHERE id = $1`, due.ID)
	require.NoError(t, err)
	_, err = raw.Exec(ctx, `INSERT INTO task_attempts (task_id, attempt, agent) VALUES ($1, 1, 'coder1')`, due.ID)
	require.NoError(t, err)
	_, err = raw.Exec(ctx, `INSERT INTO webhook_deliveries (delivery_id, event, body) VALUES ('d1', 'issues', '\x7b7d')`)
	require.NoError(t, err)
	u, err = store.Unsettled(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, u.Pending)
	assert.Equal(t, 1, u.Claimed)
	assert.Equal(t, 1, u.Running)
	assert.Equal(t, 1, u.Deliveries)
	assert.Equal(t, "1 unprocessed deliveries, 1 pending tasks, 1 claimed tasks, 1 running attempts", u.String())
}
