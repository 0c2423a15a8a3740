package rules

import (
	"context"
	"errors"
	"time"

	"github.com/moziplus/mozi/repository/gitea/payload"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/repository/task/build"
)

// failing reports whether a commit status (or workflow run conclusion)
// means the commit is broken.
func failing(state string) bool {
	switch state {
	case "failure", "error", "timed_out", "startup_failure":
		return true
	}
	return false
}

// urgentPriority (P1) is for broken deployments and infrastructure: they
// block everyone.
const urgentPriority = 1

// onStatus handles a failing commit status: on an open PR's head it gives
// the PR author a ci_failure task (once per PR, head SHA and context); on
// another commit, deploy and infrastructure contexts go to the infra agent;
// anything else is kept until a PR names the commit.
func (e *eventCtx) onStatus(ctx context.Context) error {
	st := e.ev.Status
	// A push that makes this commit a pull request's head waits for this
	// status, or this status for it (LockCommit).
	if err := e.tx.LockCommit(ctx, e.ev.Repo, st.SHA); err != nil {
		return err
	}
	if e.ev.Kind == payload.KindStatus {
		if err := e.tx.SaveHeadStatus(ctx, *st); err != nil {
			return err
		}
	}
	pr, err := e.tx.OpenPullRequestByHead(ctx, e.ev.Repo, st.SHA)
	if err != nil && !errors.Is(err, task.ErrNotFound) {
		return err
	}
	if err == nil {
		if err := e.lock(ctx, pr.Number); err != nil {
			return err
		}
		if err := e.gateReviewers(ctx, pr); err != nil {
			return err
		}
		if !failing(st.State) {
			return nil
		}
		return e.ciFailure(ctx, pr, st.UpdatedAt, *st)
	}
	if !failing(st.State) {
		return nil
	}
	var action task.ActionType
	switch {
	case e.m.cfg.InfraContext.MatchString(st.Context):
		action = task.ActionInfrastructureFailure
	case e.m.cfg.DeployContext.MatchString(st.Context):
		action = task.ActionDeployFailure
	default:
		return e.tx.SaveUnmatchedStatus(ctx, *st)
	}
	infra, ok := e.m.cfg.Agents.Infra()
	if !ok {
		e.log.Warn("failure on a commit that no pull request explains, and no infra agent is configured",
			"sha", st.SHA, "context", st.Context)
		return nil
	}
	n := build.FromRepo(e.ev.Repo, action, infra, urgentPriority)
	n.DedupeKey = task.CommitFailureKey(st.SHA, st.Context)
	n.Meta = task.Meta{HeadSHA: st.SHA, StatusCtx: st.Context, StatusState: st.State,
		TargetURL: st.TargetURL, Title: st.Description}
	_, _, err = e.create(ctx, spawn{task: n, cause: build.Cause{At: st.UpdatedAt}})
	return err
}

// ciFailure gives the PR author one ci_failure task per (PR, SHA, context).
func (e *eventCtx) ciFailure(ctx context.Context, pr task.PullRequest, at time.Time, st task.CommitStatus) error {
	ag, ok := e.agent(pr.Author)
	if !ok {
		e.log.Info("CI failed on a pull request whose author is not an agent", "pr", pr.Number, "context", st.Context)
		return nil
	}
	rounds, err := e.tx.CIRounds(ctx, pr.Repo, pr.Number)
	if err != nil {
		return err
	}
	if rounds >= e.m.cfg.MaxRepairRounds {
		return e.stillRed(ctx, pr, ag.Login, rounds)
	}
	n := e.prTask(ctx, pr, task.ActionCIFailure, ag.Login)
	n.DedupeKey = task.CIFailureKey(pr.Number, st.SHA, st.Context)
	n.Meta.HeadSHA, n.Meta.StatusCtx, n.Meta.StatusState, n.Meta.TargetURL = st.SHA, st.Context, st.State, st.TargetURL
	n.Meta.StatusDesc, n.Meta.CIRound = clip(st.Description, 4<<10), rounds+1
	_, _, err = e.create(ctx, spawn{task: n, cause: build.Cause{At: at}})
	return err
}

// matchKeptStatuses turns failures that arrived before the PR named their
// commit into ci_failure tasks.
func (e *eventCtx) matchKeptStatuses(ctx context.Context, pr task.PullRequest) error {
	if pr.HeadSHA == "" {
		return nil
	}
	kept, err := e.tx.TakeUnmatchedStatuses(ctx, pr.Repo, pr.HeadSHA)
	if err != nil {
		return err
	}
	for _, st := range kept {
		if err := e.ciFailure(ctx, pr, e.ev.PullRequest.UpdatedAt, st); err != nil {
			return err
		}
	}
	return nil
}
