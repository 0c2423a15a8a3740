package rules

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/gitea/payload"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/repository/task/build"
	"github.com/moziplus/mozi/webhook/rules/conventions"
)

// syncPullRequest folds the event's pull request into what mozi knows and
// returns the new state, whether the payload was not older than it, and the
// issues linked for the first time.
func (e *eventCtx) syncPullRequest(ctx context.Context) (task.PullRequest, bool, []string, error) {
	pp := e.ev.PullRequest
	known, err := e.tx.PullRequest(ctx, e.ev.Repo, pp.Number)
	exists := err == nil
	if err != nil && !errors.Is(err, task.ErrNotFound) {
		return task.PullRequest{}, false, nil, err
	}
	current := !exists || newer(pp.UpdatedAt, known.UpdatedAt) >= 0
	next := known
	if !exists {
		next = task.PullRequest{Repo: e.ev.Repo, Number: pp.Number}
	}
	if next.Author == "" {
		next.Author = pp.Author
	}
	var newLinks []string
	if current {
		next.Title, next.HeadRef, next.HeadSHA, next.BaseRef = pp.Title, pp.HeadRef, pp.HeadSHA, pp.BaseRef
		next.State, next.Merged, next.MergedBy = pp.State, pp.Merged, pp.MergedBy
		next.UpdatedAt, next.ClosedAt = pp.UpdatedAt, pp.ClosedAt
		if next.State == task.StateClosed && next.ClosedAt.IsZero() {
			next.ClosedAt = pp.UpdatedAt
		}
		var links []string
		for _, ref := range conventions.ClosingRefs(e.ev.Repo, pp.Title, pp.Body, pp.HeadRef) {
			links = append(links, ref.String())
		}
		// One order for every transaction that locks several linked issues.
		slices.Sort(links)
		newLinks, _ = diff(known.LinkedIssues, links)
		next.LinkedIssues = links
	}
	if err := e.tx.SavePullRequest(ctx, next); err != nil {
		return task.PullRequest{}, false, nil, err
	}
	return next, current, newLinks, nil
}

// enterPullRequest locks the event's pull request, folds the payload into
// what mozi knows, and moves newly linked issues' tasks to review, whatever
// the action (pull_request and review events).
func (e *eventCtx) enterPullRequest(ctx context.Context) (bool, error) {
	// The head's statuses are matched with the pull request under the
	// commit's lock, taken before the issue's (repository lock order).
	if err := e.tx.LockCommit(ctx, e.ev.Repo, e.ev.PullRequest.HeadSHA); err != nil {
		return false, err
	}
	if err := e.lock(ctx, e.ev.PullRequest.Number); err != nil {
		return false, err
	}
	pr, current, newLinks, err := e.syncPullRequest(ctx)
	if err != nil {
		return false, err
	}
	if pr.State == task.StateOpen {
		if err := e.linkIssues(ctx, pr, newLinks); err != nil {
			return false, err
		}
	}
	e.pr, e.current = pr, current
	return true, nil
}

// onPullOpened (opened, reopened) turns failures that arrived before the
// pull request named its head commit into ci_failure tasks.
func (e *eventCtx) onPullOpened(ctx context.Context) error {
	if e.current && e.pr.State == task.StateOpen {
		return e.matchKeptStatuses(ctx, e.pr)
	}
	return nil
}

// onPullPushed (synchronized): the author pushed, which answers a
// "changes requested" review; then as onPullOpened for the new head.
func (e *eventCtx) onPullPushed(ctx context.Context) error {
	if err := e.notePush(ctx); err != nil {
		return err
	}
	if err := e.onPushToPR(ctx, e.pr); err != nil {
		return err
	}
	if err := e.onNewHead(ctx, e.pr); err != nil {
		return err
	}
	return e.onPullOpened(ctx)
}

// onReviewRequestRemoved cancels the review_request task of the reviewer
// no longer asked.
func (e *eventCtx) onReviewRequestRemoved(ctx context.Context) error {
	ag, ok := e.agent(e.ev.RequestedReviewer)
	if !ok {
		return nil
	}
	return e.finishWhere(ctx, e.pr.Repo, e.pr.Number, task.EventCancel,
		repository.Change{Error: "review request removed"}, func(t task.Task) bool {
			return t.ActionType == task.ActionReviewRequest && strings.EqualFold(t.Agent, ag.Login)
		})
}

// onPullClosed applies a close (merged or not) unless a newer state of the
// pull request is known.
func (e *eventCtx) onPullClosed(ctx context.Context) error {
	if e.current {
		return e.onPullRequestClosed(ctx, e.pr)
	}
	return nil
}

