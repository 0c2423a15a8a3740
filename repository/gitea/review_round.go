package gitea

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	sdk "code.gitea.io/sdk/gitea"

	"github.com/moziplus/mozi/repository/task"
)

// Bounds of one review round read for a prompt: past them the oldest
// feedback is left out (the prompt's budget cuts further).
const (
	roundMaxReviews = 20
	roundMaxLoose   = 50
	// roundReadComments bounds the pull request's comments read to find
	// the author's last one: Gitea lists them oldest first.
	roundReadComments = 2000
)

// ReviewRound reads what people said on pull request number since agent,
// its author, last commented there: the reviews submitted after that
// (Gitea's review webhook carries no review id, so the round is found by
// time), each with its inline comments (path, line, diff hunk), and the
// loose comments (and those from q.FromComment on). The agent's own
// reviews and comments, pending reviews and dismissed ones are left out,
// as are the loose comments of q.Ignore.
func (g *Client) ReviewRound(ctx context.Context, repo string, number int, q task.RoundQuery) (task.ReviewRound, error) {
	agent := q.Agent
	comments, err := g.FetchComments(ctx, repo, number, roundReadComments)
	if err != nil {
		return task.ReviewRound{}, err
	}
	var round task.ReviewRound
	// Comment ids order comments exactly; their times are whole seconds.
	var last int64
	for _, c := range comments {
		if strings.EqualFold(c.Author, agent) && c.ID > last {
			last, round.Since = c.ID, c.CreatedAt
		}
	}
	for _, c := range comments {
		fresh := c.ID > last || q.FromComment > 0 && c.ID >= q.FromComment
		if fresh && !strings.EqualFold(c.Author, agent) &&
			!slices.ContainsFunc(q.Ignore, func(l string) bool { return strings.EqualFold(l, c.Author) }) {
			round.Loose = append(round.Loose, c)
		}
	}
	if n := len(round.Loose); n > roundMaxLoose {
		round.Loose = round.Loose[n-roundMaxLoose:]
	}
	c, owner, name, err := g.begin(ctx, repo)
	if err != nil {
		return task.ReviewRound{}, err
	}
	seen := map[int64]bool{}
	for page := 1; ; page++ {
		list, resp, err := c.ListPullReviews(owner, name, int64(number), sdk.ListPullReviewsOptions{
			ListOptions: sdk.ListOptions{Page: page, PageSize: reviewsPage}})
		if err != nil {
			return task.ReviewRound{}, apiErr(fmt.Sprintf("list reviews of %s#%d", repo, number), resp, err)
		}
		fresh := 0
		for _, r := range list {
			if seen[r.ID] {
				continue
			}
			seen[r.ID], fresh = true, fresh+1
			if !roundReview(r, agent, round.Since) {
				continue
			}
			round.Reviews = append(round.Reviews, task.RoundReview{ID: r.ID, Reviewer: r.Reviewer.UserName,
				State: string(r.State), Body: r.Body, At: r.Submitted.UTC()})
		}
		if len(list) < reviewsPage || fresh == 0 {
			break
		}
	}
	if n := len(round.Reviews); n > roundMaxReviews {
		round.Reviews = round.Reviews[n-roundMaxReviews:]
	}
	for i := range round.Reviews {
		r := &round.Reviews[i]
		list, resp, err := c.ListPullReviewComments(owner, name, int64(number), r.ID)
		if err != nil {
			return task.ReviewRound{}, apiErr(fmt.Sprintf("list comments of review %d on %s#%d", r.ID, repo, number), resp, err)
		}
		for _, lc := range list {
			r.Comments = append(r.Comments, task.LineComment{ID: lc.ID, Path: lc.Path, Line: int(lc.LineNum),
				OldLine: int(lc.OldLineNum), DiffHunk: lc.DiffHunk, Body: lc.Body})
		}
	}
	return round, nil
}

// roundReview reports whether a review belongs to the author's round:
// submitted by someone else since the author's last comment, and an
// answer Gitea counts (not a pending draft nor a request to review), not
// dismissed. Gitea's times are whole seconds: what came in the second of
// the author's last comment came after the prompt that comment answered
// was read, so it belongs to the new round.
func roundReview(r *sdk.PullReview, agent string, since time.Time) bool {
	if r.Reviewer == nil || strings.EqualFold(r.Reviewer.UserName, agent) || r.Dismissed ||
		r.Submitted.IsZero() || r.Submitted.Before(since) {
		return false
	}
	switch r.State {
	case sdk.ReviewStateApproved, sdk.ReviewStateRequestChanges, sdk.ReviewStateComment:
		return true
	}
	return false
}

// ReviewRound reads a pull request's review round from Gitea (see
// Client.ReviewRound); without a Gitea there is none. Rounds are not
// cached: each run answers what is there when it starts.
func (r *IssueReader) ReviewRound(ctx context.Context, repo string, number int, q task.RoundQuery) (task.ReviewRound, error) {
	if r.client == nil {
		return task.ReviewRound{}, nil
	}
	return r.client.ReviewRound(ctx, repo, number, q)
}
