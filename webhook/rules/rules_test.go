package rules

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/moziplus/mozi/repository/gitea/payload"
	"github.com/moziplus/mozi/repository/task"
)

// Every kind of event mozi stores for processing has rules, and an action
// a kind does not list falls to its anyAction rule or to none.
func TestTableCoversEveryKind(t *testing.T) {
	t.Parallel()
	for _, kind := range []payload.Kind{payload.KindIssue, payload.KindIssueComment, payload.KindPullRequest,
		payload.KindReview, payload.KindStatus, payload.KindWorkflowRun} {
		r, ok := table[kind]
		if assert.True(t, ok, kind) {
			assert.NotEmpty(t, r.on, kind)
		}
	}
	_, ok := table[payload.KindIssueComment].on[anyAction]
	assert.False(t, ok, "a deleted comment has no effect")
	_, ok = table[payload.KindIssue].on[anyAction]
	assert.True(t, ok, "every other issue action follows the assignees")
}

// An issue closed (or reopened) in the same second as mozi's copy was
// last updated keeps the payload's action: Gitea's timestamps have
// one-second resolution, and an open copy of a closed issue would keep
// its dependents from ever being claimed.
func TestSameSecondCloseAndReopen(t *testing.T) {
	t.Parallel()
	second := time.Date(2026, 11, 26, 4, 32, 25, 0, time.UTC)
	open := task.Issue{Repo: "acme/widget", Number: 1, State: task.StateOpen, UpdatedAt: second}
	closed := open
	closed.State, closed.ClosedAt, closed.ClosedBy = task.StateClosed, second, "alice"
	for _, tc := range []struct {
		name   string
		known  task.Issue
		action string
		state  string
		want   task.Issue
	}{
		{"closed in the second it was opened", open, payload.ActionClosed, task.StateClosed, closed},
		{"reopened in the second it was closed", closed, payload.ActionReopened, task.StateOpen, open},
		{"an edit of that second changes no state", open, payload.ActionEdited, task.StateClosed, open},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pi := tc.known
			pi.State, pi.ClosedAt, pi.ClosedBy = tc.state, time.Time{}, ""
			got := mergeIssue(tc.known, true, payload.Event{Action: tc.action, Repo: "acme/widget", Sender: "alice", Issue: &pi}, 0)
			assert.Equal(t, tc.want.State, got.State)
			assert.Equal(t, tc.want.ClosedAt, got.ClosedAt)
			assert.Equal(t, tc.want.ClosedBy, got.ClosedBy)
		})
	}
}
