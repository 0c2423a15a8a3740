package spawner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
)

// usageMeter reads token and cost usage from an agent's output, line by
// line, in the format its preset knows, and trips when a budget is spent.
// Any agent may also print a line "MOZI_USAGE {"tokens_in":…,
// "tokens_out":…,"cost_usd":…}" with its running totals.
//
// Tokens in count every input token the model read (cached or not), tokens
// out every token it wrote (reasoning included). What each format reports:
//
//   - claude-stream-json (Claude Code -p --output-format stream-json): every
//     content block of a message is a line of its own, all with the
//     message's usage as it stood at message_start, so a message counts
//     once, by its id, with its latest line's figures; the final result
//     line has the run's totals and cost and replaces the running count.
//   - codex-json (codex exec --json): turn.completed has a turn's tokens
//     (input_tokens includes cached ones); no cost. A turn reports only
//     when it ends, so a budget cannot stop a codex turn midway.
//   - opencode-json (opencode run --format json): step_finish has one model
//     call's tokens and cost.
//   - openclaw-json (openclaw agent exec --json): one JSON envelope, pretty
//     printed over many lines, at the end of the run, with the run's
//     tokens and costUsd.
type usageMeter struct {
	format    string
	maxCost   float64
	maxTokens int64
	exceeded  chan struct{}

	mu        sync.Mutex
	partial   []byte
	tokensIn  int64
	tokensOut int64
	cost      float64
	tripped   bool
	// messages are Claude Code's messages counted so far, by id.
	messages map[string]tokens
	// envelope collects a multi-line JSON document (openclaw-json).
	envelope []byte
}

func newUsageMeter(format string, maxCost float64, maxTokens int64) *usageMeter {
	return &usageMeter{format: format, maxCost: maxCost, maxTokens: maxTokens, exceeded: make(chan struct{}),
		messages: map[string]tokens{}}
}

// maxLine bounds a line (or a multi-line envelope) kept for parsing: a
// longer one is not usage.
const maxLine = 1 << 20

func (u *usageMeter) Write(p []byte) (int, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	// Only the new bytes can end the kept partial line: a long line that
	// comes in small pieces is not scanned again from its start each time.
	from := len(u.partial)
	u.partial = append(u.partial, p...)
	for {
		i := bytes.IndexByte(u.partial[from:], '\n')
		if i < 0 {
			break
		}
		i += from
		u.line(u.partial[:i])
		u.partial, from = u.partial[i+1:], 0
	}
	if len(u.partial) > maxLine {
		u.partial = u.partial[:0]
	}
	u.check()
	return len(p), nil
}

func (u *usageMeter) line(raw []byte) {
	raw = bytes.TrimSuffix(raw, []byte("\r"))
	if u.format == UsageOpenclawJSON && u.collect(raw) {
		return
	}
	l := bytes.TrimSpace(raw)
	if rest, ok := bytes.CutPrefix(l, []byte("MOZI_USAGE ")); ok {
		var v struct {
			TokensIn  int64   `json:"tokens_in"`
			TokensOut int64   `json:"tokens_out"`
			CostUSD   float64 `json:"cost_usd"`
		}
		if json.Unmarshal(rest, &v) == nil {
			u.tokensIn, u.tokensOut, u.cost = v.TokensIn, v.TokensOut, v.CostUSD
		}
		return
	}
	if len(l) == 0 || l[0] != '{' {
		return
	}
	switch u.format {
	case UsageClaudeStreamJSON:
		u.claude(l)
	case UsageCodexJSON:
		var v struct {
			Type  string `json:"type"`
			Usage *struct {
				InputTokens  int64 `json:"input_tokens"` // cached ones included
				OutputTokens int64 `json:"output_tokens"`
			} `json:"usage"`
		}
		if json.Unmarshal(l, &v) == nil && v.Type == "turn.completed" && v.Usage != nil {
			u.tokensIn += v.Usage.InputTokens
			u.tokensOut += v.Usage.OutputTokens
		}
	case UsageOpencodeJSON:
		var v struct {
			Type string `json:"type"`
			Part struct {
				Cost   float64 `json:"cost"`
				Tokens *struct {
					Input     int64 `json:"input"` // cached ones excluded
					Output    int64 `json:"output"`
					Reasoning int64 `json:"reasoning"` // not in output
					Cache     struct {
						Read  int64 `json:"read"`
						Write int64 `json:"write"`
					} `json:"cache"`
				} `json:"tokens"`
			} `json:"part"`
		}
		if json.Unmarshal(l, &v) == nil && v.Type == "step_finish" && v.Part.Tokens != nil {
			t := v.Part.Tokens
			u.tokensIn += t.Input + t.Cache.Read + t.Cache.Write
			u.tokensOut += t.Output + t.Reasoning
			u.cost += v.Part.Cost
		}
	case UsageOpenclawJSON:
		u.openclaw(l)
	}
}

