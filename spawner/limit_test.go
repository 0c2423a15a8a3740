package spawner

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// recordedAt is when testdata/limit was recorded, in the local zone that
// codex printed its reset in (any zone reads the same wall clock).
var recordedAt = time.Date(2026, 11, 25, 23, 7, 57, 0, time.Local)

// What each CLI really printed at a usage limit (testdata/limit/README.md)
// says whether the limit was hit and when it resets, line by line or in
// odd chunks; a run that did not hit one says so.
func TestLimitFromRecordedOutput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file   string
		format string
		hit    bool
		reset  time.Time
	}{
		{"limit/claude-code-2.1.330-subscription.jsonl", UsageClaudeStreamJSON, true, time.Unix(1795648097, 0)},
		{"limit/claude-code-2.1.330-subscription-no-reset.jsonl", UsageClaudeStreamJSON, true, time.Time{}},
		{"limit/claude-code-2.1.330-api-key.jsonl", UsageClaudeStreamJSON, true, time.Time{}},
		// "try again at 11:08 PM": to the minute, so its end.
		{"limit/codex-0.169.0-today.jsonl", UsageCodexJSON, true, time.Date(2026, 11, 25, 23, 9, 0, 0, time.Local)},
		{"limit/codex-0.169.0-another-day.jsonl", UsageCodexJSON, true, time.Date(2026, 11, 26, 2, 7, 0, 0, time.Local)},
		{"limit/codex-0.169.0-no-reset.jsonl", UsageCodexJSON, true, time.Time{}},
		// opencode prints the 429 once its own retries are spent, with
		// Anthropic's reset header or OpenAI's resets_at in the answer.
		{"limit/opencode-1.18.33-anthropic-no-reset.jsonl", UsageOpencodeJSON, true, time.Time{}},
		{"limit/opencode-1.18.33-anthropic-reset-passed.jsonl", UsageOpencodeJSON, true, time.Unix(1795662506, 0)},
		{"limit/opencode-1.18.33-openai.jsonl", UsageOpencodeJSON, true, time.Unix(1795673279, 0)},
		{"limit/opencode-1.18.33-openai-no-reset.jsonl", UsageOpencodeJSON, true, time.Time{}},
		// Waiting for a reset hours away it prints nothing.
		{"limit/opencode-1.18.33-anthropic-waiting.jsonl", UsageOpencodeJSON, false, time.Time{}},
		{"usage/claude-code-2.1.330.jsonl", UsageClaudeStreamJSON, false, time.Time{}},
		{"usage/codex-0.169.0.jsonl", UsageCodexJSON, false, time.Time{}},
		{"usage/opencode-1.18.33.jsonl", UsageOpencodeJSON, false, time.Time{}},
		// Another format's output is not read.
		{"limit/codex-0.169.0-today.jsonl", UsageOpencodeJSON, false, time.Time{}},
		{"limit/opencode-1.18.33-openai.jsonl", UsageCodexJSON, false, time.Time{}},
		{"limit/opencode-1.18.33-anthropic-reset-passed.jsonl", UsageClaudeStreamJSON, false, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.file+" "+tt.format, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(filepath.Join("testdata", tt.file))
			require.NoError(t, err)
			for _, size := range []int{len(data), 7} {
				w := newLimitWatch(tt.format, func() time.Time { return recordedAt })
				for chunk := range slicesChunk(data, size) {
					_, err := w.Write(chunk)
					require.NoError(t, err)
				}
				hit, reset := w.limit()
				require.Equal(t, tt.hit, hit)
				require.True(t, tt.reset.Equal(reset), "reset: want %s, got %s", tt.reset, reset)
			}
		})
	}
}