// linkIssues moves the linked issues' tasks to review: the PR author's
// issue_assigned task, or the only one there is.
func (e *eventCtx) linkIssues(ctx context.Context, pr task.PullRequest, refs []string) error {
	for _, s := range refs {
		assigned, err := e.assignedTasksOf(ctx, pr, s)
		if err != nil {
			return err
		}
		idx := slices.IndexFunc(assigned, func(t task.Task) bool { return strings.EqualFold(t.Agent, pr.Author) })
		switch {
		case idx >= 0:
			assigned = assigned[idx : idx+1]
		case len(assigned) != 1:
			e.log.Info("pull request links an issue without a task of its author", "pr", pr.Number, "linked", s)
			continue
		}
		if err := e.apply(ctx, assigned[0], task.EventOpenReview, repository.Change{PRNumber: pr.Number}); err != nil {
			return err
		}
	}
	return nil
}

// onPushToPR: the author pushed, which answers a "changes requested"
// review; each reviewer who asked for changes gets a review_updated task.
func (e *eventCtx) onPushToPR(ctx context.Context, pr task.PullRequest) error {
	if err := e.finishWhere(ctx, pr.Repo, pr.Number, task.EventComplete, repository.Change{},
		func(t task.Task) bool {
			return t.ActionType == task.ActionReviewResult && t.Meta.ReviewState == payload.VerdictRejected &&
				strings.EqualFold(t.Agent, pr.Author)
		}); err != nil {
		return err
	}
	for _, reviewer := range pr.ChangesRequestedBy {
		ag, ok := e.agent(reviewer)
		if !ok || strings.EqualFold(reviewer, pr.Author) {
			continue
		}
		asked, err := e.reviewPending(ctx, pr, ag.Login)
		if err != nil {
			return err
		}
		if asked {
			continue
		}
		n := e.prTask(ctx, pr, task.ActionReviewUpdated, ag.Login)
		n.Meta.HeadSHA = pr.HeadSHA
		if _, _, err := e.create(ctx, spawn{task: n, cause: build.Cause{At: e.ev.PullRequest.UpdatedAt}}); err != nil {
			return err
		}
	}
	return nil
}

// onReviewRequested gives the requested reviewer, when an agent other
// than the author, a review_request task.
func (e *eventCtx) onReviewRequested(ctx context.Context) error {
	pr := e.pr
	ag, ok := e.agent(e.ev.RequestedReviewer)
	if !ok || strings.EqualFold(ag.Login, pr.Author) {
		return nil
	}
	if asked, err := e.reviewPending(ctx, pr, ag.Login); err != nil || asked {
		return err
	}
	n := e.prTask(ctx, pr, task.ActionReviewRequest, ag.Login)
	if _, _, err := e.create(ctx, spawn{task: n, cause: build.Cause{At: e.ev.PullRequest.UpdatedAt}}); err != nil {
		return err
	}
	return e.gateReviewers(ctx, pr)
}

// onPullRequestClosed: merged finishes the linked issues' tasks and the
// PR's own work and notifies the author; closed unmerged cancels the PR's
// work and sends the linked tasks back to working.
func (e *eventCtx) onPullRequestClosed(ctx context.Context, pr task.PullRequest) error {
	notification := func(t task.Task) bool { return !t.ActionType.Notification() }
	if !pr.Merged {
		if err := e.finishWhere(ctx, pr.Repo, pr.Number, task.EventCancel,
			repository.Change{Error: "pull request closed without merge"}, notification); err != nil {
			return err
		}
		return e.forLinkedTasks(ctx, pr, func(t task.Task) error {
			if t.Status != task.StatusReview || t.PRNumber != pr.Number {
				return nil
			}
			return e.apply(ctx, t, task.EventRequestChanges, repository.Change{})
		})
	}
	if err := e.forLinkedTasks(ctx, pr, func(t task.Task) error {
		return e.apply(ctx, t, task.EventComplete, repository.Change{})
	}); err != nil {
		return err
	}
	if err := e.finishWhere(ctx, pr.Repo, pr.Number, task.EventComplete, repository.Change{}, notification); err != nil {
		return err
	}
	if err := e.recordOutcome(ctx, pr); err != nil {
		return err
	}
	ag, ok := e.agent(pr.Author)
	if !ok || strings.EqualFold(pr.MergedBy, pr.Author) || pr.MergedBy == "" && strings.EqualFold(e.ev.Sender, pr.Author) {
		return nil
	}
	n := e.prTask(ctx, pr, task.ActionReviewMerged, ag.Login)
	n.Meta.Sender = pr.MergedBy
	n.DedupeKey = task.MergedKey(pr.Number)
	_, _, err := e.create(ctx, spawn{task: n, cause: build.Cause{Notification: true}})
	return err
}

// forLinkedTasks runs fn on the live issue_assigned tasks of the issues the
// pull request links.
func (e *eventCtx) forLinkedTasks(ctx context.Context, pr task.PullRequest, fn func(task.Task) error) error {
	for _, s := range pr.LinkedIssues {
		tasks, err := e.assignedTasksOf(ctx, pr, s)
		if err != nil {
			return err
		}
		for _, t := range tasks {
			if err := fn(t); err != nil {
				return err
			}
		}
	}
	return nil
}

