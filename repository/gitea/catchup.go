package gitea

import (
	"context"
	"fmt"
	"strconv"
	"strings"
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

// IssueComment is a comment with the issue or pull request it is on.
type IssueComment struct {
	task.Comment
	Issue  int
	IsPull bool
}

// CommentsSince lists a repository's comments (on issues and pull
// requests) updated at or after since, oldest first, up to limit: the
// comments whose webhooks mozi may have missed while it was down.
func (g *Client) CommentsSince(ctx context.Context, repo string, since time.Time, limit int) ([]IssueComment, error) {
	c, owner, name, err := g.begin(ctx, repo)
	if err != nil {
		return nil, err
	}
	var out []IssueComment
	seen := map[int64]bool{}
	for page := 1; len(out) < limit; page++ {
		list, resp, err := c.ListRepoIssueComments(owner, name, sdk.ListIssueCommentOptions{
			ListOptions: sdk.ListOptions{Page: page, PageSize: catchUpPage}, Since: since})
		if err != nil {
			return out, apiErr(fmt.Sprintf("list comments of %s updated since %s", repo, since.UTC().Format(time.RFC3339)), resp, err)
		}
		fresh := 0
		for _, gc := range list {
			number, isPull, ok := commentTarget(gc)
			if seen[gc.ID] || !ok {
				continue
			}
			seen[gc.ID], fresh = true, fresh+1
			cm := IssueComment{Issue: number, IsPull: isPull, Comment: task.Comment{ID: gc.ID, Body: gc.Body,
				CreatedAt: gc.Created.UTC(), UpdatedAt: gc.Updated.UTC()}}
			if gc.Poster != nil {
				cm.Author = gc.Poster.UserName
			}
			if len(out) < limit {
				out = append(out, cm)
			}
		}
		if len(list) < catchUpPage || fresh == 0 {
			break
		}
	}
	return out, nil
}

// commentTarget reads the number of the issue or pull request a comment
// is on from its URL (…/issues/7, …/pulls/7).
func commentTarget(c *sdk.Comment) (number int, isPull bool, ok bool) {
	url, isPull := c.IssueURL, false
	if c.PRURL != "" {
		url, isPull = c.PRURL, true
	}
	i := strings.LastIndexByte(url, '/')
	if i < 0 {
		return 0, false, false
	}
	n, err := strconv.Atoi(url[i+1:])
	if err != nil || n <= 0 {
		return 0, false, false
	}
	return n, isPull, true
}
