//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository/task"
)

// TestE2EOneTurnPerReviewWithFiveInlineComments: a person's review with
// five inline comments is one run of the pull request's author, whose
// prompt holds every comment with its file, line and diff hunk; the
// author answers with one push, one summary comment and one re-request of
// the review.
func TestE2EOneTurnPerReviewWithFiveInlineComments(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{agents: []agentSpec{
		{name: "coder", role: "coder", env: map[string]string{reviewTurnEnv: "1"}},
	}})
	coder := w.login("coder")
	issue := w.createIssue("Add a poem", "Please add a poem of five lines.", coder)
	w.waitTask("the pull request opened", 2*time.Minute, task.StatusReview, isAction(task.ActionIssueAssigned, coder))
	require.Len(t, w.pulls(), 1)
	pr := w.pulls()[0]
	path := fmt.Sprintf("work/%d.txt", issue)

	var comments []map[string]any
	for line := 1; line <= reviewTurnLines; line++ {
		comments = append(comments, map[string]any{"path": path, "new_position": line,
			"body": fmt.Sprintf("Point %d: reword line %d.", line, line)})
	}
	w.call(w.human, http.MethodPost, fmt.Sprintf("/repos/%s/pulls/%d/reviews", w.repo, pr.Number), map[string]any{
		"event": "REQUEST_CHANGES", "body": "Five points, inline.", "comments": comments}, nil)

	w.eventually("the author's summary of the round", 2*time.Minute, func() (bool, string) {
		return len(w.roundSummaries(pr.Number, coder)) > 0, describe(w.tasks())
	})
	w.waitRunsRecorded()
	// Anything a second turn would come from has arrived by now: the
	// push, the summary comment and the re-request are Gitea's webhooks
	// of the turn just done. Let them land before counting.
	w.eventually("no task of the coder pending or running", time.Minute, func() (bool, string) {
		busy := w.tasksWhere(func(tk task.Task) bool {
			return tk.Agent == coder && (tk.Status == task.StatusPending || tk.Status == task.StatusClaimed ||
				tk.Status == task.StatusWorking && tk.ActionType != task.ActionIssueAssigned)
		})
		return len(busy) == 0, describe(busy)
	})
	time.Sleep(3 * time.Second) // a second turn, if one were made, would be pending by now
	w.waitRunsRecorded()

	turns := w.tasksWhere(func(tk task.Task) bool {
		return tk.Agent == coder && tk.ActionType != task.ActionIssueAssigned
	})
	require.Len(t, turns, 1, "one task for the review: %s", describe(turns))
	assert.Equal(t, task.ActionReviewResult, turns[0].ActionType)
	assert.Equal(t, 1, turns[0].DispatchCount, "one run")
	assert.Len(t, w.attemptsOf(turns[0].ID), 1)
	assert.Equal(t, 2, strings.Count(w.runsOf(w.agents["coder"]), "start "), "the coder ran twice: the issue, the review:\n%s",
		w.runsOf(w.agents["coder"]))

	summaries := w.roundSummaries(pr.Number, coder)
	require.Len(t, summaries, 1, "one summary comment for the round")
	assert.Len(t, w.commentsBy(pr.Number, coder), 1, "and no reply per comment")
	for line := 1; line <= reviewTurnLines; line++ {
		// The prompt held the comment's file, line, diff hunk and words.
		assert.Contains(t, summaries[0], fmt.Sprintf("`%s:%d` at \"+line %d of task ", path, line, line), "comment %d", line)
		assert.Contains(t, summaries[0], fmt.Sprintf(": %q, changed", fmt.Sprintf("Point %d: reword line %d.", line, line)),
			"comment %d", line)
	}

	var asked int
	for _, r := range w.reviews(pr.Number) {
		if r.User.Login == w.human.Login && r.State == "REQUEST_REVIEW" {
			asked++
		}
	}
	assert.Equal(t, 1, asked, "the review re-requested once")
	assert.Len(t, w.pullCommits(pr.Number), 2, "one push for the round")
	w.checkRuns()
}

// roundSummaries are the author's [Action Report] comments on the pull
// request.
func (w *world) roundSummaries(pr int, author string) []string {
	var out []string
	for _, c := range w.commentsBy(pr, author) {
		if strings.HasPrefix(c.Body, "[Action Report]") {
			out = append(out, c.Body)
		}
	}
	return out
}