// claude reads a line of Claude Code's stream-json.
func (u *usageMeter) claude(l []byte) {
	var v struct {
		Type       string                `json:"type"`
		Cost       float64               `json:"total_cost_usd"`
		Usage      *tokens               `json:"usage"`
		ModelUsage map[string]modelUsage `json:"modelUsage"`
		Message    *struct {
			ID    string  `json:"id"`
			Usage *tokens `json:"usage"`
		} `json:"message"`
	}
	if json.Unmarshal(l, &v) != nil {
		return
	}
	switch {
	case v.Type == "result" && (v.Usage != nil || len(v.ModelUsage) > 0):
		// The run's totals. modelUsage covers every model the run used
		// (what the cost is made of); usage alone the main one.
		in, out := int64(0), int64(0)
		for _, m := range v.ModelUsage {
			in += m.InputTokens + m.CacheReadInputTokens + m.CacheCreationInputTokens
			out += m.OutputTokens
		}
		if len(v.ModelUsage) == 0 {
			in, out = v.Usage.in(), v.Usage.OutputTokens
		}
		u.tokensIn, u.tokensOut = in, out
		u.cost = max(u.cost, v.Cost)
	case v.Type == "assistant" && v.Message != nil && v.Message.Usage != nil:
		m := *v.Message.Usage
		if v.Message.ID != "" {
			prev := u.messages[v.Message.ID]
			u.messages[v.Message.ID] = m
			m.InputTokens -= prev.InputTokens
			m.CacheReadTokens -= prev.CacheReadTokens
			m.CacheCreationTokens -= prev.CacheCreationTokens
			m.OutputTokens -= prev.OutputTokens
		}
		u.tokensIn += m.in()
		u.tokensOut += m.OutputTokens
	}
}

// collect gathers openclaw's pretty-printed envelope, from a line "{" to a
// line "}", and reads it; it reports whether the line was part of one.
func (u *usageMeter) collect(raw []byte) bool {
	switch {
	case u.envelope == nil && string(raw) == "{":
		u.envelope = append(make([]byte, 0, 4096), raw...)
	case u.envelope != nil:
		u.envelope = append(append(u.envelope, '\n'), raw...)
		if string(raw) == "}" {
			u.openclaw(u.envelope)
			u.envelope = nil
		} else if len(u.envelope) > maxLine {
			u.envelope = nil
		}
	default:
		return false
	}
	return true
}

// openclaw reads the envelope of openclaw agent exec --json.
func (u *usageMeter) openclaw(doc []byte) {
	var v struct {
		CostUSD *float64 `json:"costUsd"`
		Usage   *struct {
			Input      int64 `json:"input"` // cached ones excluded
			Output     int64 `json:"output"`
			CacheRead  int64 `json:"cacheRead"`
			CacheWrite int64 `json:"cacheWrite"`
		} `json:"usage"`
	}
	if json.Unmarshal(doc, &v) != nil || v.Usage == nil {
		return
	}
	u.tokensIn = v.Usage.Input + v.Usage.CacheRead + v.Usage.CacheWrite
	u.tokensOut = v.Usage.Output
	if v.CostUSD != nil {
		u.cost = *v.CostUSD
	}
}

// tokens is Anthropic's usage (Claude Code's assistant and result lines).
type tokens struct {
	InputTokens         int64 `json:"input_tokens"`
	CacheReadTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationTokens int64 `json:"cache_creation_input_tokens"`
	OutputTokens        int64 `json:"output_tokens"`
}

func (t *tokens) in() int64 { return t.InputTokens + t.CacheReadTokens + t.CacheCreationTokens }

// modelUsage is one model's share of a Claude Code run.
type modelUsage struct {
	InputTokens              int64 `json:"inputTokens"`
	OutputTokens             int64 `json:"outputTokens"`
	CacheReadInputTokens     int64 `json:"cacheReadInputTokens"`
	CacheCreationInputTokens int64 `json:"cacheCreationInputTokens"`
}

func (u *usageMeter) check() {
	if u.tripped {
		return
	}
	if (u.maxCost > 0 && u.cost > u.maxCost) || (u.maxTokens > 0 && u.tokensIn+u.tokensOut > u.maxTokens) {
		u.tripped = true
		close(u.exceeded)
	}
}

func (u *usageMeter) totals() (int64, int64, float64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.tokensIn, u.tokensOut, u.cost
}

func (u *usageMeter) reason() string {
	in, out, cost := u.totals()
	var parts []string
	if u.maxCost > 0 && cost > u.maxCost {
		parts = append(parts, fmt.Sprintf("cost $%.2f over its $%.2f budget", cost, u.maxCost))
	}
	if u.maxTokens > 0 && in+out > u.maxTokens {
		parts = append(parts, fmt.Sprintf("%d tokens over its %d budget", in+out, u.maxTokens))
	}
	return "killed: " + strings.Join(parts, ", ")
}
