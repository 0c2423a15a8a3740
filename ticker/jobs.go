package ticker

import (
	"context"
	"errors"
	"fmt"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/gitea/payload"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/repository/task/build"
)

// rescue returns tasks whose runner died to pending, each once: their
// lease expired and their runner has not beaten for twice the runner TTL
// (a runner cut off from the database stops its agents after one TTL and
// gives them their kill grace: a rescue must not start a second writer
// meanwhile). Right after the database came back nothing is rescued for a
// runner TTL: every runner's beat is old then, the dead and the live alike.
func (t *Ticker) rescue(ctx context.Context) (int, error) {
	if t.cfg.DatabaseUpFor != nil && t.cfg.DatabaseUpFor() < t.cfg.RunnerTTL {
		return 0, nil
	}
	tasks, err := t.store.RescueExpired(ctx, 2*t.cfg.RunnerTTL)
	for _, tk := range tasks {
		t.cfg.Logger.Warn("task rescued: its runner stopped renewing the lease", "task_id", tk.ID,
			"repo", tk.Repo, "issue", tk.IssueNumber, "agent", tk.Agent)
		t.cfg.Metrics.rescues.Inc()
	}
	if len(tasks) > 0 {
		t.cfg.WakeDispatcher()
	}
	return len(tasks), err
}

// inject feeds a delivery of Gitea's shape through the inbox.
func (t *Ticker) inject(ctx context.Context, id, event, action, repo string, body []byte) (bool, error) {
	inserted, err := t.store.InsertDelivery(ctx, repository.Delivery{ID: id, Event: event, EventType: event,
		Action: action, Repo: repo, Body: body, Headers: map[string]string{"X-Mozi-Synthesized": "ticker"}})
	if err != nil {
		return false, err
	}
	if inserted {
		t.cfg.WakeInbox()
	}
	return inserted, nil
}

// reconcile re-reads from Gitea the issues and pull requests that live
// tasks wait on and whose copy is old, and feeds what webhooks missed (a
// close, a merge, an edit) through the inbox.
func (t *Ticker) reconcile(ctx context.Context) (int, error) {
	if t.gitea == nil {
		return 0, nil
	}
	refs, err := t.store.StaleLiveIssues(ctx, t.cfg.ReconcileAge, 50)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, ref := range refs {
		changed, err := t.reconcileOne(ctx, ref)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return n, err
			}
			// Gitea down or the issue gone: the next pass tries again.
			t.cfg.Logger.Warn("reconcile skipped an issue", "repo", ref.Repo, "issue", ref.Number, "error", err)
			continue
		}
		if changed {
			n++
		}
		if err := t.store.TouchIssue(ctx, ref); err != nil {
			return n, err
		}
	}
	return n, nil
}

func (t *Ticker) reconcileOne(ctx context.Context, ref repository.IssueRef) (bool, error) {
	if ref.IsPull {
		pr, err := t.gitea.FetchPullRequest(ctx, ref.Repo, ref.Number)
		if err != nil {
			return false, err
		}
		if pr.State != task.StateClosed {
			return false, nil
		}
		body, err := payload.PullClosedBody(pr)
		if err != nil {
			return false, err
		}
		return t.inject(ctx, fmt.Sprintf("reconcile:%s#%d:closed:%d", ref.Repo, ref.Number, pr.UpdatedAt.Unix()),
			"pull_request", payload.ActionClosed, ref.Repo, body)
	}
	issue, err := t.gitea.FetchIssue(ctx, ref.Repo, ref.Number)
	if err != nil {
		return false, err
	}
	cached, err := t.store.Issue(ctx, ref.Repo, ref.Number)
	known := err == nil
	if err != nil && !errors.Is(err, task.ErrNotFound) {
		return false, err
	}
	if known && !issue.UpdatedAt.After(cached.UpdatedAt) {
		return false, nil
	}
	action := payload.ActionEdited
	switch {
	case issue.Closed() && (!known || !cached.Closed()):
		action = payload.ActionClosed
	case !issue.Closed() && known && cached.Closed():
		action = payload.ActionReopened
	}
	body, err := payload.IssueEventBody(action, issue)
	if err != nil {
		return false, err
	}
	return t.inject(ctx, fmt.Sprintf("reconcile:%s#%d:%s:%d", ref.Repo, ref.Number, action, issue.UpdatedAt.Unix()),
		"issues", action, ref.Repo, body)
}

