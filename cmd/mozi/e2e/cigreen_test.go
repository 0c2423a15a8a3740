//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository/task"
)

// TestE2EQuestionAnsweredByPersonResumesTheTask: an agent that cannot go
// on asks in its [Action Report]; its task waits, mozi's one comment
// mentions the issue's author, an agent's comment answers nothing, and the
// person's next comment resumes the same task on the same branch with the
// answer in its prompt.
func TestE2EQuestionAnsweredByPersonResumesTheTask(t *testing.T) {
	t.Parallel()
	const question = "Should the limit be per user or per IP?"
	w := newWorld(t, worldOptions{agents: []agentSpec{
		{name: "coder", role: "coder", env: map[string]string{askEnv: question}},
		{name: "other", role: "idle"},
	}})
	coder := w.login("coder")
	issue := w.createIssue("Add a rate limit", "Please add a rate limit.", coder)

	waiting := w.waitTask("the assigned task waiting for an answer", 2*time.Minute, task.StatusWaiting,
		isAction(task.ActionIssueAssigned, coder))
	assert.Equal(t, task.WaitQuestion, waiting.WaitReason)
	assert.Equal(t, question, waiting.Meta.Question)
	assert.Empty(t, w.pulls(), "the agent stopped at its question")
	w.eventually("mozi's comment asking the issue's author", time.Minute, func() (bool, string) {
		asks := w.notices(issue)
		return len(asks) == 1 && strings.Contains(asks[0].Body, "@"+w.human.Login) &&
			strings.Contains(asks[0].Body, question), fmt.Sprintf("%+v", asks)
	})

	w.eventually("the status comment says the task waits for an answer", time.Minute, func() (bool, string) {
		text := w.statusText(issue)
		return strings.Contains(text, "⏸ **waiting**: an answer to the agent's question"), text
	})

	// An agent's comment is no answer.
	w.call(w.agents["other"].User, http.MethodPost, fmt.Sprintf("/repos/%s/issues/%d/comments", w.repo, issue),
		map[string]any{"body": "I do not know either."}, nil)
	const answer = "Per user, 100 requests a minute."
	w.call(w.human, http.MethodPost, fmt.Sprintf("/repos/%s/issues/%d/comments", w.repo, issue),
		map[string]any{"body": answer}, nil)

	resumed := w.waitTask("the same task in review after the answer", 2*time.Minute, task.StatusReview,
		isAction(task.ActionIssueAssigned, coder))
	assert.Equal(t, waiting.ID, resumed.ID, "the same task resumed")
	assert.Equal(t, 2, resumed.DispatchCount)
	assert.Equal(t, answer, resumed.Meta.Answer)
	assert.Equal(t, w.human.Login, resumed.Meta.AnsweredBy)
	assert.Equal(t, waiting.Meta.WorkBranch, resumed.Meta.WorkBranch, "the same branch")
	require.Len(t, w.pulls(), 1)
	assert.Equal(t, resumed.Meta.WorkBranch, w.pulls()[0].Head.Ref)
	read := false
	for _, c := range w.commentsBy(issue, coder) {
		read = read || c.Body == "The e2e agent read the answer: "+answer
	}
	assert.True(t, read, "the resumed run's prompt carried the answer")
	assert.Len(t, w.tasks(), 1, describe(w.tasks()))
	assert.Len(t, w.notices(issue), 1, "one comment for the question")
	w.checkRuns()
}

