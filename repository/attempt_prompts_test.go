package repository_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/pgtest"
	"github.com/moziplus/mozi/repository/task"
)

// A stored prompt is kept as it was, made storable as text, or cut near
// the cap with a note, on a character boundary.
func TestAttemptPromptsAreStorableAndCapped(t *testing.T) {
	huge := strings.Repeat("é", repository.MaxStoredPrompt) // 2 bytes a character: twice the cap
	tests := []struct {
		name   string
		prompt string
		want   func(t *testing.T, stored string)
	}{
		{name: "as it was", prompt: "Fix #3.\n", want: func(t *testing.T, stored string) {
			assert.Equal(t, "Fix #3.\n", stored)
		}},
		{name: "NUL and invalid UTF-8", prompt: "a\x00b\xffc", want: func(t *testing.T, stored string) {
			assert.Equal(t, "ab\uFFFDc", stored)
		}},
		{name: "huge", prompt: huge, want: func(t *testing.T, stored string) {
			assert.LessOrEqual(t, len(stored), repository.MaxStoredPrompt)
			assert.Greater(t, len(stored), repository.MaxStoredPrompt-200, "cut near the cap, not far before it")
			kept, note, ok := strings.Cut(stored, "\n\n[mozi:")
			require.True(t, ok, "the note says it was cut")
			assert.True(t, strings.HasPrefix(huge, kept), "the start is kept as it was, whole characters")
			assert.Equal(t, " prompt cut here, 262144 of its 524288 bytes stored]\n", note)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			store := pgtest.Store(t)
			a := runningAttempt(t, store)
			require.NoError(t, store.RecordAttemptPrompt(ctx, a.ID, tt.prompt))
			prompts, err := store.AttemptPrompts(ctx, a.TaskID)
			require.NoError(t, err)
			require.Contains(t, prompts, a.Attempt)
			tt.want(t, prompts[a.Attempt])
		})
	}
}

// runningAttempt starts the first attempt of a new task, as the spawner
// does.
func runningAttempt(t *testing.T, store *repository.Store) task.Attempt {
	t.Helper()
	ctx := context.Background()
	tk, err := store.CreateTask(ctx, repository.NewTask{Repo: "acme/app", IssueNumber: 1,
		ActionType: task.ActionIssueAssigned, Agent: "coder", Priority: task.DefaultPriority})
	require.NoError(t, err)
	res, err := store.Apply(ctx, tk.ID, task.EventClaim, repository.Change{LeaseOwner: "r1"})
	require.NoError(t, err)
	require.True(t, res.Applied)
	claimed, err := store.Task(ctx, tk.ID)
	require.NoError(t, err)
	a, ok, err := store.StartRun(ctx, claimed, "r1", "/logs/acme_app/1-1.log")
	require.NoError(t, err)
	require.True(t, ok)
	return a
}

// A stored prompt goes with its run's log at the retention, not before.
func TestPruneDropsAPromptWithItsLog(t *testing.T) {
	ctx := context.Background()
	store, raw := setup(t)
	a := runningAttempt(t, store)
	require.NoError(t, store.RecordAttemptPrompt(ctx, a.ID, "do it"))
	_, err := raw.Exec(ctx, `UPDATE task_attempts SET started_at = now() - interval '200 days' WHERE id = $1`, a.ID)
	require.NoError(t, err)
	cutoff := time.Now().Add(-180 * 24 * time.Hour)

	_, err = store.Prune(ctx, cutoff)
	require.NoError(t, err)
	prompts, err := store.AttemptPrompts(ctx, a.TaskID)
	require.NoError(t, err)
	assert.Equal(t, map[int]string{1: "do it"}, prompts, "its task is live: the prompt stays")

	_, err = raw.Exec(ctx, `UPDATE task_state SET status = 'done', finished_at = now() - interval '190 days' WHERE id = $1`, a.TaskID)
	require.NoError(t, err)
	r, err := store.Prune(ctx, cutoff)
	require.NoError(t, err)
	assert.Equal(t, []string{"/logs/acme_app/1-1.log"}, r.LogPaths)
	prompts, err = store.AttemptPrompts(ctx, a.TaskID)
	require.NoError(t, err)
	assert.Empty(t, prompts, "the prompt went with the log")
}