// assignedTasksOf returns the live issue_assigned tasks of an issue the pull
// request links (owner/name#N; nothing when it does not parse), locking the
// issue first: the issue's own deliveries and this one take its tasks in
// turn. Links are taken in the order the pull request lists them, sorted
// (linkedRefs), after the pull request itself.
func (e *eventCtx) assignedTasksOf(ctx context.Context, pr task.PullRequest, link string) ([]task.Task, error) {
	ref, ok := conventions.ParseIssueRef(link)
	if !ok {
		return nil, nil
	}
	if ref.Repo != pr.Repo || ref.Number != pr.Number {
		if err := e.tx.LockIssue(ctx, ref.Repo, ref.Number); err != nil {
			return nil, err
		}
	}
	tasks, err := e.tx.LiveTasks(ctx, ref.Repo, ref.Number)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(tasks, func(t task.Task) bool { return t.ActionType != task.ActionIssueAssigned }), nil
}

// prTask is a task about a pull request; its priority and labels come from
// the first linked issue mozi knows.
func (e *eventCtx) prTask(ctx context.Context, pr task.PullRequest, action task.ActionType, agent string) repository.NewTask {
	n := build.FromPull(pr, action, agent)
	if pp := e.ev.PullRequest; pp != nil && pp.Number == pr.Number {
		n.IssueBody, n.IssueUpdatedAt = clip(pp.Body, 256<<10), pp.UpdatedAt
	}
	for _, s := range pr.LinkedIssues {
		ref, ok := conventions.ParseIssueRef(s)
		if !ok || ref.Repo != pr.Repo {
			continue
		}
		n.Meta.LinkedIssue = ref.Number
		if issue, err := e.tx.Issue(ctx, ref.Repo, ref.Number); err == nil {
			n.Priority = priority(issue.Labels)
			n.Meta.Labels = issue.Labels
		}
		break
	}
	return n
}

// onReview handles a submitted review: it answers the reviewer's request,
// and the verdict gives the PR author work.
func (e *eventCtx) onReview(ctx context.Context) error {
	pp, pr := e.ev.PullRequest, e.pr
	reviewer, verdict := e.ev.Sender, e.ev.Review.Verdict
	if err := e.finishWhere(ctx, pr.Repo, pr.Number, task.EventComplete, repository.Change{},
		func(t task.Task) bool {
			return (t.ActionType == task.ActionReviewRequest || t.ActionType == task.ActionReviewUpdated) &&
				strings.EqualFold(t.Agent, reviewer)
		}); err != nil {
		return err
	}
	if verdict != payload.VerdictComment {
		before := slices.Clone(pr.ChangesRequestedBy)
		pr.ChangesRequestedBy = slices.DeleteFunc(pr.ChangesRequestedBy, func(s string) bool { return strings.EqualFold(s, reviewer) })
		if verdict == payload.VerdictRejected {
			pr.ChangesRequestedBy = append(pr.ChangesRequestedBy, reviewer)
		}
		if !slices.Equal(before, pr.ChangesRequestedBy) {
			if err := e.tx.SavePullRequest(ctx, pr); err != nil {
				return err
			}
		}
	}
	// The author's linked issue task: back to working on "changes
	// requested", back to review on approval.
	if err := e.forLinkedTasks(ctx, pr, func(t task.Task) error {
		if !strings.EqualFold(t.Agent, pr.Author) {
			return nil
		}
		switch verdict {
		case payload.VerdictRejected:
			return e.apply(ctx, t, task.EventRequestChanges, repository.Change{})
		case payload.VerdictApproved:
			if t.Status == task.StatusWorking && t.PRNumber == pr.Number {
				return e.apply(ctx, t, task.EventOpenReview, repository.Change{PRNumber: pr.Number})
			}
		}
		return nil
	}); err != nil {
		return err
	}
	ag, ok := e.agent(pr.Author)
	if !ok || strings.EqualFold(pr.Author, reviewer) {
		return nil
	}
	action := task.ActionReviewResult
	if verdict == payload.VerdictComment {
		action = task.ActionReviewComment
	}
	n := e.prTask(ctx, pr, action, ag.Login)
	n.Meta.ReviewState, n.Meta.ReviewBody, n.Meta.Reviewer = verdict, clip(e.ev.Review.Body, 16<<10), reviewer
	_, created, err := e.create(ctx, spawn{task: n, cause: build.Cause{At: pp.UpdatedAt}})
	if err != nil || created {
		return err
	}
	return e.updateLiveReview(ctx, pr, action, ag.Login, n.Meta)
}

// updateLiveReview records the latest verdict on the author's live review
// task when one is already waiting (the newest review is the one to act on).
func (e *eventCtx) updateLiveReview(ctx context.Context, pr task.PullRequest, action task.ActionType, agent string, m task.Meta) error {
	tasks, err := e.tx.LiveTasks(ctx, pr.Repo, pr.Number)
	if err != nil {
		return err
	}
	for _, t := range tasks {
		if t.ActionType == action && strings.EqualFold(t.Agent, agent) {
			return e.tx.PatchTaskMeta(ctx, t.ID, task.Meta{ReviewState: m.ReviewState, ReviewBody: m.ReviewBody,
				Reviewer: m.Reviewer, DeliveryID: e.delivery.ID})
		}
	}
	return nil
}
