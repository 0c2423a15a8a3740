package prompts

import (
	"context"
	"fmt"
	"strings"

	"github.com/moziplus/mozi/repository/task"
)

// ReviewSource reads a pull request's review round at run time
// (gitea.Client): every review since its author's last turn with each
// inline comment's path, line and diff hunk, and the loose comments.
type ReviewSource interface {
	ReviewRound(ctx context.Context, repo string, number int, q task.RoundQuery) (task.ReviewRound, error)
}

// Bounds of the round block: all of it within roundBudget, each diff hunk
// within hunkBudget (the lines nearest the comment are the hunk's end).
const (
	roundBudget = 16 << 10
	hunkBudget  = 1 << 10
)

// answersRound reports whether an action answers a review round: one run
// for every comment of it.
func answersRound(a task.ActionType) bool {
	return a == task.ActionReviewResult || a == task.ActionReviewComment
}

// round gathers the round a review task answers. The agents' own loose
// comments reach each other through mentions and mozi's bot speaks for
// mozi: neither is feedback.
func (a *Assembler) round(ctx context.Context, t task.Task) (*task.ReviewRound, error) {
	if a.cfg.Reviews == nil || t.PRNumber == 0 || !answersRound(t.ActionType) {
		return nil, nil
	}
	ignore := []string{a.cfg.BotUser}
	for login := range a.cfg.Agents {
		ignore = append(ignore, login)
	}
	round, err := a.cfg.Reviews.ReviewRound(ctx, t.Repo, t.PRNumber,
		task.RoundQuery{Agent: t.Agent, Ignore: ignore, FromComment: t.Meta.RoundFrom()})
	if err != nil {
		return nil, fmt.Errorf("review round of %s#%d: %w", t.Repo, t.PRNumber, err)
	}
	return &round, nil
}

// roundBlock renders the round: each review with its inline comments
// (file, line, the diff hunk they sit on), then the loose comments. Other
// people's words are quoted, so they read as data.
func roundBlock(r *Renderer, round *task.ReviewRound) string {
	if round == nil || round.Empty() {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n", r.Label("round"))
	for _, rv := range round.Reviews {
		fmt.Fprintf(&b, "\n### %s\n", r.Label("round_one_review", "who", rv.Reviewer, "state", reviewState(strings.ToLower(gitState(rv.State)))))
		if body := strings.TrimSpace(rv.Body); body != "" {
			b.WriteString(quote(body) + "\n")
		}
		for i, c := range rv.Comments {
			line, side := c.Line, ""
			if line == 0 && c.OldLine != 0 {
				line, side = c.OldLine, " (-)"
			}
			fmt.Fprintf(&b, "\n%d. `%s:%d`%s\n", i+1, c.Path, line, side)
			if hunk := strings.TrimSpace(c.DiffHunk); hunk != "" {
				fmt.Fprintf(&b, "```diff\n%s\n```\n", lastBytes(hunk, hunkBudget))
			}
			b.WriteString(quote(c.Body) + "\n")
		}
	}
	if len(round.Loose) > 0 {
		fmt.Fprintf(&b, "\n### %s\n", r.Label("round_loose"))
		for _, c := range round.Loose {
			fmt.Fprintf(&b, "\n%s\n%s\n", r.Label("round_comment", "who", c.Author), quote(c.Body))
		}
	}
	b.WriteString("\n" + r.Section("round_answer"))
	return r.Cut(strings.TrimRight(b.String(), "\n"), roundBudget)
}

// gitState maps Gitea's review states to the verdict words mozi's
// payloads use.
func gitState(s string) string {
	switch s {
	case "REQUEST_CHANGES":
		return "rejected"
	case "COMMENT":
		return "comment"
	}
	return s
}
