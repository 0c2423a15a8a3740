package rules

import (
	"context"

	"github.com/moziplus/mozi/repository/gitea/payload"
)

// handler applies one rule inside the delivery's transaction.
type handler func(e *eventCtx, ctx context.Context) error

// anyAction is the row of the actions a kind lists no rule of its own for.
const anyAction = "*"

// kindRules are the rules of one kind of event.
type kindRules struct {
	// enter brings mozi's copy of the object the event is about up to
	// date, whatever the action (nil: nothing to copy); false means the
	// event has nothing more to do.
	enter func(e *eventCtx, ctx context.Context) (bool, error)
	// on are the rules by action; anyAction's serves the actions not
	// listed. An action without a rule has no effect beyond enter.
	on map[string]handler
}

// table is what a Gitea event does, by kind and action (SPEC §4). Each
// rule is a method of eventCtx in map_<kind>.go.
var table = map[payload.Kind]kindRules{
	payload.KindIssue: {enter: (*eventCtx).enterIssue, on: map[string]handler{
		payload.ActionClosed:   (*eventCtx).onIssueClosed,      // finish its tasks, notify its creator
		payload.ActionReopened: (*eventCtx).onIssueReopened,    // the assignees' work again
		anyAction:              (*eventCtx).onAssigneesChanged, // opened, edited, (un)assigned, labels
	}},
	payload.KindIssueComment: {on: map[string]handler{
		payload.ActionCreated: (*eventCtx).onComment, // [Action Report], @mentions
		payload.ActionEdited:  (*eventCtx).onComment,
	}},
	payload.KindPullRequest: {enter: (*eventCtx).enterPullRequest, on: map[string]handler{
		payload.ActionOpened:               (*eventCtx).onPullOpened, // linked issues' tasks → review (enter)
		payload.ActionReopened:             (*eventCtx).onPullOpened,
		payload.ActionSynchronized:         (*eventCtx).onPullPushed, // answers "changes requested"
		payload.ActionReviewRequested:      (*eventCtx).onReviewRequested,
		payload.ActionReviewRequestRemoved: (*eventCtx).onReviewRequestRemoved,
		payload.ActionClosed:               (*eventCtx).onPullClosed, // merged: done; unmerged: back to work
	}},
	payload.KindReview: {enter: (*eventCtx).enterPullRequest, on: map[string]handler{
		anyAction: (*eventCtx).onReview, // approved, rejected, comment
	}},
	payload.KindStatus:      {on: map[string]handler{anyAction: (*eventCtx).onStatus}}, // CI, deploy, infra failures
	payload.KindWorkflowRun: {on: map[string]handler{anyAction: (*eventCtx).onStatus}},
}

// follow applies the rules of the event's kind to it.
func (e *eventCtx) follow(ctx context.Context, r kindRules) error {
	if r.enter != nil {
		if more, err := r.enter(e, ctx); err != nil || !more {
			return err
		}
	}
	h, ok := r.on[e.ev.Action]
	if !ok {
		h = r.on[anyAction]
	}
	if h == nil {
		return nil
	}
	return h(e, ctx)
}