// TestE2ECIRedRoundsThenPersonThenGreenToReviewers: the reviewer's task
// is held while the pull request's head has no green CI; a red status
// starts a repair round, one on an older head is ignored, red after the
// last round makes the author's task wait for a person with one comment
// saying what is red; the person's comment resumes it, and a green head
// releases the reviewer.
func TestE2ECIRedRoundsThenPersonThenGreenToReviewers(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{agents: []agentSpec{
		{name: "coder", role: "coder", env: map[string]string{"E2E_REVIEWERS": "{world}-reviewer", "E2E_CI_FIX": "1"}},
		{name: "reviewer", role: "reviewer"},
	}})
	coder, reviewer := w.login("coder"), w.login("reviewer")
	// The repository has CI: a head without statuses yet is pending.
	var main struct{ Commit struct{ ID string } }
	w.call(w.human, http.MethodGet, "/repos/"+w.repo+"/branches/main", nil, &main)
	w.status(w.human, main.Commit.ID, "ci/test", "success")

	issue := w.createIssue("Add a counter", "Please add a counter file.", coder)
	w.waitTask("the assigned task", 2*time.Minute, task.StatusReview, isAction(task.ActionIssueAssigned, coder))
	held := w.waitTask("the reviewer's task held for CI", time.Minute, task.StatusPending,
		func(t task.Task) bool {
			return t.ActionType == task.ActionReviewRequest && t.Agent == reviewer && t.HeldFor == task.HeldForCI
		})
	// moved waits until the head moved on from sha in Gitea and in mozi's
	// copy (a status is about a head mozi knows): it returns the new head.
	moved := func(what, sha string) string {
		var head string
		w.eventually(what, time.Minute, func() (bool, string) {
			pr := w.pulls()[0]
			known, err := w.store.PullRequest(context.Background(), w.repo, pr.Number)
			head = pr.Head.Sha
			return head != sha && err == nil && known.HeadSHA == head, fmt.Sprintf("gitea %s, mozi %s (%v)", head, known.HeadSHA, err)
		})
		return head
	}
	head := func() string { return w.pulls()[0].Head.Sha }

	// Round 1 on the first head; the fix pushes a new one.
	h1 := head()
	w.status(w.human, h1, "ci/test", "failure")
	round1 := w.waitTask("repair round 1", 2*time.Minute, task.StatusDone, isAction(task.ActionCIFailure, coder))
	assert.Equal(t, 1, round1.Meta.CIRound)
	assert.Equal(t, "ci/test is failure", round1.Meta.StatusDesc)
	h2 := moved("the fix pushed", h1)

	// A red status on the older head never counts; round 2 on the new one.
	w.status(w.human, h1, "ci/lint", "failure")
	w.status(w.human, h2, "ci/test", "failure")
	w.eventually("repair round 2 done", 2*time.Minute, func() (bool, string) {
		rounds := w.tasksWhere(isAction(task.ActionCIFailure, coder))
		return len(rounds) == 2 && rounds[0].Status == task.StatusDone && rounds[1].Status == task.StatusDone, describe(rounds)
	})
	rounds := w.tasksWhere(isAction(task.ActionCIFailure, coder))
	assert.Equal(t, []string{h1, h2}, []string{rounds[0].Meta.HeadSHA, rounds[1].Meta.HeadSHA})
	assert.Equal(t, 2, rounds[1].Meta.CIRound)
	for _, r := range rounds {
		assert.Equal(t, "ci/test", r.Meta.StatusCtx, "the older head's ci/lint made a round")
	}
	h3 := moved("the second fix pushed", h2)

	// Red after the last round: the author's task waits for a person.
	w.status(w.human, h3, "ci/test", "failure")
	waiting := w.waitTask("the assigned task waiting for a person", time.Minute, task.StatusWaiting,
		isAction(task.ActionIssueAssigned, coder))
	assert.Equal(t, task.WaitCIRed, waiting.WaitReason)
	assert.Len(t, w.tasksWhere(isAction(task.ActionCIFailure, coder)), 2, "no third round")
	w.eventually("mozi's comment saying what is red", time.Minute, func() (bool, string) {
		notes := w.notices(issue)
		return len(notes) == 1 && strings.Contains(notes[0].Body, "@"+w.human.Login) &&
			strings.Contains(notes[0].Body, "`ci/test`: failure"), fmt.Sprintf("%+v", notes)
	})
	w.eventually("the status comment says CI stayed red", time.Minute, func() (bool, string) {
		text := w.statusText(issue)
		return strings.Contains(text, "⏸ **waiting**: CI red (round 2 of 2)"), text
	})
	w.status(w.human, h3, "ci/test", "error") // still red: no second comment, no round
	w.call(w.human, http.MethodPost, fmt.Sprintf("/repos/%s/issues/%d/comments", w.repo, issue),
		map[string]any{"body": "The failure is a flaky runner; push once more."}, nil)
	resumed := w.waitTask("the same task resumed and run", 2*time.Minute, task.StatusWorking,
		func(t task.Task) bool { return t.ID == waiting.ID && t.DispatchCount == 2 && t.LeaseOwner == "" })
	assert.Equal(t, "The failure is a flaky runner; push once more.", resumed.Meta.Answer)
	moved("the resumed run pushed", h3)

	// The reviewer never ran on a red head; green releases it.
	reviewTask := w.tasksWhere(func(t task.Task) bool { return t.ID == held.ID })[0]
	assert.Equal(t, 0, reviewTask.DispatchCount, "the reviewer ran on a red pull request")
	assert.Equal(t, task.StatusPending, reviewTask.Status)
	w.status(w.human, head(), "ci/test", "success")
	w.waitTask("the reviewer's task done", 2*time.Minute, task.StatusDone,
		func(t task.Task) bool { return t.ID == held.ID })
	var states []string
	for _, r := range w.reviews(w.pulls()[0].Number) {
		if r.User.Login == reviewer {
			states = append(states, r.State)
		}
	}
	assert.Equal(t, []string{"APPROVED"}, states)
	assert.Len(t, w.notices(issue), 1, "one comment for the red pull request")
	w.checkRuns()
}
