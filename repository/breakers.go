package repository

import (
	"context"
	"fmt"
	"time"
)

// BreakerPolicy says when a repository's circuit breaker trips: more than
// Comments comments by agents within Window pause new agent runs on the
// repository for Cooldown.
type BreakerPolicy struct {
	Comments int
	Window   time.Duration
	Cooldown time.Duration
}

// Breaker is a repository's tripped circuit breaker.
type Breaker struct {
	Repo      string
	TrippedAt time.Time
	OpenUntil time.Time
	Comments  int
	Issue     int // where the storm tripped it
}

// RecordAgentComment counts a comment an agent posted on a repository and
// trips the repository's breaker when the policy says so; tripped is true
// only for the comment that trips it (a breaker open already is left as
// it is).
func (q *Queries) RecordAgentComment(ctx context.Context, repo string, issue int, author string, commentID int64, p BreakerPolicy) (Breaker, bool, error) {
	if _, err := q.db.Exec(ctx, `INSERT INTO agent_comments (repo, author, comment_id) VALUES ($1, $2, $3)
		ON CONFLICT DO NOTHING`, repo, author, commentID); err != nil {
		return Breaker{}, false, fmt.Errorf("count comment of %s on %s: %w", author, repo, err)
	}
	if p.Comments <= 0 {
		return Breaker{}, false, nil
	}
	b := Breaker{Repo: repo, Issue: issue}
	err := q.db.QueryRow(ctx, `
		WITH recent AS (
			SELECT count(*)::int AS n FROM agent_comments WHERE repo = $1 AND created_at > now() - $2::interval)
		INSERT INTO repo_breakers (repo, tripped_at, open_until, comments, issue)
		SELECT $1, now(), now() + $3::interval, n, $4 FROM recent WHERE n > $5
		ON CONFLICT (repo) DO UPDATE SET tripped_at = EXCLUDED.tripped_at, open_until = EXCLUDED.open_until,
			comments = EXCLUDED.comments, issue = EXCLUDED.issue, notified_at = NULL
		WHERE repo_breakers.open_until < now()
		RETURNING tripped_at, open_until, comments`,
		repo, interval(p.Window), interval(p.Cooldown), issue, p.Comments).Scan(&b.TrippedAt, &b.OpenUntil, &b.Comments)
	if isNoRows(err) {
		return Breaker{}, false, nil
	}
	if err != nil {
		return Breaker{}, false, fmt.Errorf("check circuit breaker of %s: %w", repo, err)
	}
	return b, true, nil
}

// OpenBreakers counts the repositories whose agent runs are paused.
func (q *Queries) OpenBreakers(ctx context.Context) (int, error) {
	var n int
	if err := q.db.QueryRow(ctx, `SELECT count(*) FROM repo_breakers WHERE open_until > now()`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count open circuit breakers: %w", err)
	}
	return n, nil
}
