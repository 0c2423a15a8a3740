package spawner

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The real output of each CLI (testdata/usage/README.md says how it was
// recorded) gives its exact totals, and the running count never goes over
// them on the way: a budget at the run's real total is never tripped.
func TestUsageFromRecordedOutput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file    string
		format  string
		in, out int64
		cost    float64
	}{
		{"claude-code-2.1.330.jsonl", UsageClaudeStreamJSON, 3300, 65, 0.0096},
		{"codex-0.169.0.jsonl", UsageCodexJSON, 3200, 65, 0},
		{"opencode-1.18.33.jsonl", UsageOpencodeJSON, 3300, 65, 0.0096},
		{"openclaw-2026.9.6.txt", UsageOpenclawJSON, 3300, 65, 0.0096},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(filepath.Join("testdata", "usage", tt.file))
			require.NoError(t, err)

			u := newUsageMeter(tt.format, 0, tt.in+tt.out)
			var peak int64
			for _, line := range bytes.SplitAfter(data, []byte("\n")) {
				_, err := u.Write(line)
				require.NoError(t, err)
				in, out, _ := u.totals()
				peak = max(peak, in+out)
			}
			in, out, cost := u.totals()
			require.Equal(t, tt.in, in, "tokens in")
			require.Equal(t, tt.out, out, "tokens out")
			require.InDelta(t, tt.cost, cost, 1e-9)
			require.LessOrEqual(t, peak, tt.in+tt.out, "the running count went over the real total")
			require.False(t, u.tripped, "a budget of exactly the real total is not exceeded")

			// The same output in odd chunks reads the same.
			c := newUsageMeter(tt.format, 0, 0)
			for chunk := range slicesChunk(data, 7) {
				_, _ = c.Write(chunk)
			}
			cin, cout, ccost := c.totals()
			require.Equal(t, []any{in, out, cost}, []any{cin, cout, ccost})
		})
	}
}

func slicesChunk(b []byte, n int) func(func([]byte) bool) {
	return func(yield func([]byte) bool) {
		for len(b) > 0 {
			k := min(n, len(b))
			if !yield(b[:k]) {
				return
			}
			b = b[k:]
		}
	}
}

