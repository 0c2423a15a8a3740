package repository

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Mention is an @login of a registered agent in a comment.
type Mention struct {
	ID          int64
	Repo        string
	IssueNumber int
	CommentID   int64
	Author      string
	Mentioned   string
	HopCount    int
	CreatedAt   time.Time
	ConsumedAt  time.Time
	TaskID      int64
	Outcome     string
}

// EnqueueMention queues a mention; inserted is false when the same comment
// already mentioned the same agent (an edit, a redelivery).
func (q *Queries) EnqueueMention(ctx context.Context, m Mention) (id int64, inserted bool, err error) {
	err = q.db.QueryRow(ctx, `INSERT INTO mention_queue (repo, issue_number, comment_id, author,
			mentioned, hop_count) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (repo, comment_id, mentioned) DO NOTHING RETURNING id`,
		m.Repo, m.IssueNumber, m.CommentID, m.Author, m.Mentioned, m.HopCount).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("queue mention of %s in %s#%d: %w", m.Mentioned, m.Repo, m.IssueNumber, err)
	}
	return id, true, nil
}

// ConsumeMention marks a queued mention handled, with the task it became
// (0 for none) and why.
func (q *Queries) ConsumeMention(ctx context.Context, id, taskID int64, outcome string) error {
	var tid *int64
	if taskID != 0 {
		tid = &taskID
	}
	_, err := q.db.Exec(ctx, `UPDATE mention_queue SET consumed_at = now(), task_id = $2, outcome = $3
		WHERE id = $1`, id, tid, outcome)
	if err != nil {
		return fmt.Errorf("consume mention %d: %w", id, err)
	}
	return nil
}

// Mentions lists queued mentions of an issue, oldest first.
func (q *Queries) Mentions(ctx context.Context, repo string, issue int) ([]Mention, error) {
	rows, err := q.db.Query(ctx, `SELECT `+mentionColumns+`
		FROM mention_queue WHERE repo = $1 AND issue_number = $2 ORDER BY id`, repo, issue)
	if err != nil {
		return nil, fmt.Errorf("list mentions of %s#%d: %w", repo, issue, err)
	}
	return collectMentions(rows)
}

// UnconsumedMentions lists queued mentions not turned into tasks for
// longer than age.
func (q *Queries) UnconsumedMentions(ctx context.Context, age time.Duration, limit int) ([]Mention, error) {
	rows, err := q.db.Query(ctx, `SELECT `+mentionColumns+`
		FROM mention_queue WHERE consumed_at IS NULL AND created_at < now() - $1::interval
		ORDER BY id LIMIT $2`, interval(age), limit)
	if err != nil {
		return nil, fmt.Errorf("list unconsumed mentions: %w", err)
	}
	return collectMentions(rows)
}

const mentionColumns = `id, repo, issue_number, comment_id, author, mentioned,
	hop_count, created_at, consumed_at, COALESCE(task_id, 0), outcome`

func collectMentions(rows pgx.Rows) ([]Mention, error) {
	defer rows.Close()
	var out []Mention
	for rows.Next() {
		var (
			m        Mention
			consumed *time.Time
		)
		if err := rows.Scan(&m.ID, &m.Repo, &m.IssueNumber, &m.CommentID, &m.Author, &m.Mentioned,
			&m.HopCount, &m.CreatedAt, &consumed, &m.TaskID, &m.Outcome); err != nil {
			return nil, fmt.Errorf("scan mention: %w", err)
		}
		m.ConsumedAt = derefTime(consumed)
		out = append(out, m)
	}
	return out, rows.Err()
}
