package repository

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// StatusChannel is notified (by a trigger) when a task changes in a way
// its issue's status comment shows.
const StatusChannel = "mozi_status"

// StatusComment is an issue's status comment taken for rendering.
type StatusComment struct {
	Repo      string
	Issue     int
	CommentID int64  // 0: not posted yet
	Body      string // what Gitea shows
	// Changes is the count of folded task changes the rendering covers:
	// a change folded after the claim keeps the comment due.
	Changes int64
	Reacted []int64 // tasks whose trigger got its reaction
	// Attempts counts the tries since the last success, this one
	// included: a retry of a first post looks for an earlier try that
	// reached Gitea.
	Attempts int
}

// FoldStatusMarks folds the marks task changes left into their issues'
// status comments, which become due; it returns how many it folded.
func (s *Store) FoldStatusMarks(ctx context.Context) (int, error) {
	var n int
	err := s.db.QueryRow(ctx, `WITH m AS (
			DELETE FROM status_marks WHERE id IN (SELECT id FROM status_marks ORDER BY id LIMIT 1000 FOR UPDATE SKIP LOCKED)
			RETURNING repo, issue_number),
		up AS (
			INSERT INTO status_comments (repo, issue_number, changes)
			SELECT DISTINCT repo, issue_number, 1 FROM m
			ON CONFLICT (repo, issue_number) DO UPDATE SET changes = status_comments.changes + 1
			RETURNING 1)
		SELECT count(*) FROM m`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("fold task changes into status comments: %w", err)
	}
	return n, nil
}

// ClaimStatusComments takes up to limit due status comments for lockFor:
// changed since last shown, not edited within minInterval, not waiting
// for a retry.
func (s *Store) ClaimStatusComments(ctx context.Context, limit int, minInterval, lockFor time.Duration) ([]StatusComment, error) {
	rows, err := s.db.Query(ctx, `UPDATE status_comments c SET locked_until = now() + $3::interval, attempts = c.attempts + 1
		WHERE (c.repo, c.issue_number) IN (SELECT repo, issue_number FROM status_comments
			WHERE changes > shown AND parked_at IS NULL AND next_at <= now()
			  AND (locked_until IS NULL OR locked_until < now())
			  AND (last_edit_at IS NULL OR last_edit_at <= now() - $2::interval)
			ORDER BY next_at LIMIT $1 FOR UPDATE SKIP LOCKED)
		RETURNING c.repo, c.issue_number, coalesce(c.comment_id, 0), c.body, c.changes, c.reacted, c.attempts`,
		limit, interval(minInterval), interval(lockFor))
	if err != nil {
		return nil, fmt.Errorf("claim status comments: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (StatusComment, error) {
		var c StatusComment
		err := row.Scan(&c.Repo, &c.Issue, &c.CommentID, &c.Body, &c.Changes, &c.Reacted, &c.Attempts)
		return c, err
	})
}

// StatusShown records that Gitea shows body as the issue's status comment
// commentID, covering the claimed changes; edited says Gitea took a post
// or an edit (recorded in status_comment_edits), not just a rendering
// equal to what it shows.
func (q *Queries) StatusShown(ctx context.Context, c StatusComment, commentID int64, body string, edited bool) error {
	_, err := q.db.Exec(ctx, `WITH up AS (
			UPDATE status_comments SET comment_id = nullif($3, 0), body = $4, shown = GREATEST(shown, $5), reacted = $6,
				attempts = 0, last_error = '', locked_until = NULL,
				last_edit_at = CASE WHEN $7 THEN now() ELSE last_edit_at END,
				edits = edits + CASE WHEN $7 THEN 1 ELSE 0 END
			WHERE repo = $1 AND issue_number = $2)
		INSERT INTO status_comment_edits (repo, issue_number, comment_id, body)
		SELECT $1, $2, $3, $4 WHERE $7`,
		c.Repo, c.Issue, commentID, body, c.Changes, c.Reacted, edited)
	if err != nil {
		return fmt.Errorf("record status comment of %s#%d: %w", c.Repo, c.Issue, err)
	}
	if !edited {
		return nil
	}
	// The record of an issue's edits keeps its latest ones: a long-lived
	// issue does not grow it for ever.
	_, err = q.db.Exec(ctx, `DELETE FROM status_comment_edits WHERE repo = $1 AND issue_number = $2 AND id <
		(SELECT min(id) FROM (SELECT id FROM status_comment_edits WHERE repo = $1 AND issue_number = $2
			ORDER BY id DESC LIMIT $3) latest)`, c.Repo, c.Issue, keptEdits)
	if err != nil {
		return fmt.Errorf("trim the edits of the status comment of %s#%d: %w", c.Repo, c.Issue, err)
	}
	return nil
}