// statuses polls the commit statuses of open pull requests that live tasks
// wait on: a lost status webhook must neither hide a CI failure nor keep
// the reviewers held for CI after the head went green. It feeds every
// failing status, and any other whose state mozi has not recorded for its
// context on that head.
func (t *Ticker) statuses(ctx context.Context) (int, error) {
	if t.gitea == nil {
		return 0, nil
	}
	prs, err := t.store.OpenPullRequestsInReview(ctx, 50)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, pr := range prs {
		statuses, err := t.gitea.FetchStatuses(ctx, pr.Repo, pr.HeadSHA)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return n, err
			}
			t.cfg.Logger.Warn("status poll skipped a pull request", "repo", pr.Repo, "pr", pr.Number, "error", err)
			continue
		}
		known, err := t.store.HeadStatuses(ctx, pr.Repo, pr.HeadSHA)
		if err != nil {
			return n, err
		}
		recorded := make(map[string]string, len(known))
		for _, k := range known {
			recorded[k.Context] = k.State
		}
		for _, s := range statuses {
			if s.State != "failure" && s.State != "error" && recorded[s.Context] == s.State {
				continue
			}
			body, err := payload.StatusBody(s)
			if err != nil {
				return n, err
			}
			inserted, err := t.inject(ctx, fmt.Sprintf("poll:%s:%d", pr.Repo, s.ID), "status", "", pr.Repo, body)
			if err != nil {
				return n, err
			}
			if inserted {
				n++
			}
		}
	}
	return n, nil
}

// mentions turns mentions still queued after MentionsAge into tasks (the
// mapper normally does it at once).
func (t *Ticker) mentions(ctx context.Context) (int, error) {
	queued, err := t.store.UnconsumedMentions(ctx, t.cfg.MentionsAge, 100)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, m := range queued {
		var made build.Outcomes
		err := t.store.InTx(ctx, func(tx *repository.Tx) error {
			made = build.Outcomes{}
			if err := tx.LockIssue(ctx, m.Repo, m.IssueNumber); err != nil {
				return err
			}
			issue, err := tx.Issue(ctx, m.Repo, m.IssueNumber)
			if err != nil && !errors.Is(err, task.ErrNotFound) {
				return err
			}
			if err != nil {
				issue = task.Issue{Repo: m.Repo, Number: m.IssueNumber} // not copied yet: the run reads Gitea
			}
			nt := build.FromIssue(issue, task.ActionMention, m.Mentioned)
			nt.HopCount = m.HopCount
			nt.Meta.Sender, nt.Meta.CommentID, nt.Meta.Event = m.Author, m.CommentID, "ticker/mentions"
			created, refused, err := t.cfg.Tasks.Create(ctx, tx, &made, nt, build.Cause{At: m.CreatedAt})
			if err != nil {
				return err
			}
			outcome := "skipped"
			if refused == "" {
				outcome = "task"
			}
			return tx.ConsumeMention(ctx, m.ID, created.ID, outcome)
		})
		if err != nil {
			return n, err
		}
		n += made.Created()
		t.report(made)
	}
	if n > 0 {
		t.cfg.WakeDispatcher()
	}
	return n, nil
}

// report logs the refusals and tells the observer, once the transaction
// that tried the creations committed (a retried transaction starts new
// outcomes), so nothing is counted twice or for a rollback.
func (t *Ticker) report(made build.Outcomes) {
	for _, r := range made.Refused() {
		if r.Why != repository.RefusedDuplicate {
			t.cfg.Logger.Warn("ticker task not created", "repo", r.Task.Repo, "issue", r.Task.IssueNumber,
				"action_type", r.Task.ActionType, "agent", r.Task.Agent, "reason", r.Why)
		}
	}
	t.cfg.Tasks.Report(made)
}

// rounds gives the lead one round_review task when every sub-issue of a
// parent issue is closed, once per set of sub-issues.
func (t *Ticker) rounds(ctx context.Context) (int, error) {
	due, err := t.store.DueRounds(ctx)
	if err != nil || len(due) == 0 {
		return 0, err
	}
	if t.cfg.Lead == "" {
		t.cfg.Logger.Warn("rounds are complete but no agent is the lead: declare one with lead: true", "rounds", len(due))
		return 0, nil
	}
	n := 0
	for _, r := range due {
		var made build.Outcomes
		err := t.store.InTx(ctx, func(tx *repository.Tx) error {
			made = build.Outcomes{}
			parent, err := tx.Issue(ctx, r.Repo, r.Parent)
			if err != nil && !errors.Is(err, task.ErrNotFound) {
				return err
			}
			if err != nil {
				parent = task.Issue{Repo: r.Repo, Number: r.Parent}
			}
			nt := build.FromIssue(parent, task.ActionRoundReview, t.cfg.Lead)
			nt.DedupeKey = r.Key
			nt.Meta.Round, nt.Meta.Event = r.Round, "ticker/rounds"
			_, _, err = t.cfg.Tasks.Create(ctx, tx, &made, nt, build.Cause{})
			return err
		})
		if err != nil {
			return n, err
		}
		if made.Created() > 0 {
			n++
			t.cfg.Logger.Info("round complete: round review created", "repo", r.Repo, "issue", r.Parent,
				"round", r.Round, "agent", t.cfg.Lead)
		}
		t.report(made)
	}
	if n > 0 {
		t.cfg.WakeDispatcher()
	}
	return n, nil
}

