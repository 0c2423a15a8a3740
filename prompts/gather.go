package prompts

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/moziplus/mozi/repository/task"
)

// IssueSource is where Gather reads issues (gitea.IssueReader: mozi's
// cache first, Gitea on a miss).
type IssueSource interface {
	Issue(ctx context.Context, repo string, number int) (task.Issue, error)
	LatestReport(ctx context.Context, repo string, number int) (string, error)
	BlockedBy(ctx context.Context, repo string, number int) ([]int, error)
	SubIssues(ctx context.Context, repo string, parent int) ([]task.Issue, error)
}

// Bounds of the context gathered for one prompt.
const (
	MaxPrior     = 6
	MaxSubIssues = 30
)

// Gather resolves a task into the Input a prompt is built from: the issue
// (from the task's cached copy when the source cannot tell), the issues it
// builds on and, for a round review, the parent's sub-issues. A related
// issue the source cannot read is left out rather than failing the prompt.
func Gather(ctx context.Context, src IssueSource, t task.Task, agent Agent, giteaURL, lead string) (*Input, error) {
	in := &Input{Task: t, Agent: agent, GiteaURL: giteaURL, Lead: lead}
	if t.IssueNumber > 0 {
		issue, err := src.Issue(ctx, t.Repo, t.IssueNumber)
		switch {
		case err == nil:
			in.Issue = issue
		case errors.Is(err, context.Canceled):
			return nil, err
		default:
			// The task's own copy, from the webhook that made it.
			in.Issue = task.Issue{Repo: t.Repo, Number: t.IssueNumber, Title: t.Meta.Title,
				Body: t.IssueBodyCache, Labels: t.Meta.Labels, Author: t.Meta.IssueAuthor}
		}
	}
	rel, err := relations(ctx, src, t)
	if err != nil {
		return nil, err
	}
	for _, r := range rel {
		if len(in.Prior) == MaxPrior {
			break
		}
		related, ok, err := readRelated(ctx, src, t.Repo, r.number, r.relation)
		if err != nil {
			return nil, err
		}
		if ok {
			in.Prior = append(in.Prior, related)
		}
	}
	if t.ActionType == task.ActionRoundReview {
		subs, err := src.SubIssues(ctx, t.Repo, t.IssueNumber)
		if err != nil {
			return nil, fmt.Errorf("sub-issues of %s#%d: %w", t.Repo, t.IssueNumber, err)
		}
		for _, sub := range subs[:min(len(subs), MaxSubIssues)] {
			report, err := src.LatestReport(ctx, t.Repo, sub.Number)
			if err != nil && errors.Is(err, context.Canceled) {
				return nil, err
			}
			in.SubIssues = append(in.SubIssues, Related{Number: sub.Number, Title: sub.Title,
				State: sub.State, Relation: "sub-issue", Report: report})
		}
	}
	return in, nil
}

type relation struct {
	number   int
	relation string
}

// relations lists the issues a task builds on, without repeats: its
// Depends: lines, its parent, and Gitea's native blocked-by.
func relations(ctx context.Context, src IssueSource, t task.Task) ([]relation, error) {
	var out []relation
	add := func(n int, rel string) {
		if n <= 0 || n == t.IssueNumber {
			return
		}
		if i := slices.IndexFunc(out, func(r relation) bool { return r.number == n }); i >= 0 {
			out[i].relation += ", " + rel
			return
		}
		out = append(out, relation{n, rel})
	}
	for _, d := range t.DependsOn {
		add(d, "depends")
	}
	add(t.ParentIssue, "parent")
	if t.IssueNumber > 0 {
		blocked, err := src.BlockedBy(ctx, t.Repo, t.IssueNumber)
		if errors.Is(err, context.Canceled) {
			return nil, err
		}
		for _, b := range blocked { // unreadable: left out
			add(b, "blocked by")
		}
	}
	return out, nil
}

func readRelated(ctx context.Context, src IssueSource, repo string, number int, rel string) (Related, bool, error) {
	issue, err := src.Issue(ctx, repo, number)
	if errors.Is(err, context.Canceled) {
		return Related{}, false, err
	}
	if err != nil {
		return Related{}, false, nil
	}
	report, err := src.LatestReport(ctx, repo, number)
	if errors.Is(err, context.Canceled) {
		return Related{}, false, err
	}
	return Related{Number: number, Title: issue.Title, State: issue.State, Relation: rel, Report: report}, true, nil
}
