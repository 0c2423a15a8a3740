package repository_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/task"
)

// A 9 MB issue body is stored as mozi keeps it, in the issues table and in
// every task's copy, whichever way it arrives: what a prompt uses, a
// marker, and no more.
func TestHugeIssueBodiesAreStoredCapped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, raw := setup(t)
	huge := "## Task\nParent: #1\n" + strings.Repeat("a line of a pasted log\n", 9_000_000/23)
	want := task.CapBody(huge)
	require.Less(t, len(want), len(huge))

	require.NoError(t, store.SaveIssue(ctx, task.Issue{Repo: "acme/widget", Number: 2, Title: "big", Body: huge}))
	issue, err := store.Issue(ctx, "acme/widget", 2)
	require.NoError(t, err)
	assert.Equal(t, want, issue.Body)
	assert.Contains(t, issue.Body, "bytes omitted; Gitea has the whole text]")

	n := newTask(2)
	n.IssueBody = huge
	created, err := store.CreateTask(ctx, n)
	require.NoError(t, err)
	assert.Equal(t, want, created.IssueBodyCache, "the created task carries the stored copy")
	read, err := store.Task(ctx, created.ID)
	require.NoError(t, err)
	assert.Equal(t, want, read.IssueBodyCache)

	require.NoError(t, store.InTx(ctx, func(tx *repository.Tx) error {
		return tx.RefreshLiveTasks(ctx, "acme/widget", 2, repository.IssueFacts{Body: huge + "more", Title: "big"})
	}))
	require.NoError(t, store.RefreshIssueCopy(ctx, created.ID, task.Issue{Body: huge + "more", Title: "big"}))

	var longest int
	require.NoError(t, raw.QueryRow(ctx, `SELECT max(length) FROM (
			SELECT octet_length(body) AS length FROM issues
			UNION ALL SELECT octet_length(issue_body_cache) FROM task_state) AS l`).Scan(&longest))
	assert.LessOrEqual(t, longest, task.MaxBodyBytes)
}
