package ticker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/moziplus/mozi/repository/gitea"
	"github.com/moziplus/mozi/repository/gitea/payload"
	"github.com/moziplus/mozi/repository/task"
)

// Catch-up bounds: how much of one repository one pass reads, and how far
// before the mark it looks again (Gitea's timestamps have one-second
// resolution, and an update may land while the previous pass read).
const (
	catchUpIssues   = 200
	catchUpPulls    = 100
	catchUpComments = 500
	catchUpOverlap  = time.Minute
)

// catchUp finds what happened in Gitea while no mozi listened — Gitea
// does not deliver a webhook again once it failed — and feeds it through
// the inbox as the deliveries it missed: issues whose assignees changed,
// pull requests opened, review requests to agents, comments (mentions,
// [Action Report]s). Everything is compared with mozi's own copy first, or
// recognised by its effect key in the inbox, so what did arrive is not
// repeated. A
// repository is read from the first time the catch-up meets it: what
// happened before mozi knew it is not replayed.
func (t *Ticker) catchUp(ctx context.Context) (int, error) {
	if t.gitea == nil {
		return 0, nil
	}
	marks, err := t.store.CatchUpMarks(ctx, t.cfg.Repos)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, m := range marks {
		started := t.cfg.Now()
		if m.At.IsZero() {
			if err := t.store.MarkCaughtUp(ctx, m.Repo, started); err != nil {
				return n, err
			}
			continue
		}
		found, complete, err := t.catchUpRepo(ctx, m.Repo, m.At.Add(-catchUpOverlap))
		n += found
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return n, err
			}
			// Gitea down: the mark stays, the next pass reads from it.
			t.cfg.Logger.Warn("catch-up skipped a repository", "repo", m.Repo, "error", err)
			continue
		}
		if !complete {
			t.cfg.Logger.Warn("catch-up read only part of what changed; the rest follows in the next passes", "repo", m.Repo,
				"since", m.At.UTC().Format(time.RFC3339))
			continue
		}
		if err := t.store.MarkCaughtUp(ctx, m.Repo, started); err != nil {
			return n, err
		}
	}
	return n, nil
}

// catchUpRepo injects what one repository's changes since since missed.
// complete is false when there was more than one pass reads.
func (t *Ticker) catchUpRepo(ctx context.Context, repo string, since time.Time) (found int, complete bool, err error) {
	issues, err := t.gitea.OpenIssuesSince(ctx, repo, since, catchUpIssues)
	if err != nil {
		return 0, false, err
	}
	for _, issue := range issues {
		injected, err := t.catchUpIssue(ctx, issue)
		if err != nil {
			return found, false, err
		}
		if injected {
			found++
		}
	}
	pulls, err := t.gitea.OpenPullRequestsSince(ctx, repo, since, catchUpPulls)
	if err != nil {
		return found, false, err
	}
	for _, pr := range pulls {
		injected, err := t.catchUpPull(ctx, pr)
		if err != nil {
			return found, false, err
		}
		found += injected
	}
	comments, err := t.gitea.CommentsSince(ctx, repo, since, catchUpComments)
	if err != nil {
		return found, false, err
	}
	for _, c := range comments {
		injected, err := t.catchUpComment(ctx, repo, c)
		if err != nil {
			return found, false, err
		}
		if injected {
			found++
		}
	}
	return found, len(issues) < catchUpIssues && len(pulls) < catchUpPulls && len(comments) < catchUpComments, nil
}

// catchUpComment feeds a comment whose webhook mozi never applied through
// the rules as created: the same event to them as the webhook (its effect
// key), so it has its effect once whichever way it came.
func (t *Ticker) catchUpComment(ctx context.Context, repo string, c gitea.IssueComment) (bool, error) {
	body, err := payload.CommentCreatedBody(repo, c.Issue, c.IsPull, c.Comment)
	if err != nil {
		return false, err
	}
	ev, err := payload.Parse(payload.KindIssueComment, body)
	if err != nil {
		return false, fmt.Errorf("catch-up comment %d: %w", c.ID, err)
	}
	if applied, err := t.store.EffectApplied(ctx, ev.SemanticKey()); err != nil || applied {
		return false, err
	}
	return t.inject(ctx, fmt.Sprintf("catch-up:%s#%d:comment:%d:%d", repo, c.Issue, c.ID, c.UpdatedAt.Unix()),
		"issue_comment", payload.ActionCreated, repo, body)
}

// catchUpIssue feeds an issue newer than mozi's copy through the rules as
// an edit (opened when mozi never saw it): its assignees are compared with
// the copy's, so an assignment made while mozi was down becomes a task.
func (t *Ticker) catchUpIssue(ctx context.Context, issue task.Issue) (bool, error) {
	cached, err := t.store.Issue(ctx, issue.Repo, issue.Number)
	known := err == nil
	if err != nil && !errors.Is(err, task.ErrNotFound) {
		return false, err
	}
	// Gitea's timestamps have one-second resolution; the copy's may carry
	// less or more precision than the API's.
	if known && !issue.UpdatedAt.Truncate(time.Second).After(cached.UpdatedAt.Truncate(time.Second)) {
		return false, nil
	}
	action := payload.ActionEdited
	if !known {
		action = payload.ActionOpened
	}
	body, err := payload.IssueEventBody(action, issue)
	if err != nil {
		return false, err
	}
	return t.inject(ctx, fmt.Sprintf("catch-up:%s#%d:%s:%d", issue.Repo, issue.Number, action, issue.UpdatedAt.Unix()),
		"issues", action, issue.Repo, body)
}

// catchUpPull feeds a pull request mozi never saw through the rules as
// opened, and asks each agent it requests a review from that has no
// review task on it yet.
func (t *Ticker) catchUpPull(ctx context.Context, pr task.PullRequest) (int, error) {
	n := 0
	_, err := t.store.PullRequest(ctx, pr.Repo, pr.Number)
	switch {
	case errors.Is(err, task.ErrNotFound):
		body, err := payload.PullOpenedBody(pr)
		if err != nil {
			return n, err
		}
		injected, err := t.inject(ctx, fmt.Sprintf("catch-up:%s#%d:opened", pr.Repo, pr.Number),
			"pull_request", payload.ActionOpened, pr.Repo, body)
		if err != nil {
			return n, err
		}
		if injected {
			n++
		}
	case err != nil:
		return n, err
	}
	// A pull request's requested_reviewers lists every reviewer's latest
	// review, approvals and comments too (Gitea 1.25): only a review whose
	// latest state is a request is still asked for.
	pending, err := t.gitea.PendingReviewRequests(ctx, pr.Repo, pr.Number)
	if err != nil {
		return n, err
	}
	for _, reviewer := range pending {
		if !slices.ContainsFunc(t.cfg.Agents, func(a string) bool { return strings.EqualFold(a, reviewer) }) {
			continue
		}
		asked, err := t.store.HasTask(ctx, pr.Repo, pr.Number, task.ActionReviewRequest, reviewer)
		if err != nil {
			return n, err
		}
		if asked {
			continue // a re-request made while mozi was down is not told from this one
		}
		body, err := payload.ReviewRequestedBody(pr, reviewer)
		if err != nil {
			return n, err
		}
		injected, err := t.inject(ctx, fmt.Sprintf("catch-up:%s#%d:review_requested:%s:%d", pr.Repo, pr.Number,
			strings.ToLower(reviewer), pr.UpdatedAt.Unix()), "pull_request", payload.ActionReviewRequested, pr.Repo, body)
		if err != nil {
			return n, err
		}
		if injected {
			n++
		}
	}
	return n, nil
}
