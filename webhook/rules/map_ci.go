package rules

import (
	"context"
	"strings"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/spawner/notice"
)

// gateReviewers holds the pull request's reviewer tasks that have not
// started while its head is red or pending, and releases them once every
// status of the head is green. A head without statuses is green in a
// repository that never reported one (no CI), pending in one that did.
func (e *eventCtx) gateReviewers(ctx context.Context, pr task.PullRequest) error {
	if pr.State != task.StateOpen || pr.HeadSHA == "" {
		return nil
	}
	state, _, err := e.headState(ctx, pr)
	if err != nil {
		return err
	}
	var n int
	if state == repository.CIGreen {
		if err := e.endRedWaits(ctx, pr); err != nil {
			return err
		}
		n, err = e.tx.ReleaseReviewers(ctx, pr.Repo, pr.Number)
	} else {
		n, err = e.tx.HoldReviewers(ctx, pr.Repo, pr.Number)
	}
	if err == nil && n > 0 {
		e.log.Info("reviewers follow the pull request's CI", "pr", pr.Number, "ci", state, "tasks", n)
	}
	return err
}

// endRedWaits moves the tasks that wait for a person because the pull
// request stayed red back to review once its head is green: whoever made
// it green (a person's push, a rerun) answered what they waited for.
func (e *eventCtx) endRedWaits(ctx context.Context, pr task.PullRequest) error {
	return e.forLinkedTasks(ctx, pr, func(t task.Task) error {
		if t.Status != task.StatusWaiting || t.WaitReason != task.WaitCIRed {
			return nil
		}
		return e.apply(ctx, t, task.EventGreen, repository.Change{})
	})
}

// headState is CIState of the pull request's current head.
func (e *eventCtx) headState(ctx context.Context, pr task.PullRequest) (string, []task.CommitStatus, error) {
	statuses, err := e.tx.HeadStatuses(ctx, pr.Repo, pr.HeadSHA)
	if err != nil {
		return "", nil, err
	}
	if len(statuses) == 0 {
		ci, err := e.tx.RepoHasStatuses(ctx, pr.Repo)
		if err != nil || !ci {
			return repository.CIGreen, nil, err
		}
		return repository.CIPending, nil, nil
	}
	state, red := repository.CIState(statuses)
	return state, red, nil
}

// onNewHead: the pull request's head moved, so repairs of an older head
// that have not started are moot, and the reviewers wait for the new
// head's CI.
func (e *eventCtx) onNewHead(ctx context.Context, pr task.PullRequest) error {
	if !e.current || pr.HeadSHA == "" {
		return nil
	}
	n, err := e.tx.CancelStaleRepairs(ctx, pr.Repo, pr.Number, pr.HeadSHA)
	if err != nil {
		return err
	}
	if n > 0 {
		e.log.Info("repair rounds of an older head cancelled", "pr", pr.Number, "tasks", n)
	}
	return e.gateReviewers(ctx, pr)
}

// stillRed: the pull request had its repair rounds and is red again. The
// author's task of the issue it closes waits for a person, with one
// comment saying what is still red.
func (e *eventCtx) stillRed(ctx context.Context, pr task.PullRequest, author string, rounds int) error {
	_, red, err := e.headState(ctx, pr)
	if err != nil {
		return err
	}
	waited := false
	err = e.forLinkedTasks(ctx, pr, func(t task.Task) error {
		if !strings.EqualFold(t.Agent, author) || (t.Status != task.StatusReview && t.Status != task.StatusWorking) {
			return nil
		}
		waited = true
		body := notice.CIRed(t, pr.Number, rounds, red)
		return e.waitForPerson(ctx, t, task.WaitCIRed, notice.RedSummary(red), body)
	})
	if err == nil && !waited {
		e.log.Info("CI still red after the last repair round, and no task of the author's waits on the pull request",
			"pr", pr.Number, "rounds", rounds)
	}
	return err
}
