//go:build e2e

package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/spawner/agenttest"
)

// modelFile is what the fake model's shell call writes in the worktree
// before it runs the agent program, which commits it (E2E_MODEL_FILE).
const modelFile = "MODEL.txt"

// TestE2ERealCLI: for each preset whose CLI is installed
// (.ci/install-agent-clis), the review round of TestE2EReviewRoundThenMerge
// with the coder that preset's real CLI, spawned by mozi in its sandbox
// as the agents' user and talking to a fake model on loopback
// (spawner/agenttest). In each of the coder's runs the model calls the
// CLI's shell tool once, to write MODEL.txt and run the agent program,
// which does the run's work in Gitea as a model would through that tool
// (commit, push, pull request, review answer, [Action Report]); then it
// answers. The reviewer and the lead stay the agent program alone: the
// same CLI for them passed too, but costs up to a minute a run (opencode,
// on a loaded machine) and proves nothing more of the preset.
//
// Besides the flow: the file the CLI's shell call wrote reaches main
// through the pull request, which closed the issue; the issue's title
// and body, in mozi's prompt, reached the model through the CLI; every
// coder run that ended on its own succeeded, and mozi recorded exactly
// the tokens (and cost) the model reported to the CLI; the model saw no
// more runs than mozi recorded; and no two runs of one agent overlapped,
// neither in the agent program's lock nor in mozi's records of the runs.
//
// Without a CLI its subtest skips, or fails under MOZI_REQUIRE_AGENT_CLIS=1.
func TestE2ERealCLI(t *testing.T) {
	t.Parallel()
	for _, preset := range []string{"claude-code", "codex", "opencode"} {
		t.Run(preset, func(t *testing.T) {
			t.Parallel()
			cli := agenttest.FindCLI(t, preset)
			script := agenttest.Script{
				File: modelFile, Content: "written by the " + preset + " CLI's shell tool\n",
				Then:   `"$HOME/bin/mozi-e2e-agent"`,
				Answer: "Done: the work is pushed and reported.",
				Tool:   agenttest.Usage{Input: 1200, CacheRead: 300, CacheWrite: 100, Output: 40},
				Final:  agenttest.Usage{Input: 1500, CacheRead: 200, Output: 25},
			}
			model := agenttest.NewServer(t, script)
			agents := reviewRoundAgents(preset)
			agents[0].env["E2E_MODEL_FILE"] = modelFile
			// A CLI starts in seconds, but on a loaded machine opencode
			// took 80 s to get to its first model call.
			agents[0].timeout = 5 * time.Minute
			w := newWorld(t, worldOptions{agents: agents, model: model, path: cli.PATH})
			t.Cleanup(func() {
				if t.Failed() {
					logToolResults(t, model)
				}
			})
			coder := w.login("coder")

			title, body := "Add a greeting for "+preset, "Please add a greeting file; "+preset+" does it."
			issue, pr := w.reviewRoundThenMerge(title, body, 10*time.Minute)
			w.checkRuns()
			w.waitRunsRecorded()
			w.checkAttemptsApart()
			require.Empty(t, model.Errors(), "the fake model could not answer the CLI")

			// What the CLI's shell call wrote is on main, through the
			// pull request that closed the issue.
			assert.Equal(t, script.Content, w.fileOnMain(modelFile))
			assert.Contains(t, pr.Body, fmt.Sprintf("Closes #%d", issue))
			var state struct{ State string }
			w.call(w.human, http.MethodGet, fmt.Sprintf("/repos/%s/issues/%d", w.repo, issue), nil, &state)
			assert.Equal(t, "closed", state.State)
			reports := w.commentsBy(issue, coder)
			require.Len(t, reports, 1)
			assert.True(t, strings.HasPrefix(reports[0].Body, "[Action Report]"), reports[0].Body)
			assert.Contains(t, reports[0].Body, fmt.Sprintf("**PR**: #%d", pr.Number))

			// The first tool call is the assigned issue's run: its
			// prompt went through the CLI to the model.
			var tools, finals int
			for _, r := range model.Requests() {
				switch r.Turn {
				case agenttest.TurnTool:
					if tools == 0 {
						assert.Contains(t, string(r.Body), title, "the first run's model request")
						assert.Contains(t, string(r.Body), body, "the first run's model request")
					}
					tools++
				case agenttest.TurnFinal:
					finals++
				}
			}

			// Each coder run asked the model for its tool call once and,
			// unless mozi stopped it first, for its answer; mozi read the
			// usage the model reported from the CLI's output.
			var succeeded, attempts int
			for _, tk := range w.tasksWhere(func(t task.Task) bool { return t.Agent == coder }) {
				for _, a := range w.attemptsOf(tk.ID) {
					attempts++
					what := fmt.Sprintf("task %d (%s) attempt %d: %s %s", tk.ID, tk.ActionType, a.Attempt, a.Outcome, a.Error)
					if a.Outcome != task.AttemptSucceeded {
						// The approval's review_result ends with the merge,
						// which may come while its run is going.
						assert.True(t, tk.ActionType == task.ActionReviewResult && tk.Meta.ReviewState == "approved" &&
							a.Outcome == "stopped", what)
						continue
					}
					succeeded++
					assert.Equal(t, script.TokensIn(agenttest.OpenAIWire(preset)), a.TokensIn, "tokens in of "+what)
					assert.Equal(t, script.TokensOut(), a.TokensOut, "tokens out of "+what)
					if preset == "codex" {
						assert.Nil(t, a.CostUSD, "codex reports no cost: "+what)
					} else if assert.NotNil(t, a.CostUSD, what) {
						assert.InDelta(t, script.Cost(), *a.CostUSD, 1e-9, what)
					}
				}
			}
			// issue_assigned, the changes' review_result, review_merged.
			assert.GreaterOrEqual(t, succeeded, 3, "the coder's runs that succeeded")
			assert.True(t, succeeded <= finals && finals <= tools && tools <= attempts,
				"%d of the coder's %d runs succeeded; the model made %d tool calls and answered %d tool results",
				succeeded, attempts, tools, finals)
		})
	}
}

// fileOnMain is a file's content on the main branch.
func (w *world) fileOnMain(path string) string {
	w.t.Helper()
	var file struct{ Content string }
	w.call(w.human, http.MethodGet, fmt.Sprintf("/repos/%s/contents/%s?ref=main", w.repo, path), nil, &file)
	data, err := base64.StdEncoding.DecodeString(file.Content)
	require.NoError(w.t, err)
	return string(data)
}

// logToolResults logs the tool results the model got: there is what the
// agent program printed inside the CLI.
func logToolResults(t *testing.T, model *agenttest.Server) {
	for _, r := range model.Requests() {
		if r.Turn != agenttest.TurnFinal && r.Turn != agenttest.TurnPoll {
			continue
		}
		var body any
		if json.Unmarshal(r.Body, &body) != nil {
			continue
		}
		for _, out := range toolOutputs(body) {
			t.Logf("a tool result the model got:\n%s", out)
		}
	}
}

// toolOutputs finds the tool results in a model request: Anthropic's
// tool_result blocks, OpenAI's function_call_output items.
func toolOutputs(v any) []string {
	var out []string
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			out = append(out, toolOutputs(e)...)
		}
	case map[string]any:
		switch v["type"] {
		case "tool_result":
			return []string{fmt.Sprint(v["content"])}
		case "function_call_output":
			return []string{fmt.Sprint(v["output"])}
		}
		for _, e := range v {
			out = append(out, toolOutputs(e)...)
		}
	}
	return out
}
