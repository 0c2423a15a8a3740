package repository

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/moziplus/mozi/repository/task"
)

// ConsoleSession is a signed-in user of the web console.
type ConsoleSession struct {
	Login     string
	Token     string // the user's Gitea token, sealed by the console: never logged, never shown
	CSRF      string
	ExpiresAt time.Time
}

// CreateConsoleSession stores a session under the hash of its cookie's id.
func (q *Queries) CreateConsoleSession(ctx context.Context, idHash []byte, s ConsoleSession) error {
	_, err := q.db.Exec(ctx, `INSERT INTO console_sessions (id_hash, login, token, csrf, expires_at)
		VALUES ($1, $2, $3, $4, $5)`, idHash, s.Login, s.Token, s.CSRF, s.ExpiresAt)
	if err != nil {
		return fmt.Errorf("store the console session of %s: %w", s.Login, err)
	}
	return nil
}

// ConsoleSession reads an unexpired session; an unknown or expired one is
// task.ErrNotFound.
func (q *Queries) ConsoleSession(ctx context.Context, idHash []byte) (ConsoleSession, error) {
	var s ConsoleSession
	err := q.db.QueryRow(ctx, `SELECT login, token, csrf, expires_at FROM console_sessions
		WHERE id_hash = $1 AND expires_at > now()`, idHash).Scan(&s.Login, &s.Token, &s.CSRF, &s.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return ConsoleSession{}, fmt.Errorf("console session: %w", task.ErrNotFound)
	}
	if err != nil {
		return ConsoleSession{}, fmt.Errorf("read a console session: %w", err)
	}
	return s, nil
}

// DeleteConsoleSession deletes the session with this hash (sign out).
func (q *Queries) DeleteConsoleSession(ctx context.Context, idHash []byte) error {
	if _, err := q.db.Exec(ctx, `DELETE FROM console_sessions WHERE id_hash = $1`, idHash); err != nil {
		return fmt.Errorf("delete a console session: %w", err)
	}
	return nil
}

// PruneConsoleSessions deletes up to limit expired sessions, the oldest
// first, and says how many went. Bounded so that a sign-in, which prunes,
// never waits on a long delete after a quiet month.
func (q *Queries) PruneConsoleSessions(ctx context.Context, limit int) (int, error) {
	tag, err := q.db.Exec(ctx, `DELETE FROM console_sessions WHERE id_hash IN (
			SELECT id_hash FROM console_sessions WHERE expires_at <= now() ORDER BY expires_at LIMIT $1
			FOR UPDATE SKIP LOCKED)`, limit)
	if err != nil {
		return 0, fmt.Errorf("prune expired console sessions: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// TaskRepos lists the repositories that have tasks, in name order. It
// skips from one repository to the next on task_state_issue_idx, so it
// reads one index entry per repository, not per task.
func (q *Queries) TaskRepos(ctx context.Context) ([]string, error) {
	rows, err := q.db.Query(ctx, `WITH RECURSIVE r(repo) AS (
			(SELECT repo FROM task_state ORDER BY repo LIMIT 1)
			UNION ALL
			SELECT (SELECT t.repo FROM task_state t WHERE t.repo > r.repo ORDER BY t.repo LIMIT 1)
			FROM r WHERE r.repo IS NOT NULL)
		SELECT repo FROM r WHERE repo IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("list the repositories of tasks: %w", err)
	}
	repos, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list the repositories of tasks: %w", err)
	}
	return repos, nil
}

// TaskPage selects one page of tasks for the console: only of Repos (nil:
// none), filtered like TaskFilter, newest first, before the task id
// Before (0: from the newest).
type TaskPage struct {
	Repos      []string
	Repo       string
	Status     task.Status
	Agent      string
	ActionType task.ActionType
	Before     int64
	Limit      int // 0: 50
}

// TasksPage returns a page of tasks, newest first, with keyset paging on
// the id: a page deep in the history costs what the first one does.
func (q *Queries) TasksPage(ctx context.Context, p TaskPage) ([]task.Task, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 50
	}
	before := p.Before
	if before <= 0 {
		before = 1<<63 - 1
	}
	rows, err := q.db.Query(ctx, `SELECT `+taskColumns+` FROM task_state
		WHERE repo = ANY($1) AND ($2 = '' OR repo = $2) AND ($3 = '' OR status = $3)
		  AND ($4 = '' OR agent = $4) AND ($5 = '' OR action_type = $5) AND id < $6
		ORDER BY id DESC LIMIT $7`,
		p.Repos, p.Repo, string(p.Status), p.Agent, string(p.ActionType), before, limit)
	if err != nil {
		return nil, fmt.Errorf("list a page of tasks: %w", err)
	}
	return collectTasks(rows)
}

// TaskEvent is one change of a task's status.
type TaskEvent struct {
	From, To   task.Status // From "": created
	DeliveryID string      // the Gitea delivery whose processing made it ("": none)
	Event      string      // that delivery's X-Gitea-Event and action, when still stored
	Actor      string      // the console user who asked for it ("": mozi)
	LastError  string
	At         time.Time
}

// TaskEvents returns a task's state history, oldest first.
func (q *Queries) TaskEvents(ctx context.Context, taskID int64) ([]TaskEvent, error) {
	rows, err := q.db.Query(ctx, `SELECT e.from_status, e.to_status, COALESCE(e.delivery_id, ''),
			COALESCE(NULLIF(concat_ws('/', d.event, NULLIF(d.action, '')), ''), ''), e.actor, e.last_error, e.at
		FROM task_events e LEFT JOIN webhook_deliveries d ON d.delivery_id = e.delivery_id
		WHERE e.task_id = $1 ORDER BY e.id`, taskID)
	if err != nil {
		return nil, fmt.Errorf("read the history of task %d: %w", taskID, err)
	}
	defer rows.Close()
	var out []TaskEvent
	for rows.Next() {
		var (
			e        TaskEvent
			from, to string
		)
		if err := rows.Scan(&from, &to, &e.DeliveryID, &e.Event, &e.Actor, &e.LastError, &e.At); err != nil {
			return nil, fmt.Errorf("read the history of task %d: %w", taskID, err)
		}
		e.From, e.To = task.Status(from), task.Status(to)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the history of task %d: %w", taskID, err)
	}
	return out, nil
}

// ConsoleAction runs a console user's action in one transaction: the task
// history names login as the actor of every change fn makes, and the
// action is recorded in console_actions with whether it took effect.
func (s *Store) ConsoleAction(ctx context.Context, login, action, target string, fn func(tx *Tx) (bool, error)) (bool, error) {
	var applied bool
	err := s.InTx(ctx, func(tx *Tx) error {
		if _, err := tx.db.Exec(ctx, `SELECT set_config('mozi.actor', $1, true)`, "console:"+login); err != nil {
			return fmt.Errorf("%s %s: name the actor: %w", action, target, err)
		}
		var err error
		if applied, err = fn(tx); err != nil {
			return err
		}
		_, err = tx.db.Exec(ctx, `INSERT INTO console_actions (login, action, target, applied) VALUES ($1, $2, $3, $4)`,
			login, action, target, applied)
		if err != nil {
			return fmt.Errorf("%s %s: record it: %w", action, target, err)
		}
		return nil
	})
	return applied, err
}
