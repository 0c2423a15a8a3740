//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/spawner/progress"
)

// TestE2EStatusCommentFollowsTheWork: an issue assigned to a coder while
// an issue it depends on is open gets 👀 and one status comment from mozi
// that says what it waits for; closing the dependency, the run, the pull
// request and its merge move that same comment in place, ending done.
func TestE2EStatusCommentFollowsTheWork(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{
		agents: []agentSpec{{name: "coder", role: "coder",
			// A run long enough that "running" is shown before the pull
			// request replaces it.
			env: map[string]string{"E2E_SLEEP": "3s", "E2E_SLEEP_ON": string(task.ActionIssueAssigned)}}},
		tune: func(cfg map[string]any) {
			section(cfg, "progress")["min_edit_interval"] = "200ms"
		}})
	coder := w.login("coder")
	dep := w.createIssue("Decide the greeting", "Which words?")
	issue := w.createIssue("Add a greeting", fmt.Sprintf("Please add a greeting file.\n\nDepends: #%d", dep), coder)

	statusComments := func() []comment {
		var out []comment
		for _, c := range w.commentsBy(issue, w.bot.Login) {
			if strings.Contains(c.Body, progress.Marker) {
				out = append(out, c)
			}
		}
		return out
	}
	waiting := fmt.Sprintf("⏳ **queued** — waits: dependency open (#%d) · `%s` · issue assigned", dep, coder)
	w.eventually("the status comment says what the task waits for", time.Minute, func() (bool, string) {
		cs := statusComments()
		return len(cs) == 1 && strings.Contains(cs[0].Body, waiting), fmt.Sprint(w.comments(issue))
	})
	var reactions []struct {
		Content string
		User    struct{ Login string }
	}
	w.call(w.human, http.MethodGet, fmt.Sprintf("/repos/%s/issues/%d/reactions", w.repo, issue), nil, &reactions)
	require.Len(t, reactions, 1, "%+v", reactions)
	assert.Equal(t, "eyes", reactions[0].Content)
	assert.Equal(t, w.bot.Login, reactions[0].User.Login)

	w.call(w.human, http.MethodPatch, fmt.Sprintf("/repos/%s/issues/%d", w.repo, dep), map[string]any{"state": "closed"}, nil)
	w.eventually("mozi's copy of the dependency closed", time.Minute, func() (bool, string) {
		known, err := w.store.Issue(t.Context(), w.repo, dep)
		return err == nil && known.State == task.StateClosed, fmt.Sprintf("%+v (%v)", known, err)
	})
	w.waitTask("the assigned task", 2*time.Minute, task.StatusReview, isAction(task.ActionIssueAssigned, coder))
	pr := w.pulls()[0]
	w.call(w.human, http.MethodPost, fmt.Sprintf("/repos/%s/pulls/%d/merge", w.repo, pr.Number), map[string]any{"Do": "merge"}, nil)
	w.waitTask("the assigned task", 2*time.Minute, task.StatusDone, isAction(task.ActionIssueAssigned, coder))

	done := fmt.Sprintf("✅ **done** — PR #%d · `%s` · issue assigned", pr.Number, coder)
	w.eventually("the status comment says done", time.Minute, func() (bool, string) {
		cs := statusComments()
		return len(cs) == 1 && strings.Contains(cs[0].Body, done), fmt.Sprint(w.comments(issue))
	})
	cs := statusComments()
	require.Len(t, cs, 1, "one status comment per issue")

	// The poster records an edit once Gitea took it: the record of the
	// last one may come a moment after Gitea shows it.
	var edits []repository.StatusEdit
	w.eventually("the last edit recorded", time.Minute, func() (bool, string) {
		var err error
		edits, err = w.store.StatusEdits(t.Context(), w.repo, issue)
		return err == nil && len(edits) > 0 && edits[len(edits)-1].Body == cs[0].Body, fmt.Sprintf("%d edits (%v)", len(edits), err)
	})
	var states []string
	for _, e := range edits {
		assert.Equal(t, cs[0].ID, e.CommentID, "every edit is of the one comment")
		states = append(states, stateOf(e.Body))
	}
	t.Logf("the status comment showed, in order: %v", states)
	assert.Equal(t, cs[0].Body, edits[len(edits)-1].Body, "Gitea shows the last recorded body")
	assert.Equal(t, "queued", states[0])
	assert.Equal(t, "done", states[len(states)-1])
	order := []string{"queued", "starting", "running", "opened", "done"}
	// Two edits may share a step: "queued — waits: dependency open" then
	// "queued" once the dependency closed (seen when the claim came after
	// the next edit was due).
	for i := 1; i < len(states); i++ {
		assert.LessOrEqual(t, slices.Index(order, states[i-1]), slices.Index(order, states[i]),
			"the comment only moves forward: %v", states)
	}
	assert.Contains(t, states, "running")
	assert.Contains(t, states, "opened")
	assert.Empty(t, w.tasksWhere(func(tk task.Task) bool {
		return tk.Agent != coder || tk.IssueNumber != issue && tk.IssueNumber != pr.Number
	}),
		"mozi's own comment and its edits made no work")
	w.checkRuns()
}

// stateOf is the word a status comment's line leads with.
func stateOf(body string) string {
	for _, s := range []string{"queued", "starting", "running", "opened", "done", "failed", "cancelled", "waiting"} {
		if strings.Contains(body, "**"+s+"**") || strings.Contains(body, " "+s+"**") {
			return s
		}
	}
	return body
}
