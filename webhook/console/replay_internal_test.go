package console

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReplayRendersStructuredOutputAsSteps(t *testing.T) {
	tests := []struct {
		name string
		log  string
		want []step
	}{
		{
			name: "claude stream-json: a tool's result folds into its call",
			log: `{"type":"system","subtype":"init","model":"x"}
{"type":"assistant","message":{"content":[{"type":"text","text":"Reading the issue."},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]}}
{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"go.mod"}]}]}}
{"type":"result","subtype":"success","result":"Done.","total_cost_usd":0.0123}`,
			want: []step{
				{Kind: "message", Title: "assistant", Body: "Reading the issue."},
				{Kind: "tool", Title: "Bash", Body: `{"command":"ls"}`, Folded: "go.mod"},
				{Kind: "result", Title: "result ($0.0123)", Body: "Done."},
			},
		},
		{
			name: "codex exec --json",
			log: `{"type":"thread.started","thread_id":"x"}
{"type":"item.completed","item":{"id":"i0","type":"reasoning","text":"Plan"}}
{"type":"item.completed","item":{"id":"i1","type":"command_execution","command":"go test ./...","aggregated_output":"ok","exit_code":0}}
{"type":"item.completed","item":{"id":"i2","type":"agent_message","text":"Fixed."}}`,
			want: []step{
				{Kind: "message", Title: "thinking", Body: "Plan"},
				{Kind: "tool", Title: "command", Body: "go test ./...", Folded: "ok"},
				{Kind: "message", Title: "assistant", Body: "Fixed."},
			},
		},
		{
			name: "plain output: consecutive lines are one step",
			log:  "cloning\nbuilding\n{not json\n",
			want: []step{{Kind: "log", Body: "cloning\nbuilding\n{not json"}},
		},
		{
			name: "an unknown JSON event is shown as it is",
			log:  `{"type":"mystery","n":1}`,
			want: []step{{Kind: "log", Body: `{"n":1,"type":"mystery"}`}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, replay(tt.log))
		})
	}
}

// TestReplayOfRealTranscripts renders what the real CLIs printed (the
// recordings of spawner/testdata/usage: one shell call writing hello.txt,
// then an answer) as the steps a reader expects, with no event left as
// raw JSON.
func TestReplayOfRealTranscripts(t *testing.T) {
	for _, tc := range []struct {
		file string
		tool string
	}{
		{"claude-code-2.1.330.jsonl", "Bash"},
		{"codex-0.169.0.jsonl", "command"},
		{"opencode-1.18.33.jsonl", "bash"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("..", "..", "spawner", "testdata", "usage", tc.file))
			require.NoError(t, err)
			steps := replay(string(b))
			var tools, answers int
			for _, s := range steps {
				assert.NotContains(t, s.Body, `{"type":`, "an event left as raw JSON: %+v", s)
				switch {
				case s.Kind == "tool":
					tools++
					assert.Equal(t, tc.tool, s.Title)
					assert.Contains(t, s.Body, "hello.txt", "the call's arguments")
				case s.Kind == "message" && s.Title == "assistant" && s.Body == "Done: wrote hello.txt.":
					answers++
				}
			}
			assert.Equal(t, 1, tools, "%+v", steps)
			assert.Equal(t, 1, answers, "%+v", steps)
		})
	}
}
