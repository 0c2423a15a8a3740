package rules

import (
	"context"
	"strings"

	"github.com/moziplus/mozi/repository/task"
)

// notePush records a push to the pull request's branch by someone other
// than a registered agent or mozi itself: its merge will not count as
// autonomous. The sender of a synchronized event is who pushed.
func (e *eventCtx) notePush(ctx context.Context) error {
	sender := e.ev.Sender
	if _, ok := e.agent(sender); ok || sender == "" || strings.EqualFold(sender, e.m.cfg.BotUser) {
		return nil
	}
	return e.tx.MarkHumanPush(ctx, e.pr.Repo, e.pr.Number)
}

// recordOutcome writes the outcome of a merged pull request an agent
// authored (docs/loop/outcomes.md), once.
func (e *eventCtx) recordOutcome(ctx context.Context, pr task.PullRequest) error {
	ag, ok := e.agent(pr.Author)
	if !ok || !pr.Merged {
		return nil
	}
	_, err := e.tx.RecordOutcome(ctx, pr.Repo, pr.Number, ag.Login)
	return err
}
