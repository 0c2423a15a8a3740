//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// reviewTurnEnv makes a coder answer reviews the way its prompt asks: its
// pull request's file has reviewTurnLines lines to comment on; a review
// turn pushes once, posts one summary comment that answers every inline
// comment its prompt listed (echoing each one's file, line, the last line
// of its diff hunk and its words, so the test sees what the prompt held),
// and re-requests the review once.
const reviewTurnEnv = "E2E_REVIEW_TURN"

const reviewTurnLines = 5

var (
	// roundCommentRE is one inline comment of the prompt's round block:
	// "1. `path:line`", its diff hunk, its quoted words.
	roundCommentRE = regexp.MustCompile("(?m)^\\d+\\. `([^`]+):(\\d+)`(?: \\(-\\))?\\n(?:```diff\\n((?s:.*?))\\n```\\n)?> (.*)$")
	roundReviewRE  = regexp.MustCompile(`(?m)^### Review by (\S+):`)
)

// reviewTurn runs the behaviour's actions; false leaves the others to the
// coder's usual ones.
func (a *agentRun) reviewTurn(ctx context.Context) (bool, error) {
	switch a.action {
	case "issue_assigned":
		return true, a.openReviewablePull(ctx)
	case "review_result", "review_comment":
		return true, a.answerRound(ctx)
	}
	return false, nil
}

// openReviewablePull opens the issue's pull request with a file of
// reviewTurnLines lines, then reports on the issue.
func (a *agentRun) openReviewablePull(ctx context.Context) error {
	path := fmt.Sprintf("work/%d.txt", a.issue)
	var b strings.Builder
	for i := 1; i <= reviewTurnLines; i++ {
		fmt.Fprintf(&b, "line %d of task %d\n", i, a.task)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return err
	}
	branch, err := a.git(ctx, "rev-parse", "--abbrev-ref", "HEAD")
	if err != nil {
		return err
	}
	a.branch = branch
	for _, args := range [][]string{{"add", path}, {"commit", "-q", "-m", fmt.Sprintf("Work on #%d", a.issue)},
		{"push", "-u", "origin", "HEAD"}} {
		if _, err := a.git(ctx, args...); err != nil {
			return err
		}
	}
	if a.pr, err = a.openPull(ctx); err != nil {
		return err
	}
	return a.report(ctx, a.issue, "")
}

// answerRound answers the round its prompt lists in one push, one
// summary comment and one re-request of the review.
func (a *agentRun) answerRound(ctx context.Context) error {
	comments := roundCommentRE.FindAllStringSubmatch(a.prompt, -1)
	reviewers := roundReviewRE.FindAllStringSubmatch(a.prompt, -1)
	if len(comments) == 0 || len(reviewers) == 0 {
		return errors.New("the prompt lists no review round")
	}
	if err := a.commitAndPush(ctx, fmt.Sprintf("work/%d-round-%d.txt", a.pr, a.task), "Answer the review"); err != nil {
		return err
	}
	var answers strings.Builder
	for _, c := range comments {
		hunk := strings.Split(strings.TrimSpace(c[3]), "\n")
		fmt.Fprintf(&answers, "\n- `%s:%s` at %q: %q, changed", c[1], c[2], hunk[len(hunk)-1], c[4])
	}
	blocks := reportBlockRE.FindAllStringSubmatch(a.prompt, -1)
	if len(blocks) == 0 {
		return errors.New("the prompt asks for no [Action Report]")
	}
	body := fieldRE.ReplaceAllStringFunc(strings.TrimSpace(blocks[len(blocks)-1][1]), func(line string) string {
		field := fieldRE.FindStringSubmatch(line)[1]
		if field == "Answers" || field == "Answered" {
			return fmt.Sprintf("**%s**:%s", field, answers.String())
		}
		return fmt.Sprintf("**%s**: done by the e2e agent (task %d)", field, a.task)
	})
	if err := a.comment(ctx, a.pr, body); err != nil {
		return err
	}
	reviewer := reviewers[0][1]
	if err := a.call(ctx, http.MethodPost, fmt.Sprintf("/repos/%s/pulls/%d/requested_reviewers", a.repo, a.pr),
		map[string]any{"reviewers": []string{reviewer}}, nil); err != nil {
		return fmt.Errorf("re-request the review of %s: %w", reviewer, err)
	}
	fmt.Printf("e2e agent: answered %d comments on #%d, asked %s again\n", len(comments), a.pr, reviewer)
	return nil
}
