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
}

func newUsageMeter(format string, maxCost float64, maxTokens int64) *usageMeter {
	return &usageMeter{format: format, maxCost: maxCost, maxTokens: maxTokens, exceeded: make(chan struct{})}
}

func (u *usageMeter) Write(p []byte) (int, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.partial = append(u.partial, p...)
	for {
		i := bytes.IndexByte(u.partial, '\n')
		if i < 0 {
			break
		}
		u.line(u.partial[:i])
		u.partial = u.partial[i+1:]
	}
	if len(u.partial) > 1<<20 { // a line that long is not usage
		u.partial = u.partial[:0]
	}
	u.check()
	return len(p), nil
}

func (u *usageMeter) line(l []byte) {
	l = bytes.TrimSpace(l)
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
	case "claude-stream-json":
		// Assistant messages carry per-turn usage; the final result the
		// totals and the cost.
		var v struct {
			Type    string  `json:"type"`
			Cost    float64 `json:"total_cost_usd"`
			Usage   *tokens `json:"usage"`
			Message *struct {
				Usage *tokens `json:"usage"`
			} `json:"message"`
		}
		if json.Unmarshal(l, &v) != nil {
			return
		}
		switch {
		case v.Type == "result" && v.Usage != nil:
			u.tokensIn, u.tokensOut = v.Usage.in(), v.Usage.OutputTokens
			u.cost = max(u.cost, v.Cost)
		case v.Type == "assistant" && v.Message != nil && v.Message.Usage != nil:
			u.tokensIn += v.Message.Usage.in()
			u.tokensOut += v.Message.Usage.OutputTokens
		}
	case "codex-json":
		var v struct {
			Type  string  `json:"type"`
			Usage *tokens `json:"usage"`
		}
		if json.Unmarshal(l, &v) == nil && v.Type == "turn.completed" && v.Usage != nil {
			u.tokensIn += v.Usage.in()
			u.tokensOut += v.Usage.OutputTokens
		}
	}
}

type tokens struct {
	InputTokens         int64 `json:"input_tokens"`
	CacheReadTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationTokens int64 `json:"cache_creation_input_tokens"`
	OutputTokens        int64 `json:"output_tokens"`
}

func (t *tokens) in() int64 { return t.InputTokens + t.CacheReadTokens + t.CacheCreationTokens }

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

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
