package agenttest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

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
	}
	f.mu.Unlock()
	if !refuse {
		return false
	}
	req.Turn = TurnLimited
	f.record(*req)
	secs := int64(0)
	if !l.Reset.IsZero() {
		secs = max(int64(time.Until(l.Reset).Round(time.Second)/time.Second), 0)
	}
	w.Header().Set("Content-Type", "application/json")
	var body map[string]any
	if openAI {
		e := map[string]any{"type": "usage_limit_reached", "message": "The usage limit has been reached", "plan_type": "plus"}
		if !l.Reset.IsZero() {
			e["resets_at"], e["resets_in_seconds"] = l.Reset.Unix(), secs
		}
		body = map[string]any{"error": e}
	} else {
		h := w.Header()
		h.Set("anthropic-ratelimit-unified-status", "rejected")
		h.Set("anthropic-ratelimit-unified-representative-claim", "five_hour")
		h.Set("x-should-retry", "false")
		if !l.Reset.IsZero() {
			h.Set("anthropic-ratelimit-unified-reset", strconv.FormatInt(l.Reset.Unix(), 10))
			h.Set("retry-after", strconv.FormatInt(secs, 10))
		}
		body = map[string]any{"type": "error", "error": map[string]any{"type": "rate_limit_error",
			"message": "This request would exceed your account's rate limit. Please try again later."}}
	}
	w.WriteHeader(http.StatusTooManyRequests)
	_ = json.NewEncoder(w).Encode(body)
	return true
}