// keptEdits is how many of an issue's status comment edits are recorded.
const keptEdits = 50

// StatusRetry puts a status comment Gitea did not take back until next;
// lost says the comment is gone from Gitea (deleted by someone): the
// next try posts a new one.
func (q *Queries) StatusRetry(ctx context.Context, c StatusComment, next time.Time, why string, lost bool) error {
	_, err := q.db.Exec(ctx, `UPDATE status_comments SET next_at = $3, last_error = $4, locked_until = NULL,
			reacted = $6,
			comment_id = CASE WHEN $5 THEN NULL ELSE comment_id END, body = CASE WHEN $5 THEN '' ELSE body END
		WHERE repo = $1 AND issue_number = $2`, c.Repo, c.Issue, next, why, lost, c.Reacted)
	if err != nil {
		return fmt.Errorf("requeue status comment of %s#%d: %w", c.Repo, c.Issue, err)
	}
	return nil
}

// StatusPark gives an issue's status comment up: Gitea refused it for
// good (the issue is gone, mozi may not comment there).
func (q *Queries) StatusPark(ctx context.Context, c StatusComment, why string) error {
	_, err := q.db.Exec(ctx, `UPDATE status_comments SET parked_at = now(), last_error = $3, locked_until = NULL
		WHERE repo = $1 AND issue_number = $2`, c.Repo, c.Issue, why)
	if err != nil {
		return fmt.Errorf("park status comment of %s#%d: %w", c.Repo, c.Issue, err)
	}
	return nil
}

// StatusFacts are what an issue's status comment says beyond its tasks'
// rows.
type StatusFacts struct {
	Now          time.Time       // the database's clock
	BreakerUntil time.Time       // the repository's open circuit breaker (zero: closed)
	Busy         map[string]bool // agents with a run under way on any issue
}

// StatusFactsOf reads the repository's breaker and which of agents run
// something now.
func (q *Queries) StatusFactsOf(ctx context.Context, repo string, agents []string) (StatusFacts, error) {
	f := StatusFacts{Busy: map[string]bool{}}
	var until *time.Time
	var busy []string
	err := q.db.QueryRow(ctx, `SELECT now(),
			(SELECT open_until FROM repo_breakers WHERE repo = $1 AND open_until > now()),
			ARRAY(SELECT DISTINCT agent FROM task_state WHERE agent = ANY($2) AND status IN ('claimed', 'working'))`,
		repo, agents).Scan(&f.Now, &until, &busy)
	if err != nil {
		return StatusFacts{}, fmt.Errorf("status facts of %s: %w", repo, err)
	}
	if until != nil {
		f.BreakerUntil = *until
	}
	for _, a := range busy {
		f.Busy[a] = true
	}
	return f, nil
}

// StatusEdit is a body Gitea took for an issue's status comment.
type StatusEdit struct {
	CommentID int64
	Body      string
	At        time.Time
}

// StatusEdits lists what an issue's status comment showed, oldest first.
func (q *Queries) StatusEdits(ctx context.Context, repo string, issue int) ([]StatusEdit, error) {
	rows, err := q.db.Query(ctx, `SELECT comment_id, body, at FROM status_comment_edits
		WHERE repo = $1 AND issue_number = $2 ORDER BY id`, repo, issue)
	if err != nil {
		return nil, fmt.Errorf("status comment edits of %s#%d: %w", repo, issue, err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (StatusEdit, error) {
		var e StatusEdit
		err := row.Scan(&e.CommentID, &e.Body, &e.At)
		return e, err
	})
}

// WakeStatusComments makes the status comments waiting out a backoff due
// now (Gitea answers again).
func (q *Queries) WakeStatusComments(ctx context.Context) (int, error) {
	tag, err := q.db.Exec(ctx, `UPDATE status_comments SET next_at = now()
		WHERE changes > shown AND parked_at IS NULL AND next_at > now()`)
	if err != nil {
		return 0, fmt.Errorf("wake status comments: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
