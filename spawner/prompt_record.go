package spawner

import (
	"context"
	"log/slog"
	"strings"

	"github.com/moziplus/mozi/repository/task"
)

// keepPrompt stores the prompt the attempt gets, through the same
// redactor as its output, for the console. A prompt quotes issues and
// comments people wrote, and an agent's key pasted into one must not
// land in the database. Failing to store it costs only the console's
// view of it: the run goes on.
func (s *Spawner) keepPrompt(ctx context.Context, log *slog.Logger, a task.Attempt, c Command) {
	if err := s.store.RecordAttemptPrompt(ctx, a.ID, redactString(c.Prompt, c.secrets())); err != nil {
		log.Warn("prompt not stored: the console will not show it", "error", err)
	}
}

// redactString is s with every secret replaced by [redacted].
func redactString(s string, secrets []string) string {
	var b strings.Builder
	r := newRedactor(&b, secrets)
	_, _ = r.Write([]byte(s)) // a strings.Builder never fails
	r.Flush()
	return b.String()
}