func TestUsageFormats(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		format  string
		lines   []string
		in, out int64
		cost    float64
	}{
		{"claude: a message counts once, by its id, with its latest figures", UsageClaudeStreamJSON, []string{
			`{"type":"assistant","message":{"id":"m1","usage":{"input_tokens":1000,"cache_read_input_tokens":500,"output_tokens":1}}}`,
			`{"type":"assistant","message":{"id":"m1","usage":{"input_tokens":1000,"cache_read_input_tokens":500,"output_tokens":1}}}`,
			`{"type":"assistant","message":{"id":"m1","usage":{"input_tokens":1000,"cache_read_input_tokens":500,"output_tokens":80}}}`,
			`{"type":"assistant","message":{"id":"m2","usage":{"input_tokens":1200,"cache_creation_input_tokens":10,"output_tokens":5}}}`,
		}, 2710, 85, 0},
		{"claude: the result replaces the running count", UsageClaudeStreamJSON, []string{
			`{"type":"assistant","message":{"id":"m1","usage":{"input_tokens":10,"output_tokens":3}}}`,
			`{"type":"result","total_cost_usd":0.25,"usage":{"input_tokens":100,"cache_read_input_tokens":20,"output_tokens":30}}`,
		}, 120, 30, 0.25},
		{"claude: the result's modelUsage counts every model", UsageClaudeStreamJSON, []string{
			`{"type":"result","total_cost_usd":0.5,"usage":{"input_tokens":100,"output_tokens":30},"modelUsage":{` +
				`"claude-sonnet-4-5":{"inputTokens":100,"outputTokens":30,"cacheReadInputTokens":7,"cacheCreationInputTokens":3},` +
				`"claude-haiku-4-5":{"inputTokens":50,"outputTokens":5}}}`,
		}, 160, 35, 0.5},
		{"codex: turns add up; input includes cached", UsageCodexJSON, []string{
			`{"type":"turn.completed","usage":{"input_tokens":900,"cached_input_tokens":400,"output_tokens":200,"reasoning_output_tokens":50}}`,
			`{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"{\"usage\":1}"}}`,
			`{"type":"turn.completed","usage":{"input_tokens":100,"cached_input_tokens":0,"output_tokens":20}}`,
		}, 1000, 220, 0},
		{"opencode: steps add up; reasoning is output", UsageOpencodeJSON, []string{
			`{"type":"step_finish","part":{"tokens":{"input":100,"output":10,"reasoning":5,"cache":{"read":40,"write":2}},"cost":0.001}}`,
			`{"type":"text","part":{"text":"hi"}}`,
			`{"type":"step_finish","part":{"tokens":{"input":200,"output":20,"reasoning":0,"cache":{"read":0,"write":0}},"cost":0.002}}`,
		}, 342, 35, 0.003},
		{"openclaw: a compact envelope", UsageOpenclawJSON, []string{
			`{"ok":true,"usage":{"input":10,"output":2,"cacheRead":5,"cacheWrite":1,"total":18},"costUsd":0.01}`,
		}, 16, 2, 0.01},
		{"openclaw: a failed envelope without usage", UsageOpenclawJSON, []string{
			"{", `  "ok": false,`, `  "status": "error",`, `  "error": {`, `    "message": "boom"`, `  }`, "}",
		}, 0, 0, 0},
		{"any agent: MOZI_USAGE has running totals", "", []string{
			`MOZI_USAGE {"tokens_in":5,"tokens_out":6,"cost_usd":0.01}`,
			`MOZI_USAGE {"tokens_in":50,"tokens_out":60,"cost_usd":0.1}`,
			`{"type":"turn.completed","usage":{"input_tokens":900,"output_tokens":200}}`,
		}, 50, 60, 0.1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u := newUsageMeter(tt.format, 0, 0)
			_, err := u.Write([]byte(strings.Join(tt.lines, "\n") + "\n"))
			require.NoError(t, err)
			in, out, cost := u.totals()
			require.Equal(t, tt.in, in, "tokens in")
			require.Equal(t, tt.out, out, "tokens out")
			require.InDelta(t, tt.cost, cost, 1e-9)
		})
	}
}

// The run: summing Claude Code's repeated usage per line killed a
// run of 2,855 real tokens "at 4,103 over 3,500".
func TestClaudeRepeatedUsageDoesNotTripBudget(t *testing.T) {
	t.Parallel()
	u := newUsageMeter(UsageClaudeStreamJSON, 0, 3500)
	lines := []string{
		`{"type":"assistant","message":{"id":"a","usage":{"input_tokens":1248,"output_tokens":1}}}`,
		`{"type":"assistant","message":{"id":"a","usage":{"input_tokens":1248,"output_tokens":1}}}`,
		`{"type":"assistant","message":{"id":"b","usage":{"input_tokens":1500,"output_tokens":1}}}`,
		`{"type":"result","total_cost_usd":0.01,"usage":{"input_tokens":2748,"output_tokens":107}}`,
	}
	for _, l := range lines {
		_, _ = u.Write([]byte(l + "\n"))
		require.False(t, u.tripped, "tripped after %s", l)
	}
	in, out, _ := u.totals()
	require.Equal(t, int64(2855), in+out)
}

func FuzzUsageMeter(f *testing.F) {
	for _, name := range []string{"claude-code-2.1.330.jsonl", "codex-0.169.0.jsonl", "opencode-1.18.33.jsonl", "openclaw-2026.9.6.txt"} {
		data, err := os.ReadFile(filepath.Join("testdata", "usage", name))
		require.NoError(f, err)
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, format := range []string{UsageClaudeStreamJSON, UsageCodexJSON, UsageOpencodeJSON, UsageOpenclawJSON, ""} {
			u := newUsageMeter(format, 1, 1)
			_, err := u.Write(data)
			require.NoError(t, err)
			_ = u.reason()
		}
	})
}
