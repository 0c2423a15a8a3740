package rules

import (
	"context"
	"slices"
	"strings"

	"github.com/moziplus/mozi/repository/task"
)

// reviewPending reports whether reviewer, an agent, already has a live
// task to review the pull request again. An author ends its round with a
// push and one re-request of the review: the push makes a review_updated
// task for a reviewer who asked for changes and the re-request a
// review_request, whichever comes first; the second must not be a second
// review of the same head.
func (e *eventCtx) reviewPending(ctx context.Context, pr task.PullRequest, reviewer string) (bool, error) {
	live, err := e.tx.LiveTasks(ctx, pr.Repo, pr.Number)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(live, func(t task.Task) bool {
		return (t.ActionType == task.ActionReviewRequest || t.ActionType == task.ActionReviewUpdated) &&
			t.Status == task.StatusPending && strings.EqualFold(t.Agent, reviewer)
	}), nil
}