// discussions broadcasts an unassigned top-level issue to every agent,
// once, when its grace period is over.
func (t *Ticker) discussions(ctx context.Context) (int, error) {
	due, err := t.store.DueDiscussions(ctx, 50)
	if err != nil || len(due) == 0 {
		return 0, err
	}
	n := 0
	for _, issue := range due {
		var made build.Outcomes
		err := t.store.InTx(ctx, func(tx *repository.Tx) error {
			made = build.Outcomes{}
			if err := tx.LockIssue(ctx, issue.Repo, issue.Number); err != nil {
				return err
			}
			marked, err := tx.MarkDiscussed(ctx, issue.Repo, issue.Number)
			if err != nil || !marked {
				return err
			}
			for _, agent := range t.cfg.Agents {
				nt := build.FromIssue(issue, task.ActionDiscussion, agent)
				nt.DedupeKey = task.DiscussionKey(issue.Number, agent)
				nt.Meta.Event = "ticker/discussions"
				if _, _, err := t.cfg.Tasks.Create(ctx, tx, &made, nt, build.Cause{}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return n, err
		}
		if made.Len() > 0 {
			t.cfg.Logger.Info("discussion broadcast", "repo", issue.Repo, "issue", issue.Number, "agents", made.Created())
		}
		n += made.Created()
		t.report(made)
	}
	if n > 0 {
		t.cfg.WakeDispatcher()
	}
	return n, nil
}

// orphans fails pending tasks of agents no longer declared.
func (t *Ticker) orphans(ctx context.Context) (int, error) {
	tasks, err := t.store.FailOrphans(ctx, t.cfg.Declared)
	for _, tk := range tasks {
		t.cfg.Logger.Warn("task failed: its agent is not declared any more", "task_id", tk.ID, "agent", tk.Agent)
	}
	return len(tasks), err
}

// prune deletes what is older than the retention.
func (t *Ticker) prune(ctx context.Context) (int, error) {
	r, err := t.store.Prune(ctx, t.cfg.Now().Add(-t.cfg.Retention))
	if err != nil {
		return 0, err
	}
	logs := removeLogs(r.LogPaths)
	total := int(r.Deliveries+r.Effects+r.Mentions+r.Statuses) + logs
	if total > 0 {
		t.cfg.Logger.Info("pruned old data", "deliveries", r.Deliveries, "effects", r.Effects,
			"mentions", r.Mentions, "statuses", r.Statuses, "logs", logs)
	}
	return total, nil
}

// missingText says what a stalled task's agent left undone, for logs and
// the failure comment.
var missingText = map[string]string{
	task.FollowUpPullRequest: "opening a pull request",
	task.FollowUpPullClosed:  "a merged pull request (its pull request was closed without merge)",
	task.FollowUpReport:      "posting its [Action Report]",
	task.FollowUpPush:        "pushing commits that answer the review",
	task.FollowUpReview:      "submitting a review",
}

// watchdog finds tasks whose agent's run ended without what moves them
// on and that stayed quiet for WatchdogQuiet: the first time, the agent
// runs once more with a prompt that says what is missing; when it is still
// missing after that, the task fails with one comment on the issue.
func (t *Ticker) watchdog(ctx context.Context) (int, error) {
	stalled, err := t.store.StalledTasks(ctx, t.cfg.WatchdogQuiet, 50)
	if err != nil {
		return 0, err
	}
	n, followed := 0, 0
	for _, st := range stalled {
		tk := st.Task
		log := t.cfg.Logger.With("task_id", tk.ID, "repo", tk.Repo, "issue", tk.IssueNumber, "agent", tk.Agent,
			"action_type", tk.ActionType, "missing", st.Missing)
		if tk.Meta.FollowUp != st.Missing {
			res, err := t.store.FollowUp(ctx, tk.ID, st.Missing)
			if err != nil {
				return n, err
			}
			if res.Applied {
				log.Warn("agent finished without " + missingText[st.Missing] + ": running it once more")
				t.cfg.Metrics.stalled.WithLabelValues("follow_up").Inc()
				n, followed = n+1, followed+1
			}
			continue
		}
		why := fmt.Sprintf("the agent's runs ended without %s, also after a follow-up", missingText[st.Missing])
		res, err := t.store.FailStalled(ctx, tk.ID, t.cfg.WatchdogQuiet, why, t.cfg.Notices.TaskFailed(tk, why))
		if err != nil {
			return n, err
		}
		if res.Applied {
			log.Error("task failed: " + why)
			t.cfg.Metrics.stalled.WithLabelValues("fail").Inc()
			n++
		}
	}
	if followed > 0 {
		t.cfg.WakeDispatcher()
	}
	return n, nil
}
