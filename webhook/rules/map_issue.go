package rules

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/gitea/payload"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/repository/task/build"
	"github.com/moziplus/mozi/webhook/rules/conventions"
)

// issueSync is what enterIssue found: mozi's copy before the event (known,
// if it existed) and after it (next), and how the payload's updated_at
// compares with the known one's (order).
type issueSync struct {
	known, next task.Issue
	exists      bool
	order       int
}

// enterIssue folds an issues event into mozi's copy of the issue and its
// live tasks, whatever the action. Payloads are ordered by the issue's
// updated_at, so a late, older payload cannot undo a newer state. Events
// about the issue side of a pull request end here: the pull_request events
// describe pull requests.
func (e *eventCtx) enterIssue(ctx context.Context) (bool, error) {
	pi := e.ev.Issue
	if pi.IsPull {
		return false, nil
	}
	if err := e.lock(ctx, pi.Number); err != nil {
		return false, err
	}
	known, err := e.tx.Issue(ctx, e.ev.Repo, pi.Number)
	exists := err == nil
	if err != nil && !errors.Is(err, task.ErrNotFound) {
		return false, err
	}
	order := 1
	if exists {
		order = newer(pi.UpdatedAt, known.UpdatedAt)
	}
	next := mergeIssue(known, exists, e.ev, order)
	e.scheduleDiscussion(&next, !exists)
	if err := e.tx.SaveIssue(ctx, next); err != nil {
		return false, err
	}
	if order >= 0 && exists {
		if err := e.refreshTasks(ctx, next); err != nil {
			return false, err
		}
	}
	e.issue = issueSync{known: known, next: next, exists: exists, order: order}
	return true, nil
}

// onIssueReopened gives the assignees their work again, unless a newer
// state is known.
func (e *eventCtx) onIssueReopened(ctx context.Context) error {
	if e.issue.order > 0 {
		return e.assignAll(ctx, e.issue.next, e.issue.next.Assignees)
	}
	return nil
}

// onAssigneesChanged (opened, edited, assigned, unassigned, labels…) gives
// each new assignee that is an agent an issue_assigned task and cancels
// the task of each agent no longer assigned.
func (e *eventCtx) onAssigneesChanged(ctx context.Context) error {
	known, next := e.issue.known, e.issue.next
	added, removed := diff(known.Assignees, next.Assignees)
	if !e.issue.exists {
		added = next.Assignees
	}
	if err := e.assignAll(ctx, next, added); err != nil {
		return err
	}
	for _, login := range removed {
		ag, ok := e.agent(login)
		if !ok {
			continue
		}
		if err := e.finishWhere(ctx, e.ev.Repo, next.Number, task.EventCancel,
			repository.Change{Error: "unassigned from the issue"},
			func(t task.Task) bool {
				return t.ActionType == task.ActionIssueAssigned && strings.EqualFold(t.Agent, ag.Login)
			}); err != nil {
			return err
		}
	}
	return nil
}

// mergeIssue folds a payload into what mozi knows. order compares the
// payload's updated_at with the known one: newer replaces the state, equal
// (Gitea's timestamps have one-second resolution) merges assignees by the
// action, older only fills what is missing.
func mergeIssue(known task.Issue, exists bool, ev payload.Event, order int) task.Issue {
	pi := ev.Issue
	next := known
	if !exists {
		next = task.Issue{Repo: ev.Repo, Number: pi.Number}
	}
	if next.Author == "" {
		next.Author = pi.Author
	}
	if next.CreatedAt.IsZero() {
		next.CreatedAt = pi.CreatedAt
	}
	switch {
	case order > 0 || !exists:
		next.Title, next.Body, next.State = pi.Title, pi.Body, pi.State
		next.Labels, next.Assignees = pi.Labels, pi.Assignees
		next.UpdatedAt = pi.UpdatedAt
		next.ClosedAt = pi.ClosedAt
		if pi.State == task.StateClosed && ev.Action == payload.ActionClosed {
			next.ClosedBy = ev.Sender
		}
		if pi.State == task.StateClosed && next.ClosedAt.IsZero() {
			next.ClosedAt = pi.UpdatedAt
		}
		if pi.State == task.StateOpen {
			next.ClosedAt, next.ClosedBy = time.Time{}, ""
		}
	case order == 0:
		// Within one second the payload's action says what changed: an
		// issue closed in the second it was opened (or last edited) is
		// closed, not left open until a reconcile.
		switch ev.Action {
		case payload.ActionAssigned:
			next.Assignees = union(known.Assignees, pi.Assignees)
		case payload.ActionUnassigned:
			next.Assignees = intersect(known.Assignees, pi.Assignees)
		case payload.ActionClosed:
			if pi.State == task.StateClosed {
				next.State, next.ClosedBy = task.StateClosed, ev.Sender
				next.ClosedAt = cmp.Or(pi.ClosedAt, pi.UpdatedAt)
			}
		case payload.ActionReopened:
			if pi.State == task.StateOpen {
				next.State, next.ClosedAt, next.ClosedBy = task.StateOpen, time.Time{}, ""
			}
		}
	}
	next.ParentIssue = conventions.ParentIssue(next.Title, next.Body)
	// A sub-issue never waits for its parent: the parent is closed when its
	// sub-issues are, so its task would wait for ever (the recorded session
	// of testdata/ has such a "Depends: #1" under "Parent: #1").
	next.DependsOn = slices.DeleteFunc(conventions.DependsOn(next.Body), func(n int) bool { return n == next.ParentIssue })
	return next
}

