package gitea

import (
	"context"
	"fmt"

	sdk "code.gitea.io/sdk/gitea"
)

// ReactionTaken is the reaction mozi leaves on what triggered a task it
// took (👀).
const ReactionTaken = "eyes"

// EditComment replaces the body of one of mozi's comments.
func (g *Client) EditComment(ctx context.Context, repo string, commentID int64, body string) error {
	c, owner, name, err := g.begin(ctx, repo)
	if err != nil {
		return err
	}
	_, resp, err := c.EditIssueComment(owner, name, commentID, sdk.EditIssueCommentOption{Body: body})
	if err != nil {
		return apiErr(fmt.Sprintf("edit comment %d on %s", commentID, repo), resp, err)
	}
	return nil
}

// ReactToIssue leaves a reaction on an issue or pull request; Gitea
// answers a reaction given before as a success.
func (g *Client) ReactToIssue(ctx context.Context, repo string, number int, reaction string) error {
	c, owner, name, err := g.begin(ctx, repo)
	if err != nil {
		return err
	}
	_, resp, err := c.PostIssueReaction(owner, name, int64(number), reaction)
	if err != nil {
		return apiErr(fmt.Sprintf("react to %s#%d", repo, number), resp, err)
	}
	return nil
}

// ReactToComment leaves a reaction on a comment.
func (g *Client) ReactToComment(ctx context.Context, repo string, commentID int64, reaction string) error {
	c, owner, name, err := g.begin(ctx, repo)
	if err != nil {
		return err
	}
	_, resp, err := c.PostIssueCommentReaction(owner, name, commentID, reaction)
	if err != nil {
		return apiErr(fmt.Sprintf("react to comment %d on %s", commentID, repo), resp, err)
	}
	return nil
}
