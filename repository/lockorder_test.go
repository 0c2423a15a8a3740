package repository_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/task"
)

// Many writers on one issue's tasks at once — the deliveries that refresh
// its copy, a close elsewhere waking its dependents, rules finishing its
// tasks one by one, rescues, runs ending — take the rows in one order
// (task id) and so never deadlock.
func TestConcurrentWritersOnOneIssueNeverDeadlock(t *testing.T) {
	t.Parallel()
	store, raw := setup(t)
	ctx := context.Background()
	var ids []int64
	for i, agent := range []string{"coder1", "coder2", "reviewer1", "lead", "coder3", "coder4"} {
		n := newTask(1)
		n.Agent, n.DependsOn = agent, []int{9}
		if i%2 == 1 {
			n.ActionType = task.ActionMention
		}
		tk, err := store.CreateTask(ctx, n)
		require.NoError(t, err)
		ids = append(ids, tk.ID)
	}
	// Scatter the rows physically, as updates over time do.
	_, err := raw.Exec(ctx, `UPDATE task_state SET priority = priority WHERE id = ANY($1)`, []int64{ids[0], ids[3]})
	require.NoError(t, err)

	var deadlocks, others atomic.Int64
	check := func(err error) {
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
		case errors.As(err, &pgErr) && pgErr.Code == "40P01":
			deadlocks.Add(1)
		default:
			others.Add(1)
			t.Log(err)
		}
	}
	later := time.Now().Add(time.Hour)
	writers := []func(i int) error{
		func(i int) error { // an issues delivery: the copy's facts onto its live tasks
			return store.InTx(ctx, func(tx *repository.Tx) error {
				return tx.RefreshLiveTasks(ctx, "acme/widget", 1, repository.IssueFacts{Priority: i % 4, Title: fmt.Sprint(i),
					Body: "body", DependsOn: []int{9}})
			})
		},
		func(int) error { // #9 closed: its dependents are due
			return store.InTx(ctx, func(tx *repository.Tx) error { return tx.WakeDependents(ctx, "acme/widget", 9) })
		},
		func(i int) error { // a rule finishing the issue's tasks one by one, then the copy
			return store.InTx(ctx, func(tx *repository.Tx) error {
				for _, id := range ids {
					if err := tx.PatchTaskMeta(ctx, id, task.Meta{Sender: fmt.Sprint(i)}); err != nil {
						return err
					}
				}
				return tx.RefreshLiveTasks(ctx, "acme/widget", 1, repository.IssueFacts{Title: "t", DependsOn: []int{9}})
			})
		},
		func(int) error { // holds woken after a Gitea outage
			_, err := store.WakeHeld(ctx, task.HeldForGitea)
			return err
		},
		func(int) error { // the rescue sweep
			_, err := store.RescueExpired(ctx, time.Minute)
			return err
		},
		func(i int) error { // a release of one task, with a hold
			_, err := store.Apply(ctx, ids[i%len(ids)], task.EventRelease, repository.Change{NotBefore: later, HeldFor: task.HeldForGitea})
			return err
		},
	}
	var wg sync.WaitGroup
	for w, write := range writers {
		for g := range 2 {
			wg.Go(func() {
				for i := range 60 {
					check(write(i + 100*g + 1000*w))
				}
			})
		}
	}
	wg.Wait()
	assert.Zero(t, deadlocks.Load(), "deadlocks (40P01)")
	assert.Zero(t, others.Load(), "other errors")
}
