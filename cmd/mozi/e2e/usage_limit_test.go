//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/spawner/agenttest"
)

// TestE2EUsageLimitPausesThenResumes: Claude Code (signed in with a
// subscription) and codex, really run by mozi, meet a fake model whose
// first answer is the provider's usage-limit 429 with a reset 15 s ahead.
// The run ends paused, not failed: the task waits pending, held for
// usage_limit until the reset the CLI printed (codex prints it to the
// minute: the end of that minute), with no retry counted; at the reset it
// runs once more, by itself, does the work (a pull request closing the
// issue), and ends done when the pull request is merged.
func TestE2EUsageLimitPausesThenResumes(t *testing.T) {
	t.Parallel()
	for _, preset := range []string{"claude-code", "codex"} {
		t.Run(preset, func(t *testing.T) {
			t.Parallel()
			cli := agenttest.FindCLI(t, preset)
			model := agenttest.NewServer(t, agenttest.Script{
				File: modelFile, Content: "written by the " + preset + " CLI after its usage limit\n",
				Then:   `"$HOME/bin/mozi-e2e-agent"`,
				Answer: "Done: the work is pushed and reported.",
				Tool:   agenttest.Usage{Input: 100, Output: 10}, Final: agenttest.Usage{Input: 120, Output: 8},
				Limit:        &agenttest.Limit{Requests: 1, ResetIn: 15 * time.Second},
				Subscription: true,
			})
			w := newWorld(t, worldOptions{model: model, path: cli.PATH, agents: []agentSpec{{name: "coder", role: "coder",
				preset: preset, env: map[string]string{"E2E_MODEL_FILE": modelFile}, timeout: 5 * time.Minute}}})
			coder := w.login("coder")
			issue := w.createIssue("Add a greeting after a pause", "Please add a greeting file.", coder)
			assigned := isAction(task.ActionIssueAssigned, coder)

			// The first run hits the limit: paused, the task held until
			// the reset, no retry counted.
			var held task.Task
			w.eventually("the first run paused", 3*time.Minute, func() (bool, string) {
				list := w.tasksWhere(assigned)
				if len(list) != 1 {
					return false, describe(w.tasks())
				}
				held = list[0]
				as := w.attemptsOf(held.ID)
				return len(as) >= 1 && as[0].Outcome == task.AttemptPaused, describe(list)
			})
			reset := model.LimitReset()
			require.False(t, reset.IsZero(), "the model gave no reset")
			want := reset
			if preset == "codex" {
				want = reset.Truncate(time.Minute).Add(time.Minute)
			}
			first := w.attemptsOf(held.ID)[0]
			assert.Contains(t, first.Error, "usage limit reached")
			assert.Equal(t, 0, held.RetryCount)
			if held.Status == task.StatusPending {
				// Not yet resumed (it may be, under load, by the time
				// this looks).
				assert.Equal(t, task.HeldForUsageLimit, held.HeldFor)
				assert.Contains(t, held.LastError, "usage limit reached", "the task says why it waits")
				assert.WithinDuration(t, want, held.NotBefore, time.Second, "the task waits for the reset")
			}

			// At the reset it runs once more, by itself, and does the work.
			w.waitTask("the assigned task", 4*time.Minute, task.StatusReview, assigned)
			w.waitRunsRecorded()
			tk := w.tasksWhere(assigned)[0]
			attempts := w.attemptsOf(tk.ID)
			require.Len(t, attempts, 2, describe([]task.Task{tk}))
			assert.Equal(t, task.AttemptPaused, attempts[0].Outcome)
			assert.Equal(t, task.AttemptSucceeded, attempts[1].Outcome, attempts[1].Error)
			assert.False(t, attempts[1].StartedAt.Before(want.Add(-time.Second)),
				"the second run started at %s, before the reset %s", attempts[1].StartedAt, want)
			assert.Equal(t, 0, tk.RetryCount, "a pause is not a failure")
			assert.Equal(t, []string{agenttest.TurnLimited, agenttest.TurnTool, agenttest.TurnFinal}, modelTurns(model.Turns()))
			require.Empty(t, model.Errors())

			w.call(w.human, http.MethodPost, fmt.Sprintf("/repos/%s/pulls/%d/merge", w.repo, tk.PRNumber),
				map[string]any{"Do": "merge"}, nil)
			done := w.waitTask("the assigned task", 2*time.Minute, task.StatusDone, assigned)
			assert.Equal(t, 0, done.RetryCount)
			assert.Equal(t, issue, done.IssueNumber)
			assert.Equal(t, "written by the "+preset+" CLI after its usage limit\n", w.fileOnMain(modelFile))
		})
	}
}

// modelTurns leaves out the model requests without a shell tool (titles)
// and codex's polls of a command that runs long on a loaded machine.
func modelTurns(turns []string) []string {
	var out []string
	for _, t := range turns {
		if t != agenttest.TurnAux && t != agenttest.TurnPoll {
			out = append(out, t)
		}
	}
	return out
}
