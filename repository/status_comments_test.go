package repository_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/task"
)

// A task change its status comment shows makes the comment due once,
// however many changes came; a heartbeat or a meta patch does not.
func TestStatusMarksFoldIntoOneDueComment(t *testing.T) {
	store, raw := setup(t)
	ctx := context.Background()
	due := func() []repository.StatusComment {
		t.Helper()
		_, err := store.FoldStatusMarks(ctx)
		require.NoError(t, err)
		cs, err := store.ClaimStatusComments(ctx, 10, 0, time.Millisecond)
		require.NoError(t, err)
		return cs
	}
	tk, err := store.CreateTask(ctx, repository.NewTask{Repo: "acme/widget", IssueNumber: 3,
		ActionType: task.ActionIssueAssigned, Agent: "coder", Priority: task.DefaultPriority})
	require.NoError(t, err)
	_, err = store.CreateTask(ctx, repository.NewTask{Repo: "acme/widget", IssueNumber: 3,
		ActionType: task.ActionMention, Agent: "coder", Priority: task.DefaultPriority})
	require.NoError(t, err)
	_, err = store.Apply(ctx, tk.ID, task.EventClaim, repository.Change{LeaseOwner: "r1", LeaseTTL: time.Minute})
	require.NoError(t, err)

	cs := due()
	require.Len(t, cs, 1, "one comment per issue")
	c := cs[0]
	assert.Equal(t, 3, c.Issue)
	assert.Zero(t, c.CommentID)
	c.Reacted = []int64{tk.ID}
	require.NoError(t, store.StatusShown(ctx, c, 900, "queued", true))
	assert.Empty(t, due(), "shown: nothing due")

	_, err = store.Heartbeat(ctx, tk.ID, "r1", time.Minute)
	require.NoError(t, err)
	require.NoError(t, store.PatchTaskMeta(ctx, tk.ID, task.Meta{HeadSHA: "abc"}))
	assert.Empty(t, due(), "a heartbeat and a meta patch change nothing shown")

	_, err = store.Apply(ctx, tk.ID, task.EventStart, repository.Change{LeaseOwner: "r1"})
	require.NoError(t, err)
	cs = due()
	require.Len(t, cs, 1)
	assert.Equal(t, int64(900), cs[0].CommentID)
	assert.Equal(t, "queued", cs[0].Body)
	assert.Equal(t, []int64{tk.ID}, cs[0].Reacted)

	// A change folded after the claim keeps the comment due.
	_, err = store.Apply(ctx, tk.ID, task.EventOpenReview, repository.Change{PRNumber: 7})
	require.NoError(t, err)
	_, err = store.FoldStatusMarks(ctx)
	require.NoError(t, err)
	require.NoError(t, store.StatusShown(ctx, cs[0], 900, "running", true))
	cs = due()
	require.Len(t, cs, 1, "the pull request is not shown yet")
	require.NoError(t, store.StatusShown(ctx, cs[0], 900, "in review", true))

	edits, err := store.StatusEdits(ctx, "acme/widget", 3)
	require.NoError(t, err)
	var bodies []string
	for _, e := range edits {
		bodies = append(bodies, e.Body)
	}
	assert.Equal(t, []string{"queued", "running", "in review"}, bodies)

	// A breaker that trips holds pending tasks without changing them:
	// their issues' comments are due.
	_, err = raw.Exec(ctx, `INSERT INTO repo_breakers (repo, tripped_at, open_until, comments, issue)
		VALUES ('acme/widget', now(), now() + interval '1 hour', 30, 3)`)
	require.NoError(t, err)
	require.Len(t, due(), 1, "the pending mention of #3 waits on the breaker")
	facts, err := store.StatusFactsOf(ctx, "acme/widget", []string{"coder", "other"})
	require.NoError(t, err)
	assert.True(t, facts.BreakerUntil.After(facts.Now))
	assert.Equal(t, map[string]bool{}, facts.Busy, "coder's task is in review, not running")
}

// The record of an issue's edits keeps its latest ones.
func TestStatusEditsKeepTheLatest(t *testing.T) {
	store, _ := setup(t)
	ctx := context.Background()
	c := repository.StatusComment{Repo: "acme/widget", Issue: 3}
	for i := range 55 {
		require.NoError(t, store.StatusShown(ctx, c, 900, fmt.Sprint("body ", i), true))
	}
	require.NoError(t, store.StatusShown(ctx, c, 900, "body 54", false))
	edits, err := store.StatusEdits(ctx, "acme/widget", 3)
	require.NoError(t, err)
	require.Len(t, edits, 50)
	assert.Equal(t, "body 5", edits[0].Body)
	assert.Equal(t, "body 54", edits[49].Body)
}

// A comment waiting out a backoff is due again when Gitea answers.
func TestWakeStatusCommentsEndsTheirBackoff(t *testing.T) {
	store, _ := setup(t)
	ctx := context.Background()
	_, err := store.CreateTask(ctx, repository.NewTask{Repo: "acme/widget", IssueNumber: 3,
		ActionType: task.ActionIssueAssigned, Agent: "coder", Priority: task.DefaultPriority})
	require.NoError(t, err)
	_, err = store.FoldStatusMarks(ctx)
	require.NoError(t, err)
	cs, err := store.ClaimStatusComments(ctx, 10, 0, time.Millisecond)
	require.NoError(t, err)
	require.Len(t, cs, 1)
	require.NoError(t, store.StatusRetry(ctx, cs[0], time.Now().Add(time.Hour), "Gitea is down", false))
	cs, err = store.ClaimStatusComments(ctx, 10, 0, time.Minute)
	require.NoError(t, err)
	require.Empty(t, cs, "waiting out its backoff")

	n, err := store.WakeStatusComments(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	cs, err = store.ClaimStatusComments(ctx, 10, 0, time.Minute)
	require.NoError(t, err)
	require.Len(t, cs, 1)
	assert.Equal(t, 2, cs[0].Attempts, "the failed try counts")
}
