package payload

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository/task"
)

func TestSynthesizedBodiesParse(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 22, 23, 49, 42, 0, time.UTC)
	body, err := IssueEventBody("closed", task.Issue{Repo: "acme/widget", Number: 3, Title: "t", State: "closed",
		Author: "lead", Labels: []string{"type/bug"}, Assignees: []string{"coder2"}, UpdatedAt: at, ClosedAt: at})
	require.NoError(t, err)
	ev, err := Parse(KindIssue, body)
	require.NoError(t, err)
	assert.Equal(t, "closed", ev.Action)
	assert.Equal(t, []string{"coder2"}, ev.Issue.Assignees)
	assert.Equal(t, at, ev.Issue.ClosedAt)
	assert.Empty(t, ev.Sender, "the closer is unknown")

	body, err = PullClosedBody(task.PullRequest{Repo: "acme/widget", Number: 4, Merged: true, MergedBy: "lead", HeadSHA: "abc", UpdatedAt: at})
	require.NoError(t, err)
	ev, err = Parse(KindPullRequest, body)
	require.NoError(t, err)
	assert.True(t, ev.PullRequest.Merged)
	assert.Equal(t, "lead", ev.PullRequest.MergedBy)

	open := task.PullRequest{Repo: "acme/widget", Number: 6, Title: "Fix crash", Body: "Closes #2", State: task.StateOpen,
		Author: "coder1", HeadRef: "fix/2-crash", HeadSHA: "def", BaseRef: "main", RequestedReviewers: []string{"reviewer1"}, UpdatedAt: at}
	body, err = PullOpenedBody(open)
	require.NoError(t, err)
	ev, err = Parse(KindPullRequest, body)
	require.NoError(t, err)
	assert.Equal(t, ActionOpened, ev.Action)
	assert.Equal(t, "coder1", ev.Sender)
	assert.Equal(t, "fix/2-crash", ev.PullRequest.HeadRef)
	assert.Equal(t, []string{"reviewer1"}, ev.PullRequest.RequestedReviewers)

	body, err = ReviewRequestedBody(open, "reviewer1")
	require.NoError(t, err)
	ev, err = Parse(KindPullRequest, body)
	require.NoError(t, err)
	assert.Equal(t, ActionReviewRequested, ev.Action)
	assert.Equal(t, "reviewer1", ev.RequestedReviewer)

	body, err = StatusBody(task.CommitStatus{Repo: "acme/widget", ID: 7, SHA: "abc", Context: "ci/test", State: "failure"})
	require.NoError(t, err)
	ev, err = Parse(KindStatus, body)
	require.NoError(t, err)
	assert.Equal(t, "failure", ev.Status.State)
}
