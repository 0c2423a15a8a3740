package spawner

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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

// FuzzUsageMeter reads, in each format, a run whose usage events the
// fuzzer chooses, mixed with output that is not usage and written in
// pieces of the size it chooses, and holds the meter to the events' own
// sum: its totals are what the run used and never go down as output
// arrives (from zero: never negative), and a budget of exactly the run's
// tokens trips only one token lower. A meter that drops an event, counts
// one twice or loses a line split across writes fails. The same bytes
// read raw, as any agent's output, must not break the meter nor read
// differently when split.
func FuzzUsageMeter(f *testing.F) {
	for i, name := range []string{"claude-code-2.1.330.jsonl", "codex-0.169.0.jsonl", "opencode-1.18.33.jsonl", "openclaw-2026.9.6.txt"} {
		data, err := os.ReadFile(filepath.Join("testdata", "usage", name))
		require.NoError(f, err)
		f.Add(uint8(i), uint8(6), data)
	}
	// A script per format using each of its kinds of line (see
	// usageRunFrom; 0x80 ends a line in CRLF), in one-, two- and
	// seven-byte pieces.
	scripts := map[string][][]byte{
		UsageClaudeStreamJSON: {
			// Message 1, again with more output, a tool result, message 2,
			// message 1 repeated as it stood, the init line.
			{0, 1, 10, 0, 0, 2, 0x80, 1, 5, 1, 1, 3, 1, 0, 2, 7, 0, 9, 1, 0, 1, 0, 0, 0, 0, 2},
			// The same, ended by a result with modelUsage, then without.
			{0, 1, 10, 0, 0, 2, 0x80, 1, 5, 1, 1, 3, 1, 0, 2, 7, 0, 9, 1, 0, 1, 0, 0, 0, 0, 3, 20, 4, 50, 1},
			{0, 1, 10, 0, 0, 2, 0, 1, 5, 1, 1, 3, 0, 2, 7, 0, 9, 1, 3, 20, 4, 50, 0},
		},
		UsageCodexJSON: {
			// Turns around an agent message, a turn start and a warning.
			{0, 0, 100, 0, 10, 5, 2, 1, 2, 3, 0x80, 1, 0, 0, 50, 0, 0, 0, 0, 9, 0, 1, 1, 1},
		},
		UsageOpencodeJSON: {
			// Two steps around text, a step start and a tool's part.
			{0, 0, 100, 0, 10, 5, 40, 2, 7, 1, 2, 3, 0x80, 0, 200, 0, 20, 0, 0, 0, 3},
		},
		UsageOpenclawJSON: {
			// Log lines, a pretty printed envelope, a compact one, the
			// compact one again.
			{0, 1, 0, 100, 5, 1, 10, 30, 0, 2, 0, 50, 5, 0, 5, 20, 0x80},
			// A pretty printed envelope in CRLF lines.
			{0x82, 0, 100, 5, 1, 10, 30},
		},
		"": {
			// Running totals around a JSON line and text.
			{0, 0, 5, 0, 6, 10, 1, 2, 0x81, 0, 50, 0, 60, 1, 0, 0, 7, 0, 8, 0},
		},
	}
	for format, name := range usageFormats {
		for _, script := range scripts[name] {
			for _, chunk := range []uint8{0, 1, 6} {
				f.Add(uint8(format), chunk, script)
			}
		}
	}
	f.Fuzz(func(t *testing.T, format, chunk uint8, script []byte) {
		run := usageRunFrom(usageFormats[int(format)%len(usageFormats)], script)
		output := []byte(strings.Join(run.lines, ""))
		u := newUsageMeter(run.format, 0, run.in+run.out)
		var in, out int64
		var cost float64
		for piece := range slicesChunk(output, int(chunk)+1) {
			n, err := u.Write(piece)
			require.NoError(t, err)
			require.Equal(t, len(piece), n)
			nowIn, nowOut, nowCost := u.totals()
			require.GreaterOrEqual(t, nowIn, in, "tokens in went down")
			require.GreaterOrEqual(t, nowOut, out, "tokens out went down")
			require.GreaterOrEqual(t, nowCost, cost, "cost went down")
			in, out, cost = nowIn, nowOut, nowCost
		}
		require.Equal(t, run.in, in, "tokens in of %s", run.format)
		require.Equal(t, run.out, out, "tokens out of %s", run.format)
		require.InDelta(t, run.cost, cost, 1e-9, "cost of %s", run.format)
		require.False(t, u.tripped, "a budget of exactly the run's %d tokens is not exceeded", run.in+run.out)
		if total := run.in + run.out; total > 1 {
			tight := newUsageMeter(run.format, 0, total-1)
			_, _ = tight.Write(output)
			select {
			case <-tight.exceeded:
			default:
				t.Fatalf("a budget of %d tokens is not tripped by a run of %d", total-1, total)
			}
			require.Contains(t, tight.reason(), fmt.Sprintf("%d tokens over its %d budget", total, total-1))
		}

		for _, format := range usageFormats {
			whole := newUsageMeter(format, 1, 1)
			_, _ = whole.Write(script)
			_ = whole.reason()
			// The meter looks for a line's end from the line's start on
			// every write, so a long line in tiny pieces costs time
			// quadratic in its length (and one over maxLine is dropped
			// where the writes split it): split only short output.
			if len(script) > 64<<10 {
				continue
			}
			pieces := newUsageMeter(format, 1, 1)
			for piece := range slicesChunk(script, int(chunk)+1) {
				_, _ = pieces.Write(piece)
			}
			wIn, wOut, wCost := whole.totals()
			pIn, pOut, pCost := pieces.totals()
			require.Equal(t, []any{wIn, wOut, wCost}, []any{pIn, pOut, pCost},
				"%s: the same output read whole and in pieces of %d", format, int(chunk)+1)
		}
	})
}

