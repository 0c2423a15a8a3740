package rules

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/moziplus/mozi/repository/gitea/payload"
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
