package gitea

import (
	"context"
	"fmt"
	"slices"

	sdk "code.gitea.io/sdk/gitea"
)

// reviewsPage is how many reviews one listing call asks for (Gitea's
// maximum).
const reviewsPage = 50

// PendingReviewRequests lists the users asked to review a pull request who
// have not answered yet, in the order they were asked.
//
// A pull request's requested_reviewers field is not that list: Gitea 1.25
// fills it with every reviewer's latest review, approved, rejected and
// commented as well as requested (models/issues/pull.go,
// LoadRequestedReviewers). A pending request is a review in state
// REQUEST_REVIEW, which Gitea deletes when the reviewer submits a review
// and creates again when they are asked again: the reviewer's latest
// review that is not dismissed, of the kinds Gitea counts (a draft is not
// an answer), says whether one is pending. Team requests are not users'
// and are left out.
func (g *Client) PendingReviewRequests(ctx context.Context, repo string, number int) ([]string, error) {
	c, owner, name, err := g.begin(ctx, repo)
	if err != nil {
		return nil, err
	}
	latest := map[string]sdk.ReviewStateType{}
	var order []string // reviewers in the order of their latest review
	seen := map[int64]bool{}
	for page := 1; ; page++ {
		list, resp, err := c.ListPullReviews(owner, name, int64(number), sdk.ListPullReviewsOptions{
			ListOptions: sdk.ListOptions{Page: page, PageSize: reviewsPage}})
		if err != nil {
			return nil, apiErr(fmt.Sprintf("list reviews of %s#%d", repo, number), resp, err)
		}
		fresh := 0
		for _, r := range list {
			if seen[r.ID] {
				continue
			}
			seen[r.ID], fresh = true, fresh+1
			if r.Reviewer == nil || r.Dismissed || !countedReview(r.State) {
				continue
			}
			login := r.Reviewer.UserName
			latest[login] = r.State
			order = slices.DeleteFunc(order, func(l string) bool { return l == login })
			order = append(order, login)
		}
		// A short page is the last; a page with nothing new means the
		// server does not page this list.
		if len(list) < reviewsPage || fresh == 0 {
			break
		}
	}
	var pending []string
	for _, login := range order {
		if latest[login] == sdk.ReviewStateRequestReview {
			pending = append(pending, login)
		}
	}
	return pending, nil
}

// countedReview reports whether Gitea counts a review of this state as a
// reviewer's answer or request (models/issues/review_list.go,
// GetReviewsByIssueID): drafts and unknown states are not.
func countedReview(s sdk.ReviewStateType) bool {
	switch s {
	case sdk.ReviewStateApproved, sdk.ReviewStateRequestChanges, sdk.ReviewStateComment, sdk.ReviewStateRequestReview:
		return true
	}
	return false
}