// usageFormats are the formats a meter reads; "" is an agent without a
// preset's format, which only MOZI_USAGE lines report for.
var usageFormats = []string{UsageClaudeStreamJSON, UsageCodexJSON, UsageOpencodeJSON, UsageOpenclawJSON, ""}

// usageRun is an agent's output (lines ending in a newline) and the usage
// it reports, computed independently of the meter.
type usageRun struct {
	format  string
	lines   []string
	in, out int64
	cost    float64
}

// usageRunFrom makes a run in format from a fuzzer's script: each line's
// kind and figures are the script's next bytes (zero once it is spent).
// A line is a usage event or output that must not count; the figures of
// every event are non-negative and the running totals a format reports
// grow, as real agents' do.
func usageRunFrom(format string, script []byte) usageRun {
	next := func() int64 {
		if len(script) == 0 {
			return 0
		}
		b := script[0]
		script = script[1:]
		return int64(b)
	}
	wide := func() int64 { return next()<<8 | next() }
	price := func() float64 { return float64(next()) / 10000 }
	run := usageRun{format: format}
	add := func(op int64, line string) {
		end := "\n"
		if op&0x80 != 0 {
			end = "\r\n" // an agent on a terminal, or on Windows
		}
		run.lines = append(run.lines, line+end)
	}
	usd := func(c float64) string { return strconv.FormatFloat(c, 'f', -1, 64) }

	// Claude Code repeats a message's usage on each of its lines, as it
	// stood so far: a message counts once, with its latest figures.
	var messages [4]tokens
	// openclaw's envelope and MOZI_USAGE report the run's running totals.
	var runIn, runCacheRead, runCacheWrite, runOut int64
	var runCost float64
	for i := 0; len(script) > 0 && i < 200; i++ {
		op := next()
		switch format {
		case UsageClaudeStreamJSON:
			switch op % 4 {
			case 0:
				id := next() % int64(len(messages))
				m := &messages[id]
				m.InputTokens += next()
				m.CacheReadTokens += next()
				m.CacheCreationTokens += next()
				m.OutputTokens += next()
				add(op, fmt.Sprintf(`{"type":"assistant","message":{"id":"msg_%d","role":"assistant","content":[{"type":"text","text":"usage"}],`+
					`"usage":{"input_tokens":%d,"cache_read_input_tokens":%d,"cache_creation_input_tokens":%d,"output_tokens":%d}}}`,
					id, m.InputTokens, m.CacheReadTokens, m.CacheCreationTokens, m.OutputTokens))
				run.in, run.out = 0, 0
				for _, m := range messages {
					run.in += m.in()
					run.out += m.OutputTokens
				}
			case 1:
				add(op, `{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"{\"usage\":{\"input_tokens\":9}}"}]}}`)
			case 2:
				add(op, `{"type":"system","subtype":"init","model":"claude-sonnet-4-5"}`)
			case 3:
				// The result has the run's totals, over every model it
				// used, and ends the run.
				other, otherOut := next(), next()
				run.cost = price()
				main := tokens{}
				for _, m := range messages {
					main.InputTokens += m.InputTokens
					main.CacheReadTokens += m.CacheReadTokens
					main.CacheCreationTokens += m.CacheCreationTokens
					main.OutputTokens += m.OutputTokens
				}
				usage := fmt.Sprintf(`"usage":{"input_tokens":%d,"cache_read_input_tokens":%d,"cache_creation_input_tokens":%d,"output_tokens":%d}`,
					main.InputTokens, main.CacheReadTokens, main.CacheCreationTokens, main.OutputTokens)
				if next()%2 == 0 {
					// Without modelUsage the usage, the main model's, is all.
					main.InputTokens += other
					main.OutputTokens += otherOut
					usage = fmt.Sprintf(`"usage":{"input_tokens":%d,"cache_read_input_tokens":%d,"cache_creation_input_tokens":%d,"output_tokens":%d}`,
						main.InputTokens, main.CacheReadTokens, main.CacheCreationTokens, main.OutputTokens)
				} else {
					usage += fmt.Sprintf(`,"modelUsage":{"claude-sonnet-4-5":{"inputTokens":%d,"outputTokens":%d,"cacheReadInputTokens":%d,"cacheCreationInputTokens":%d},`+
						`"claude-haiku-4-5":{"inputTokens":%d,"outputTokens":%d}}`,
						main.InputTokens, main.OutputTokens, main.CacheReadTokens, main.CacheCreationTokens, other, otherOut)
					main.InputTokens += other
					main.OutputTokens += otherOut
				}
				run.in, run.out = main.in(), main.OutputTokens
				add(op, fmt.Sprintf(`{"type":"result","subtype":"success","total_cost_usd":%s,%s}`, usd(run.cost), usage))
				return run
			}
		case UsageCodexJSON:
			switch op % 4 {
			case 0:
				// input_tokens includes the cached ones; output_tokens the
				// reasoning ones.
				in, out := wide(), wide()
				cached, reasoning := min(next(), in), min(next(), out)
				add(op, fmt.Sprintf(`{"type":"turn.completed","usage":{"input_tokens":%d,"cached_input_tokens":%d,"output_tokens":%d,"reasoning_output_tokens":%d}}`,
					in, cached, out, reasoning))
				run.in += in
				run.out += out
			case 1:
				add(op, fmt.Sprintf(`{"type":"item.completed","item":{"id":"item_%d","type":"agent_message","text":"{\"usage\":{\"input_tokens\":9}}"}}`, i))
			case 2:
				add(op, `{"type":"turn.started"}`)
			case 3:
				add(op, `WARNING: proceeding, even though we could not create PATH aliases`)
			}
		case UsageOpencodeJSON:
			switch op % 4 {
			case 0:
				// input excludes the cached tokens; reasoning is not in
				// output.
				in, out, reasoning, read, write, cost := wide(), wide(), next(), next(), next(), price()
				add(op, fmt.Sprintf(`{"type":"step_finish","part":{"type":"step-finish","tokens":{"input":%d,"output":%d,"reasoning":%d,"cache":{"read":%d,"write":%d}},"cost":%s}}`,
					in, out, reasoning, read, write, usd(cost)))
				run.in += in + read + write
				run.out += out + reasoning
				run.cost += cost
			case 1:
				add(op, `{"type":"text","part":{"type":"text","text":"step_finish"}}`)
			case 2:
				add(op, `{"type":"step_start","part":{"type":"step-start"}}`)
			case 3:
				add(op, `{"type":"tool_use","part":{"type":"tool","tokens":{"input":9,"output":9},"cost":1}}`)
			}
		case UsageOpenclawJSON:
			switch op % 3 {
			case 0:
				add(op, `[agents/agent-command] [agent] run ended with stopReason=stop`)
			case 1, 2:
				runIn += wide()
				runCacheRead += next()
				runCacheWrite += next()
				runOut += next()
				runCost += price()
				usage := fmt.Sprintf(`"usage": {"input": %d, "output": %d, "cacheRead": %d, "cacheWrite": %d, "cost": {"total": 1}}`,
					runIn, runOut, runCacheRead, runCacheWrite)
				if op%3 == 1 {
					// Pretty printed over many lines, as it comes.
					for _, l := range []string{"{", `  "ok": true,`, `  "payloads": [`, `    {"text": "usage"}`, `  ],`,
						"  " + usage + ",", `  "costUsd": ` + usd(runCost), "}"} {
						add(op, l)
					}
				} else {
					add(op, `{"ok": true, `+usage+`, "costUsd": `+usd(runCost)+`}`)
				}
				run.in, run.out, run.cost = runIn+runCacheRead+runCacheWrite, runOut, runCost
			}
		case "":
			switch op % 3 {
			case 0:
				runIn += wide()
				runOut += wide()
				runCost += price()
				add(op, fmt.Sprintf(`MOZI_USAGE {"tokens_in":%d,"tokens_out":%d,"cost_usd":%s}`, runIn, runOut, usd(runCost)))
				run.in, run.out, run.cost = runIn, runOut, runCost
			case 1:
				add(op, `{"type":"turn.completed","usage":{"input_tokens":900,"output_tokens":200}}`)
			case 2:
				add(op, `working on it: MOZI_USAGE is printed at the start of a line`)
			}
		}
	}
	return run
}
