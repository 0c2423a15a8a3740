package agenttest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// TurnLimited is a model request refused with the usage limit
// (Script.Limit).
const TurnLimited = "limited"

// Limit makes the server answer model requests the way the provider does
// when the account's usage limit is reached: HTTP 429 with the reset time
// where each provider puts it.
//
//   - Anthropic (Claude Code): the unified rate-limit headers of a
//     subscription, anthropic-ratelimit-unified-status: rejected and
//     anthropic-ratelimit-unified-reset (unix seconds), retry-after, and a
//     rate_limit_error body.
//   - OpenAI Responses (codex): the ChatGPT backend's body,
//     {"error":{"type":"usage_limit_reached","resets_at":…,
//     "resets_in_seconds":…}}.
type Limit struct {
	// Requests is how many model requests are refused, from the first;
	// after them the script runs as usual.
	Requests int
	// Reset is when the limit resets; zero: the answer gives no reset.
	Reset time.Time
	// ResetIn, instead, puts the reset this long after the first refusal
	// (a test does not know when its agent will first ask).
	ResetIn time.Duration
}

// LimitReset returns the reset the server gave (zero before the first
// refusal, or when it gives none).
func (f *Server) LimitReset() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reset
}

// limited answers a model request with the usage limit when the script's
// Limit still refuses requests, and reports whether it did.
func (f *Server) limited(w http.ResponseWriter, req *Request, openAI bool) bool {
	l := f.script.Limit
	if l == nil {
		return false
	}
	f.mu.Lock()
	refuse := f.refused < l.Requests
	if refuse {
		f.refused++
		switch {
		case !l.Reset.IsZero():
			f.reset = l.Reset
		case l.ResetIn > 0 && f.reset.IsZero():
			// The providers give whole seconds.
			f.reset = time.Now().Add(l.ResetIn).Truncate(time.Second)
		}
	}
	reset := f.reset
	f.mu.Unlock()
	if !refuse {
		return false
	}
	req.Turn = TurnLimited
	f.record(*req)
	secs := int64(0)
	if !reset.IsZero() {
		secs = max(int64(time.Until(reset).Round(time.Second)/time.Second), 0)
	}
	w.Header().Set("Content-Type", "application/json")
	var body map[string]any
	if openAI {
		e := map[string]any{"type": "usage_limit_reached", "message": "The usage limit has been reached", "plan_type": "plus"}
		if !reset.IsZero() {
			e["resets_at"], e["resets_in_seconds"] = reset.Unix(), secs
		}
		body = map[string]any{"error": e}
	} else {
		h := w.Header()
		h.Set("anthropic-ratelimit-unified-status", "rejected")
		h.Set("anthropic-ratelimit-unified-representative-claim", "five_hour")
		h.Set("x-should-retry", "false")
		if !reset.IsZero() {
			h.Set("anthropic-ratelimit-unified-reset", strconv.FormatInt(reset.Unix(), 10))
			h.Set("retry-after", strconv.FormatInt(secs, 10))
		}
		body = map[string]any{"type": "error", "error": map[string]any{"type": "rate_limit_error",
			"message": "This request would exceed your account's rate limit. Please try again later."}}
	}
	w.WriteHeader(http.StatusTooManyRequests)
	_ = json.NewEncoder(w).Encode(body)
	return true
}