// Of opencode's errors only a provider's 429 is a limit; a reset that
// is not a positive number is none.
func TestLimitOpencodeLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		line  string
		hit   bool
		reset time.Time
	}{
		{"server error", `{"type":"error","error":{"name":"APIError","data":{"message":"Overloaded","statusCode":529}}}`, false, time.Time{}},
		{"not an API error", `{"type":"error","error":{"name":"UnknownError","data":{"message":"429"}}}`, false, time.Time{}},
		{"429 of another provider", `{"type":"error","error":{"name":"APIError","data":{"statusCode":429,"responseBody":"Too Many Requests"}}}`, true, time.Time{}},
		{"bad reset header", `{"type":"error","error":{"name":"APIError","data":{"statusCode":429,"responseHeaders":{"anthropic-ratelimit-unified-reset":"soon"}}}}`, true, time.Time{}},
		{"OpenAI rate limit, not usage", `{"type":"error","error":{"name":"APIError","data":{"statusCode":429,"responseBody":"{\"error\":{\"type\":\"rate_limit_exceeded\",\"resets_at\":1795673279}}"}}}`, true, time.Time{}},
		{"a text part", `{"type":"text","part":{"text":"statusCode 429"}}`, false, time.Time{}},
	}
	for _, tt := range tests {
		w := newLimitWatch(UsageOpencodeJSON, func() time.Time { return recordedAt })
		_, err := w.Write([]byte(tt.line + "\n"))
		require.NoError(t, err)
		hit, reset := w.limit()
		require.Equal(t, tt.hit, hit, tt.name)
		require.True(t, tt.reset.Equal(reset), "%s: reset %s", tt.name, reset)
	}
}

func TestCodexReset(t *testing.T) {
	t.Parallel()
	tests := []struct {
		printed string
		now     time.Time
		want    time.Time
	}{
		{"11:08 PM", recordedAt, time.Date(2026, 11, 25, 23, 9, 0, 0, time.Local)},
		// A time of day already past is tomorrow's.
		{"2:06 AM", recordedAt, time.Date(2026, 11, 26, 2, 7, 0, 0, time.Local)},
		// The minute that just began is still today's.
		{"11:07 PM", recordedAt, time.Date(2026, 11, 25, 23, 8, 0, 0, time.Local)},
		{"Dec 1st, 2026 12:30 PM", recordedAt, time.Date(2026, 12, 1, 12, 31, 0, 0, time.Local)},
		{"Dec 22nd, 2026 9:00 AM", recordedAt, time.Date(2026, 12, 22, 9, 1, 0, 0, time.Local)},
	}
	for _, tt := range tests {
		got, ok := codexReset(tt.printed, tt.now)
		require.True(t, ok, tt.printed)
		require.True(t, tt.want.Equal(got), "%s: want %s, got %s", tt.printed, tt.want, got)
	}
	_, ok := codexReset("soon", recordedAt)
	require.False(t, ok)
}

// A run that exits non-zero after printing a usage limit is paused, with
// the reset; one that exits 0 is not (the limit passed within it), nor is
// one of a format that does not say.
func TestRunPausedAtUsageLimit(t *testing.T) {
	t.Parallel()
	sub, err := filepath.Abs(filepath.Join("testdata", "limit", "claude-code-2.1.330-subscription.jsonl"))
	require.NoError(t, err)
	tests := []struct {
		name    string
		script  string
		usage   string
		outcome string
	}{
		{"limit, exit 1", "cat " + sub + "; exit 1", UsageClaudeStreamJSON, OutcomePaused},
		{"limit, exit 0", "cat " + sub, UsageClaudeStreamJSON, OutcomeSucceeded},
		{"no limit, exit 1", "echo '{\"type\":\"result\",\"is_error\":true}'; exit 1", UsageClaudeStreamJSON, OutcomeFailed},
		{"own command", "cat " + sub + "; exit 1", "", OutcomeFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := runIn(t, t.TempDir(), Command{Argv: sh(tt.script), Usage: tt.usage}, context.Background())
			require.Equal(t, tt.outcome, got.Outcome, got.Err)
			if tt.outcome != OutcomePaused {
				require.True(t, got.Reset.IsZero())
				return
			}
			require.True(t, time.Unix(1795648097, 0).Equal(got.Reset), got.Reset.String())
			require.Equal(t, "usage limit reached; it resets at 2026-11-25T23:08:17Z", got.Err)
			require.True(t, bytes.Contains([]byte(got.Tail), []byte("rate_limit_event")))
		})
	}
}
