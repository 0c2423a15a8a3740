package gitea

import (
	"context"
	"fmt"
	"time"

	sdk "code.gitea.io/sdk/gitea"

	"github.com/moziplus/mozi/repository/task"
)

// catchUpPage is how many issues or pull requests one listing call asks for.
const catchUpPage = 50

// OpenIssuesSince lists a repository's open issues (not pull requests)
// updated at or after since, most recently created first (Gitea's order),
// up to limit: what mozi may have missed while it was down.
func (g *Client) OpenIssuesSince(ctx context.Context, repo string, since time.Time, limit int) ([]task.Issue, error) {
	c, owner, name, err := g.begin(ctx, repo)
	if err != nil {
		return nil, err
	}
	var out []task.Issue
	for page := 1; len(out) < limit; page++ {
		list, resp, err := c.ListRepoIssues(owner, name, sdk.ListIssueOption{
			ListOptions: sdk.ListOptions{Page: page, PageSize: catchUpPage},
			State:       sdk.StateOpen, Type: sdk.IssueTypeIssue, Since: since})
		if err != nil {
			return out, apiErr(fmt.Sprintf("list issues of %s updated since %s", repo, since.UTC().Format(time.RFC3339)), resp, err)
		}
		for _, gi := range list {
			if len(out) < limit {
				out = append(out, issueFromSDK(repo, gi))
			}
		}
		if len(list) < catchUpPage {
			break
		}
	}
	return out, nil
}

// OpenPullRequestsSince lists a repository's open pull requests updated at
// or after since (Gitea's pull request listing has no such filter: it is
// read most recently updated first until an older one), up to limit.
func (g *Client) OpenPullRequestsSince(ctx context.Context, repo string, since time.Time, limit int) ([]task.PullRequest, error) {
	c, owner, name, err := g.begin(ctx, repo)
	if err != nil {
		return nil, err
	}
	var out []task.PullRequest
	for page := 1; len(out) < limit; page++ {
		list, resp, err := c.ListRepoPullRequests(owner, name, sdk.ListPullRequestsOptions{
			ListOptions: sdk.ListOptions{Page: page, PageSize: catchUpPage}, State: sdk.StateOpen, Sort: "recentupdate"})
		if err != nil {
			return out, apiErr(fmt.Sprintf("list pull requests of %s", repo), resp, err)
		}
		for _, pr := range list {
			p := pullFromSDK(repo, pr)
			if p.UpdatedAt.Before(since) {
				return out, nil
			}
			if len(out) < limit {
				out = append(out, p)
			}
		}
		if len(list) < catchUpPage {
			break
		}
	}
	return out, nil
}
