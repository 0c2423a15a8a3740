package rules

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moziplus/mozi/repository/gitea/payload"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/repository/task/build"
	"github.com/moziplus/mozi/webhook/rules/conventions"
)

// DefaultQuietPeriod is how long a pull request's author waits after the
// latest loose comment of a burst before its one turn starts.
const DefaultQuietPeriod = 60 * time.Second

// onLooseComment gives a person's plain comment on an agent's open pull
// request to its author as review feedback, debounced: the author's
// pending review_comment task collects the comments, and each one pushes
// its start to the quiet period from now, so a burst is one turn that
// reads every comment of it (prompts read the round at run time). A
// comment that mentions the author is its mention task's; a pending
// review_result will read it anyway.
func (e *eventCtx) onLooseComment(ctx context.Context, number int) error {
	c := e.ev.Comment
	if e.ev.Action != payload.ActionCreated || e.ev.Issue == nil || !e.ev.Issue.IsPull {
		return nil
	}
	if _, isAgent := e.agent(c.Author); isAgent || strings.EqualFold(c.Author, e.m.cfg.BotUser) {
		return nil
	}
	if match, _ := conventions.ActionReport(c.Body); match != conventions.NoReport {
		return nil
	}
	pr, err := e.tx.PullRequest(ctx, e.ev.Repo, number)
	if errors.Is(err, task.ErrNotFound) {
		return nil // a pull request mozi never saw opened is no agent's
	}
	if err != nil {
		return err
	}
	ag, ok := e.agent(pr.Author)
	if !ok || pr.State != task.StateOpen {
		return nil
	}
	if slices.ContainsFunc(conventions.Mentions(c.Body), func(l string) bool { return strings.EqualFold(l, ag.Login) }) {
		return nil
	}
	live, err := e.tx.LiveTasks(ctx, pr.Repo, pr.Number)
	if err != nil {
		return err
	}
	mine := func(action task.ActionType) (task.Task, bool) {
		i := slices.IndexFunc(live, func(t task.Task) bool { return t.ActionType == action && strings.EqualFold(t.Agent, ag.Login) })
		if i < 0 {
			return task.Task{}, false
		}
		return live[i], true
	}
	result, inRound := mine(task.ActionReviewResult)
	if inRound && result.Status == task.StatusPending {
		return nil
	}
	log := e.log.With("pr", pr.Number, "agent", ag.Login, "comment_id", c.ID)
	t, ok := mine(task.ActionReviewComment)
	if !ok {
		n := e.prTask(ctx, pr, task.ActionReviewComment, ag.Login)
		n.Meta.Reviewer, n.Meta.ReviewState = c.Author, payload.VerdictComment
		if inRound {
			// The author's review turn runs with its prompt read: its
			// summary will come after this comment, so the new round
			// starts here rather than at that summary.
			n.Meta.Extra = map[string]string{task.ExtraRoundFrom: strconv.FormatInt(c.ID, 10)}
		}
		var created bool
		if t, created, err = e.create(ctx, spawn{task: n, cause: build.Cause{At: c.CreatedAt}}); err != nil || !created {
			return err
		}
	}
	deferred, err := e.tx.DeferPending(ctx, t.ID, e.m.cfg.QuietPeriod)
	if err != nil {
		return err
	}
	if !deferred {
		// Its turn started before this comment and read its round already:
		// the turn's report starts the next round here (nextRound).
		log.Info("loose comment arrived during the author's turn: the next round has it", "task_id", t.ID, "status", t.Status)
		if t.Meta.Extra[task.ExtraRoundNext] != "" {
			return nil // an earlier comment of this turn starts it
		}
		return e.tx.PatchTaskMeta(ctx, t.ID, task.Meta{Extra: map[string]string{task.ExtraRoundNext: strconv.FormatInt(c.ID, 10)}})
	}
	log.Debug("loose comment: the author's turn waits for quiet", "task_id", t.ID, "quiet", e.m.cfg.QuietPeriod.String())
	return nil
}

// awaitsOwnTurn reports whether a report must leave a task alone: a
// review_comment made while another turn of its author ran holds comments
// that turn never saw, so that turn's [Action Report] does not answer it.
func awaitsOwnTurn(t task.Task) bool {
	return t.ActionType == task.ActionReviewComment && t.Status == task.StatusPending && t.Meta.RoundFrom() > 0
}

// nextRound follows the report that finished a review_comment turn: the
// loose comments that came while it ran are the next turn's, from the
// first of them.
func (e *eventCtx) nextRound(ctx context.Context, done task.Task) error {
	from := done.Meta.Extra[task.ExtraRoundNext]
	if done.ActionType != task.ActionReviewComment || from == "" || done.PRNumber == 0 {
		return nil
	}
	pr, err := e.tx.PullRequest(ctx, done.Repo, done.PRNumber)
	if err != nil {
		return err
	}
	if pr.State != task.StateOpen {
		return nil
	}
	n := e.prTask(ctx, pr, task.ActionReviewComment, done.Agent)
	n.Meta.Reviewer, n.Meta.ReviewState = done.Meta.Reviewer, payload.VerdictComment
	n.Meta.Extra = map[string]string{task.ExtraRoundFrom: from}
	_, _, err = e.create(ctx, spawn{task: n, cause: build.Cause{At: e.ev.Comment.CreatedAt}})
	return err
}
