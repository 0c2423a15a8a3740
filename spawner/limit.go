package spawner

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// limitWatch reads an agent's output for the sign that its account hit a
// usage limit, and when it resets. What each CLI prints (recorded in
// testdata/limit):
//
//   - Claude Code (claude-stream-json), signed in with a subscription: a
//     rate_limit_event whose rate_limit_info has status "rejected" and
//     resetsAt (unix seconds), then an assistant line and a result line
//     with api_error "usage_limit_reached". With an API key the headers
//     are not read: api_error_status 429 and api_error_type
//     rate_limit_error, no reset.
//   - codex (codex-json): an error line and a turn.failed whose message
//     says "You've hit your usage limit" and, when the backend gave a
//     reset, "try again at 2:06 AM" (today) or "try again at Nov 26th,
//     2026 2:06 AM", in the local time zone and to the minute.
//   - opencode (opencode-json): nothing while it retries a 429 by itself
//     (five times, waiting the answer's retry-after, however long, else
//     2 s doubling); then an error line, an APIError with statusCode 429
//     and the provider's answer: responseHeaders (Anthropic's
//     anthropic-ratelimit-unified-reset) and responseBody (OpenAI's
//     usage_limit_reached with resets_at).
type limitWatch struct {
	format string
	now    func() time.Time

	mu      sync.Mutex
	partial []byte
	hit     bool
	reset   time.Time
}

func newLimitWatch(format string, now func() time.Time) *limitWatch {
	return &limitWatch{format: format, now: now}
}

func (l *limitWatch) Write(p []byte) (int, error) {
	switch l.format {
	case UsageClaudeStreamJSON, UsageCodexJSON, UsageOpencodeJSON:
	default:
		return len(p), nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	from := len(l.partial)
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial[from:], '\n')
		if i < 0 {
			break
		}
		i += from
		l.line(bytes.TrimSpace(l.partial[:i]))
		l.partial, from = l.partial[i+1:], 0
	}
	if len(l.partial) > maxLine {
		l.partial = l.partial[:0]
	}
	return len(p), nil
}

// limit reports whether the run hit a usage limit and its reset (zero:
// none given).
func (l *limitWatch) limit() (bool, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.partial) > 0 {
		l.line(bytes.TrimSpace(l.partial))
		l.partial = l.partial[:0]
	}
	return l.hit, l.reset
}

func (l *limitWatch) line(b []byte) {
	if len(b) == 0 || b[0] != '{' {
		return
	}
	switch l.format {
	case UsageClaudeStreamJSON:
		l.claude(b)
	case UsageCodexJSON:
		l.codex(b)
	case UsageOpencodeJSON:
		l.opencode(b)
	}
}

func (l *limitWatch) claude(b []byte) {
	var v struct {
		Type      string `json:"type"`
		RateLimit *struct {
			Status   string `json:"status"`
			ResetsAt int64  `json:"resetsAt"`
		} `json:"rate_limit_info"`
		APIError       string `json:"api_error"`
		APIErrorStatus int    `json:"api_error_status"`
		APIErrorType   string `json:"api_error_type"`
	}
	if json.Unmarshal(b, &v) != nil {
		return
	}
	switch {
	case v.Type == "rate_limit_event" && v.RateLimit != nil && v.RateLimit.Status == "rejected":
		l.hit = true
		if v.RateLimit.ResetsAt > 0 {
			l.reset = time.Unix(v.RateLimit.ResetsAt, 0)
		}
	case v.Type == "result" && (v.APIError == "usage_limit_reached" ||
		v.APIErrorStatus == 429 && v.APIErrorType == "rate_limit_error"):
		l.hit = true
	}
}

// codexTryAgain is the reset in codex's usage-limit message.
var codexTryAgain = regexp.MustCompile(`(?i)try again at ((?:[A-Z][a-z]{2} \d{1,2}(?:st|nd|rd|th), \d{4} )?\d{1,2}:\d{2} [AP]M)`)

var codexOrdinal = regexp.MustCompile(`(\d)(?:st|nd|rd|th),`)

func (l *limitWatch) codex(b []byte) {
	var v struct {
		Type    string `json:"type"`
		Message string `json:"message"`
		Error   *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &v) != nil {
		return
	}
	msg := v.Message
	if v.Error != nil && msg == "" {
		msg = v.Error.Message
	}
	if (v.Type != "error" && v.Type != "turn.failed") || !strings.Contains(strings.ReplaceAll(msg, "’", "'"), "hit your usage limit") {
		return
	}
	l.hit = true
	if m := codexTryAgain.FindStringSubmatch(msg); m != nil {
		if at, ok := codexReset(m[1], l.now()); ok {
			l.reset = at
		}
	}
}

// codexReset reads codex's reset time, printed to the minute in the local
// zone: the end of that minute, so the run never resumes before it.
func codexReset(s string, now time.Time) (time.Time, bool) {
	now = now.In(time.Local)
	s = codexOrdinal.ReplaceAllString(s, "$1,")
	if at, err := time.ParseInLocation("Jan 2, 2006 3:04 PM", s, time.Local); err == nil {
		return at.Add(time.Minute), true
	}
	clock, err := time.ParseInLocation("3:04 PM", s, time.Local)
	if err != nil {
		return time.Time{}, false
	}
	at := time.Date(now.Year(), now.Month(), now.Day(), clock.Hour(), clock.Minute(), 0, 0, time.Local).Add(time.Minute)
	if at.Before(now.Add(-time.Minute)) {
		// A time of day already past is tomorrow's.
		at = at.AddDate(0, 0, 1)
	}
	return at, true
}

// opencode reads opencode's error line. Any 429 is a limit: opencode
// prints it only once its own retries (a minute or more) all met it, so
// it is no passing burst.
func (l *limitWatch) opencode(b []byte) {
	var v struct {
		Type  string `json:"type"`
		Error *struct {
			Name string `json:"name"`
			Data struct {
				StatusCode      int               `json:"statusCode"`
				ResponseHeaders map[string]string `json:"responseHeaders"`
				ResponseBody    string            `json:"responseBody"`
			} `json:"data"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &v) != nil || v.Type != "error" || v.Error == nil ||
		v.Error.Name != "APIError" || v.Error.Data.StatusCode != http.StatusTooManyRequests {
		return
	}
	l.hit = true
	// The AI SDK gives the header names in lower case.
	if at, err := strconv.ParseInt(v.Error.Data.ResponseHeaders["anthropic-ratelimit-unified-reset"], 10, 64); err == nil && at > 0 {
		l.reset = time.Unix(at, 0)
		return
	}
	var body struct {
		Error struct {
			Type     string `json:"type"`
			ResetsAt int64  `json:"resets_at"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(v.Error.Data.ResponseBody), &body) == nil &&
		body.Error.Type == "usage_limit_reached" && body.Error.ResetsAt > 0 {
		l.reset = time.Unix(body.Error.ResetsAt, 0)
	}
}

// limitReason is a paused run's error.
func limitReason(reset time.Time) string {
	if reset.IsZero() {
		return "usage limit reached; the CLI gave no reset time"
	}
	return "usage limit reached; it resets at " + reset.UTC().Format(time.RFC3339)
}
