package repository

import (
	"context"
	"fmt"
	"time"

	"github.com/moziplus/mozi/repository/task"
)

// CatchUpMark is how far the catch-up has read a repository; a zero At
// means never (the repository is new to it).
type CatchUpMark struct {
	Repo string
	At   time.Time
}

// CatchUpMarks lists the repositories to catch up on: the configured ones
// and every one mozi has seen an issue of, with their marks. The
// repositories of the issues are found by skipping through the issues'
// primary key, one lookup per repository, not by reading every issue.
func (q *Queries) CatchUpMarks(ctx context.Context, configured []string) ([]CatchUpMark, error) {
	rows, err := q.db.Query(ctx, `
		WITH RECURSIVE seen (repo) AS (
			(SELECT repo FROM issues ORDER BY repo LIMIT 1)
			UNION ALL
			SELECT (SELECT i.repo FROM issues i WHERE i.repo > s.repo ORDER BY i.repo LIMIT 1)
			FROM seen s WHERE s.repo IS NOT NULL
		)
		SELECT r.repo, c.caught_up_at
		FROM (SELECT unnest($1::text[]) AS repo UNION SELECT repo FROM seen WHERE repo IS NOT NULL) r
		LEFT JOIN repo_catch_up c ON c.repo = r.repo
		ORDER BY r.repo`, configured)
	if err != nil {
		return nil, fmt.Errorf("list repositories to catch up on: %w", err)
	}
	defer rows.Close()
	var out []CatchUpMark
	for rows.Next() {
		var (
			m  CatchUpMark
			at *time.Time
		)
		if err := rows.Scan(&m.Repo, &at); err != nil {
			return nil, fmt.Errorf("scan catch-up mark: %w", err)
		}
		if at != nil {
			m.At = *at
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// MarkCaughtUp records that repo was read up to at (never backwards).
func (q *Queries) MarkCaughtUp(ctx context.Context, repo string, at time.Time) error {
	_, err := q.db.Exec(ctx, `INSERT INTO repo_catch_up (repo, caught_up_at) VALUES ($1, $2)
		ON CONFLICT (repo) DO UPDATE SET caught_up_at = GREATEST(repo_catch_up.caught_up_at, EXCLUDED.caught_up_at)`,
		repo, at)
	if err != nil {
		return fmt.Errorf("mark %s caught up: %w", repo, err)
	}
	return nil
}

// HasTask reports whether any task (live or finished) of action for agent
// exists on repo#number.
func (q *Queries) HasTask(ctx context.Context, repo string, number int, action task.ActionType, agent string) (bool, error) {
	var exists bool
	err := q.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM task_state
		WHERE repo = $1 AND issue_number = $2 AND action_type = $3 AND lower(agent) = lower($4))`,
		repo, number, string(action), agent).Scan(&exists)
	if err != nil {
		return false, fmt.Errorf("look for %s tasks of %s on %s#%d: %w", action, agent, repo, number, err)
	}
	return exists, nil
}
