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

// The task history names the delivery whose processing made a change,
// the console user who asked for one, and nobody for the engine's own.
func TestTaskEventsNameWhatMadeEachChange(t *testing.T) {
	ctx := context.Background()
	store := pgtest.Store(t)
	_, err := store.InsertDeliveries(ctx, []repository.Delivery{{ID: "d-1", Event: "issues", Action: "assigned",
		Repo: "acme/app", Headers: map[string]string{}, Body: []byte(`{}`)}})
	require.NoError(t, err)
	var id int64
	_, _, err = store.ProcessNextDelivery(ctx, repository.RetryPolicy{}, func(ctx context.Context, tx *repository.Tx, d repository.Delivery) (repository.DeliveryResult, error) {
		created, err := tx.CreateTask(ctx, repository.NewTask{Repo: "acme/app", IssueNumber: 1,
			ActionType: task.ActionIssueAssigned, Agent: "coder", Priority: task.DefaultPriority})
		id = created.ID
		return repository.DeliveryResult{Outcome: repository.OutcomeProcessed}, err
	})
	require.NoError(t, err)
	res, err := store.Apply(ctx, id, task.EventClaim, repository.Change{LeaseOwner: "r1"})
	require.NoError(t, err)
	require.True(t, res.Applied)
	applied, err := store.ConsoleAction(ctx, "alice", "stop", "task", func(tx *repository.Tx) (bool, error) {
		res, err := tx.Apply(ctx, id, task.EventCancel, repository.Change{Error: "stopped", Actor: "console:alice"})
		return res.Applied, err
	})
	require.NoError(t, err)
	require.True(t, applied)

	events, err := store.TaskEvents(ctx, id)
	require.NoError(t, err)
	require.Len(t, events, 3)
	assert.Equal(t, repository.TaskEvent{To: task.StatusPending, DeliveryID: "d-1", Event: "issues/assigned"},
		withoutTime(events[0]))
	assert.Equal(t, repository.TaskEvent{From: task.StatusPending, To: task.StatusClaimed}, withoutTime(events[1]))
	assert.Equal(t, repository.TaskEvent{From: task.StatusClaimed, To: task.StatusCancelled, Actor: "console:alice",
		LastError: "stopped"}, withoutTime(events[2]))
}

// withoutTime drops the time of a change, which the database gives.
func withoutTime(e repository.TaskEvent) repository.TaskEvent {
	e.At = time.Time{}
	return e
}

// Keyset paging: the pages of a filtered list follow each other without
// a gap or a repeat, and a repository not given is never listed.
func TestTasksPageKeysetAndRepos(t *testing.T) {
	ctx := context.Background()
	store := pgtest.Store(t)
	var want []int64
	for i := 1; i <= 7; i++ {
		for _, repo := range []string{"acme/app", "acme/secret"} {
			created, err := store.CreateTask(ctx, repository.NewTask{Repo: repo, IssueNumber: i,
				ActionType: task.ActionIssueAssigned, Agent: "coder", Priority: task.DefaultPriority})
			require.NoError(t, err)
			if repo == "acme/app" {
				want = append([]int64{created.ID}, want...)
			}
		}
	}
	repos, err := store.TaskRepos(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"acme/app", "acme/secret"}, repos)
	var got []int64
	var before int64
	for {
		page, err := store.TasksPage(ctx, repository.TaskPage{Repos: []string{"acme/app"}, Before: before, Limit: 3})
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		for _, tk := range page {
			assert.Equal(t, "acme/app", tk.Repo)
			got = append(got, tk.ID)
		}
		before = page[len(page)-1].ID
	}
	assert.Equal(t, want, got)
	none, err := store.TasksPage(ctx, repository.TaskPage{})
	require.NoError(t, err)
	assert.Empty(t, none, "no repositories given: nothing listed")
}
