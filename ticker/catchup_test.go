package ticker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository/gitea"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/ticker"
)

// What happened in Gitea while no mozi listened (Gitea does not redeliver
// a failed webhook) is found by the catch-up and becomes the tasks the
// webhooks would have made, once; what happened before mozi first met the
// repository is not replayed.
func TestCatchUpFindsWhatHappenedWhileMoziWasDown(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.replay("007", "009") // mozi knows acme/widget: #3 assigned to coder2
	long := time.Now().Add(-48 * time.Hour)
	w.gitea.issues = map[int]task.Issue{
		20: {Repo: "acme/widget", Number: 20, Title: "Old work", State: task.StateOpen, Author: "lead",
			Assignees: []string{"coder1"}, CreatedAt: long, UpdatedAt: long},
	}
	tk := w.ticker(ticker.Config{Agents: []string{"coder1", "coder2", "reviewer1", "lead"}, Repos: []string{"acme/widget"}})
	catchUp := func() int { return tk.RunJob(ctx, ticker.JobCatchUp) }

	assert.Zero(t, catchUp(), "the first pass only marks where mozi starts listening")
	w.drain()
	assert.Empty(t, w.tasks(task.ActionIssueAssigned, "coder1", 20), "no backfill of what predates mozi")

	// mozi is down: lead assigns #9 to coder1; coder2 opens PR #12 for #3
	// and asks reviewer1 to review it.
	now := time.Now().Add(time.Second)
	w.gitea.issues[9] = task.Issue{Repo: "acme/widget", Number: 9, Title: "Retry budget", State: task.StateOpen,
		Author: "lead", Labels: []string{"type/bug"}, Assignees: []string{"coder1"}, CreatedAt: now, UpdatedAt: now}
	// lead reviewed #12 without being asked: Gitea lists it among the
	// requested reviewers anyway, but only reviewer1's request is open.
	w.gitea.pulls = map[int]task.PullRequest{
		12: {Repo: "acme/widget", Number: 12, Title: "Fix #3", Body: "Closes #3", State: task.StateOpen, Author: "coder2",
			HeadRef: "fix/3-rate-limiter", HeadSHA: "0123456789abcdef", BaseRef: "main",
			RequestedReviewers: []string{"reviewer1", "someone-else", "lead"}, UpdatedAt: now},
	}
	w.gitea.pending = map[int][]string{12: {"reviewer1", "someone-else"}}
	// and lead asked coder1 something on #3.
	w.gitea.comments = []gitea.IssueComment{{Issue: 3, Comment: task.Comment{ID: 901, Author: "lead",
		Body: "@coder1 can you look at the retry budget too?", CreatedAt: now, UpdatedAt: now}}}

	assert.Equal(t, 4, catchUp(), "the assignment, the pull request, the review request and the comment")
	w.drain()
	require.Len(t, w.tasks(task.ActionIssueAssigned, "coder1", 9), 1)
	require.Len(t, w.tasks(task.ActionReviewRequest, "reviewer1", 12), 1)
	assert.Empty(t, w.tasks(task.ActionReviewRequest, "lead", 12), "a review is not a request")
	require.Len(t, w.tasks(task.ActionMention, "coder1", 3), 1)
	assert.Equal(t, task.StatusReview, w.task(task.ActionIssueAssigned, "coder2", 3).Status, "PR #12 links #3's work")

	assert.Zero(t, catchUp(), "nothing is found twice")
	w.drain()
	assert.Len(t, w.tasks(task.ActionIssueAssigned, "coder1", 9), 1)
	assert.Len(t, w.tasks(task.ActionReviewRequest, "reviewer1", 12), 1)
	assert.Len(t, w.tasks(task.ActionMention, "coder1", 3), 1)
}

// Gitea down during a catch-up pass: the mark stays, and the next pass
// reads from it.
func TestCatchUpKeepsItsMarkWhileGiteaIsDown(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.replay("007", "009")
	tk := w.ticker(ticker.Config{Agents: []string{"coder1"}, Repos: []string{"acme/widget"}})
	tk.RunJob(ctx, ticker.JobCatchUp)

	now := time.Now().Add(time.Second)
	w.gitea.issues = map[int]task.Issue{9: {Repo: "acme/widget", Number: 9, Title: "Retry budget", State: task.StateOpen,
		Author: "lead", Assignees: []string{"coder1"}, CreatedAt: now, UpdatedAt: now}}
	w.gitea.err = errGiteaDown
	assert.Zero(t, tk.RunJob(ctx, ticker.JobCatchUp))
	w.gitea.err = nil
	assert.Equal(t, 1, tk.RunJob(ctx, ticker.JobCatchUp))
	w.drain()
	assert.Len(t, w.tasks(task.ActionIssueAssigned, "coder1", 9), 1)
}