// scheduleDiscussion marks an unassigned top-level issue for one discussion
// broadcast when it is opened, due after the grace period, or at once when
// it carries the discuss label. The ticker sends the broadcast if the issue
// is still unassigned then; an assignee arriving first clears the mark.
func (e *eventCtx) scheduleDiscussion(i *task.Issue, firstSight bool) {
	if !i.DiscussedAt.IsZero() || i.ParentIssue != 0 || i.IsPull {
		return
	}
	if len(i.Assignees) > 0 || i.Closed() {
		i.DiscussionDueAt = time.Time{}
		return
	}
	now := e.m.cfg.Now()
	if slices.ContainsFunc(i.Labels, func(l string) bool { return strings.EqualFold(l, e.m.cfg.DiscussLabel) }) {
		if i.DiscussionDueAt.IsZero() || i.DiscussionDueAt.After(now) {
			i.DiscussionDueAt = now
		}
		return
	}
	if i.DiscussionDueAt.IsZero() && (firstSight || e.ev.Action == payload.ActionOpened) {
		from := i.CreatedAt
		if from.IsZero() {
			from = now
		}
		i.DiscussionDueAt = from.Add(e.m.cfg.DiscussionGrace)
	}
}

// refreshTasks copies a changed issue's labels, body and links onto its
// live tasks.
func (e *eventCtx) refreshTasks(ctx context.Context, i task.Issue) error {
	return e.tx.RefreshLiveTasks(ctx, i.Repo, i.Number, repository.IssueFacts{
		BusinessType: e.m.cfg.Route(i.Labels),
		Priority:     priority(i.Labels),
		ParentIssue:  i.ParentIssue,
		DependsOn:    i.DependsOn,
		Body:         i.Body,
		UpdatedAt:    i.UpdatedAt,
		Title:        i.Title,
		Labels:       i.Labels,
	})
}

// assignAll gives each registered agent among logins an issue_assigned task.
func (e *eventCtx) assignAll(ctx context.Context, i task.Issue, logins []string) error {
	for _, login := range logins {
		ag, ok := e.agent(login)
		if !ok {
			continue
		}
		if _, _, err := e.create(ctx, spawn{cause: build.Cause{At: e.ev.Issue.UpdatedAt}, task: e.issueTask(i,
			task.ActionIssueAssigned, ag.Login)}); err != nil {
			return err
		}
	}
	return nil
}

func (e *eventCtx) issueTask(i task.Issue, action task.ActionType, agent string) repository.NewTask {
	n := build.FromIssue(i, action, agent)
	if action == task.ActionIssueAssigned {
		n.BusinessType = e.m.cfg.Route(i.Labels)
	}
	return n
}

// onIssueClosed finishes the issue's work, wakes the tasks that waited
// for it, and notifies its creator.
func (e *eventCtx) onIssueClosed(ctx context.Context) error {
	i := e.issue.next
	if e.issue.order >= 0 && i.Closed() {
		if err := e.finishWhere(ctx, i.Repo, i.Number, task.EventComplete, repository.Change{},
			func(t task.Task) bool { return !t.ActionType.Notification() }); err != nil {
			return err
		}
		if err := e.tx.WakeDependents(ctx, i.Repo, i.Number); err != nil {
			return err
		}
	}
	creator, closer := e.ev.Issue.Author, e.ev.Sender
	ag, registered := e.agent(creator)
	// No closer means mozi found the close itself (reconcile): it cannot
	// tell whether the creator closed it, so it does not notify.
	if !registered || closer == "" || strings.EqualFold(creator, closer) {
		return nil
	}
	n := e.issueTask(i, task.ActionIssueClosed, ag.Login)
	n.Meta.Sender = closer
	n.DedupeKey = task.ClosedKey(i.Number, e.ev.Issue.UpdatedAt)
	_, _, err := e.create(ctx, spawn{task: n, cause: build.Cause{Notification: true}})
	return err
}

// diff returns the logins in next but not in prev, and in prev but not in
// next, case-insensitively.
func diff(prev, next []string) (added, removed []string) {
	has := func(list []string, s string) bool {
		return slices.ContainsFunc(list, func(x string) bool { return strings.EqualFold(x, s) })
	}
	for _, n := range next {
		if !has(prev, n) {
			added = append(added, n)
		}
	}
	for _, p := range prev {
		if !has(next, p) {
			removed = append(removed, p)
		}
	}
	return added, removed
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	added, _ := diff(a, b)
	return append(out, added...)
}

func intersect(a, b []string) []string {
	var out []string
	for _, x := range a {
		if slices.ContainsFunc(b, func(y string) bool { return strings.EqualFold(x, y) }) {
			out = append(out, x)
		}
	}
	return out
}
