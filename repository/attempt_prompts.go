package repository

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxStoredPrompt is the most of a prompt kept with its attempt; the rest
// is cut with a note, so one huge prompt cannot bloat task_attempts.
const MaxStoredPrompt = 256 << 10

// RecordAttemptPrompt keeps the prompt an attempt got (already redacted
// by the caller), cut to MaxStoredPrompt.
func (q *Queries) RecordAttemptPrompt(ctx context.Context, attemptID int64, prompt string) error {
	_, err := q.db.Exec(ctx, `UPDATE task_attempts SET prompt = $2 WHERE id = $1`, attemptID, capPrompt(prompt))
	if err != nil {
		return fmt.Errorf("record the prompt of attempt %d: %w", attemptID, err)
	}
	return nil
}

// capPrompt makes p storable as text (PostgreSQL refuses NUL and
// invalid UTF-8, which an issue body can smuggle in) and cuts it to
// MaxStoredPrompt bytes, the note included, on a character boundary.
func capPrompt(p string) string {
	p = strings.ToValidUTF8(strings.ReplaceAll(p, "\x00", ""), "\uFFFD")
	if len(p) <= MaxStoredPrompt {
		return p
	}
	note := fmt.Sprintf("\n\n[mozi: prompt cut here, %d of its %d bytes stored]\n", MaxStoredPrompt, len(p))
	cut := MaxStoredPrompt - len(note)
	for cut > 0 && !utf8.RuneStart(p[cut]) {
		cut--
	}
	return p[:cut] + note
}

// AttemptPrompts returns the stored prompts of a task's attempts by
// attempt number; an attempt without one (before migration 00036, or not
// recorded) is absent.
func (q *Queries) AttemptPrompts(ctx context.Context, taskID int64) (map[int]string, error) {
	rows, err := q.db.Query(ctx, `SELECT attempt, prompt FROM task_attempts
		WHERE task_id = $1 AND prompt IS NOT NULL`, taskID)
	if err != nil {
		return nil, fmt.Errorf("read the prompts of task %d: %w", taskID, err)
	}
	defer rows.Close()
	out := map[int]string{}
	for rows.Next() {
		var (
			n int
			p string
		)
		if err := rows.Scan(&n, &p); err != nil {
			return nil, fmt.Errorf("read the prompts of task %d: %w", taskID, err)
		}
		out[n] = p
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the prompts of task %d: %w", taskID, err)
	}
	return out, nil
}
