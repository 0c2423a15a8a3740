package repository

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/moziplus/mozi/repository/task"
)

// AgentLimit is an agent the dispatcher may spawn and its concurrency cap,
// counted across every mozi process on the database.
type AgentLimit struct {
	Login          string
	MaxConcurrency int
}

// ClaimRequest asks for due tasks.
type ClaimRequest struct {
	// Owner names the claiming runner (the lease holder).
	Owner string
	// Limit is how many tasks to claim at most (the runner's free slots).
	Limit int
	// LeaseTTL is how long the claim lasts without a heartbeat.
	LeaseTTL time.Duration
	// Agents are the enabled agents; tasks of others are not claimed.
	Agents []AgentLimit
}

// claimLockKey serialises claims across replicas so that per-agent limits,
// counted from the database, hold exactly.
const claimLockKey = 0x6d6f7a69 // "mozi"

// openDependenciesOfT is the FROM … WHERE of the issues task t waits for:
// its Depends: lines and Gitea's blocked-by, open as mozi last saw them.
const openDependenciesOfT = `
            FROM unnest(t.depends_on || COALESCE(
                (SELECT i.blocked_by FROM issues i WHERE i.repo = t.repo AND i.number = t.issue_number),
                '{}'::integer[])) AS d(n)
            JOIN issues dep ON dep.repo = t.repo AND dep.number = d.n
            WHERE dep.state = 'open' AND d.n <> t.issue_number`

// OpenDependencies lists the issues task id waits for before it may be
// claimed (only issue work waits): what mozi task show says a pending
// task waits for.
func (q *Queries) OpenDependencies(ctx context.Context, id int64) ([]int, error) {
	var open []int
	err := q.db.QueryRow(ctx, `SELECT CASE WHEN t.action_type = 'issue_assigned'
		THEN array(SELECT DISTINCT d.n `+openDependenciesOfT+` ORDER BY d.n) ELSE '{}' END
		FROM task_state t WHERE t.id = $1`, id).Scan(&open)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("task %d: %w", id, task.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("open dependencies of task %d: %w", id, err)
	}
	return open, nil
}

// claimSQL picks due tasks: pending, not_before passed, their repository's
// circuit breaker closed, for issue work
// their Depends: and blocked-by issues not open (notifications, reviews and
// mentions do not wait for dependencies), their agent enabled, not paused at
// a usage limit (agent_pauses) and under its limit, no run of the same agent
// live on the same issue; highest priority first; at most one per (issue,
// agent) per claim. Rows another transaction holds are skipped.
//
// Candidates are read per agent with free slots, through the
// (agent, priority, not_before, id) index, a few more than its slots: an
// agent at its limit costs nothing and cannot starve the others by filling
// a shared candidate window with tasks it may not run. free is
// materialised so each agent's live runs are counted once, not once per
// candidate.
var claimSQL = `
WITH agents AS (
    SELECT login, lim FROM unnest($1::text[], $2::int[]) AS a(login, lim)
    -- An agent whose credential hit a usage limit waits for its reset.
    WHERE NOT EXISTS (SELECT 1 FROM agent_pauses p WHERE p.agent = a.login AND p.until > now())
), free AS MATERIALIZED (
    SELECT a.login, a.lim - COALESCE((
        SELECT count(*) FROM task_state r
        WHERE r.agent = a.login AND r.lease_owner IS NOT NULL AND r.lease_expires_at > now()), 0) AS slots
    FROM agents a
), ready AS (
    SELECT c.*, f.slots FROM free f CROSS JOIN LATERAL (
        SELECT t.id, t.agent, t.repo, t.issue_number, t.priority, t.not_before
        FROM task_state t
        WHERE t.status = 'pending' AND t.agent = f.login AND t.not_before <= now()
          AND NOT EXISTS (SELECT 1 FROM repo_breakers b WHERE b.repo = t.repo AND b.open_until > now())
          AND NOT EXISTS (
            SELECT 1 FROM task_state r
            WHERE r.repo = t.repo AND r.issue_number = t.issue_number AND r.agent = t.agent
              AND r.lease_owner IS NOT NULL AND r.lease_expires_at > now())
          AND (t.action_type <> 'issue_assigned' OR NOT EXISTS (
            SELECT 1 ` + openDependenciesOfT + `))
        ORDER BY t.priority, t.not_before, t.id
        LIMIT LEAST(f.slots, $3) * 2 + 8) c
    WHERE f.slots > 0
), one_per_issue AS (
    SELECT * FROM (
        SELECT r.*, row_number() OVER (PARTITION BY r.repo, r.issue_number, r.agent
                                       ORDER BY r.priority, r.not_before, r.id) AS nth_issue
        FROM ready r) x
    WHERE nth_issue = 1
), within_limit AS (
    SELECT o.id, o.priority, o.not_before FROM (
        SELECT o.*, row_number() OVER (PARTITION BY o.agent ORDER BY o.priority, o.not_before, o.id) AS nth
        FROM one_per_issue o) o
    WHERE o.nth <= o.slots
    ORDER BY o.priority, o.not_before, o.id
    LIMIT $3
), locked AS (
    SELECT t.id FROM task_state t
    WHERE t.id IN (SELECT id FROM within_limit) AND t.status = 'pending'
    FOR UPDATE SKIP LOCKED
)
UPDATE task_state t SET status = 'claimed', dispatch_count = t.dispatch_count + 1,
    lease_owner = $4, lease_expires_at = now() + $5::interval, heartbeat_at = now(), updated_at = now()
FROM locked WHERE t.id = locked.id
RETURNING ` + taskColumnsT

// taskColumnsT is taskColumns qualified by the alias t.
var taskColumnsT = qualify("t", taskColumns)

// ClaimTasks claims up to req.Limit due tasks for req.Owner, in one
// transaction under a claim lock shared by every replica.
func (s *Store) ClaimTasks(ctx context.Context, req ClaimRequest) ([]task.Task, error) {
	if req.Limit <= 0 || len(req.Agents) == 0 {
		return nil, nil
	}
	logins := make([]string, len(req.Agents))
	limits := make([]int32, len(req.Agents))
	for i, a := range req.Agents {
		logins[i], limits[i] = a.Login, int32(max(a.MaxConcurrency, 1))
	}
	var tasks []task.Task
	err := s.InTx(ctx, func(tx *Tx) error {
		if _, err := tx.db.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, claimLockKey); err != nil {
			return fmt.Errorf("take claim lock: %w", err)
		}
		// Planning this statement costs about as much as running it: plan
		// it once per connection, not per claim.
		// A claim need not wait for its WAL flush: nothing is spawned
		// before StartRun's durable commit, which flushes the claim too; a
		// claim lost with the server only leaves its tasks pending.
		if _, err := tx.db.Exec(ctx, `SET LOCAL plan_cache_mode = force_generic_plan; SET LOCAL synchronous_commit = off`); err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		rows, err := tx.db.Query(ctx, claimSQL, logins, limits, req.Limit, req.Owner, leaseTTL(req.LeaseTTL))
		if err != nil {
			return fmt.Errorf("claim tasks: %w", err)
		}
		tasks, err = collectTasks(rows)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.observe(task.EventClaim, task.StatusClaimed, len(tasks))
	return tasks, nil
}

// LeaseState is what a run's heartbeat learns about its task.
type LeaseState struct {
	// Held: the runner still holds the task's lease (renewed). False means
	// another runner took the task over, or nobody holds it.
	Held    bool
	Status  task.Status
	EndedBy string // who ended the task, when it is terminal
}

// Heartbeat extends a run's lease and says what became of the task: a run
// keeps its lease after Gitea ended its task, until its outcome is
// recorded.
func (q *Queries) Heartbeat(ctx context.Context, id int64, owner string, ttl time.Duration) (LeaseState, error) {
	var (
		st      LeaseState
		status  string
		endedBy string
	)
	err := q.db.QueryRow(ctx, `WITH beat AS (
			UPDATE task_state SET lease_expires_at = now() + $3::interval, heartbeat_at = now()
			WHERE id = $1 AND lease_owner = $2 RETURNING id)
		SELECT status, ended_by, EXISTS (SELECT 1 FROM beat) FROM task_state WHERE id = $1`,
		id, owner, leaseTTL(ttl)).Scan(&status, &endedBy, &st.Held)
	if errors.Is(err, pgx.ErrNoRows) {
		return LeaseState{}, nil // the task is gone
	}
	if err != nil {
		return LeaseState{}, fmt.Errorf("heartbeat task %d: %w", id, err)
	}
	st.Status, st.EndedBy = task.Status(status), endedBy
	return st, nil
}

// DropLease gives up a lease that no run uses any more (the task moved
// before its agent started). A claimed or working task keeps it: the
// rescue puts such a task back once the lease expires.
func (q *Queries) DropLease(ctx context.Context, id int64, owner string) error {
	_, err := q.db.Exec(ctx, `UPDATE task_state SET lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
		WHERE id = $1 AND lease_owner = $2 AND status NOT IN ('claimed', 'working')`, id, owner)
	if err != nil {
		return fmt.Errorf("drop the lease of task %d: %w", id, err)
	}
	return nil
}

// BeatRunner records that runner owner is alive.
func (q *Queries) BeatRunner(ctx context.Context, owner string) error {
	_, err := q.db.Exec(ctx, `INSERT INTO runners (owner) VALUES ($1)
		ON CONFLICT (owner) DO UPDATE SET heartbeat_at = now()`, owner)
	if err != nil {
		return fmt.Errorf("runner heartbeat: %w", err)
	}
	return nil
}

// RemoveRunner forgets a runner that stopped cleanly, and runners silent
// for a day.
func (q *Queries) RemoveRunner(ctx context.Context, owner string) error {
	_, err := q.db.Exec(ctx, `DELETE FROM runners WHERE owner = $1 OR heartbeat_at < now() - interval '1 day'`, owner)
	if err != nil {
		return fmt.Errorf("remove runner: %w", err)
	}
	return nil
}

// RescueExpired returns claimed and working tasks whose lease expired to
// pending, each exactly once, and closes their open attempts as rescued —
// but only where the lease's runner is gone: it has not beaten for
// silentFor (or never did). A runner that lives but could not reach the
// database keeps its tasks and records their runs when it can. A task that
// ended while its dead runner's agent ran only loses the lease.
func (s *Store) RescueExpired(ctx context.Context, silentFor time.Duration) ([]task.Task, error) {
	var tasks []task.Task
	err := s.InTx(ctx, func(tx *Tx) error {
		const deadRunner = `t.lease_expires_at < now() AND NOT EXISTS (SELECT 1 FROM runners r
				WHERE r.owner = t.lease_owner AND r.heartbeat_at > now() - $1::interval)`
		rows, err := tx.db.Query(ctx, `UPDATE task_state t SET status = 'pending', lease_owner = NULL,
				lease_expires_at = NULL, not_before = now(), updated_at = now(),
				last_error = 'rescued: its runner stopped renewing the lease'
			WHERE t.id IN (SELECT t.id FROM task_state t
				WHERE t.status IN ('claimed', 'working') AND `+deadRunner+` `+lockInOrder+`)
			RETURNING `+taskColumnsT, leaseTTL(silentFor))
		if err != nil {
			return fmt.Errorf("rescue expired leases: %w", err)
		}
		if tasks, err = collectTasks(rows); err != nil {
			return err
		}
		ids := make([]int64, len(tasks))
		for i, t := range tasks {
			ids[i] = t.ID
		}
		var ended []int64
		rows, err = tx.db.Query(ctx, `UPDATE task_state t SET lease_owner = NULL, lease_expires_at = NULL,
				updated_at = now()
			WHERE t.id IN (SELECT t.id FROM task_state t
				WHERE t.status IN ('done', 'failed', 'cancelled') AND t.lease_owner IS NOT NULL AND `+deadRunner+`
				`+lockInOrder+`)
			RETURNING t.id`, leaseTTL(silentFor))
		if err != nil {
			return fmt.Errorf("drop dead runners' leases: %w", err)
		}
		if ended, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			return fmt.Errorf("drop dead runners' leases: %w", err)
		}
		if len(ids)+len(ended) == 0 {
			return nil
		}
		_, err = tx.db.Exec(ctx, `UPDATE task_attempts SET finished_at = now(), outcome = 'rescued',
				error = 'runner lost (mozi stopped or the machine rebooted)',
				duration_ms = (extract(epoch FROM now() - started_at) * 1000)::bigint
			WHERE task_id = ANY($1) AND finished_at IS NULL`, append(ids, ended...))
		if err != nil {
			return fmt.Errorf("close rescued attempts: %w", err)
		}
		return nil
	})
	if err == nil {
		s.observe(task.EventRescue, task.StatusPending, len(tasks))
	}
	return tasks, err
}

// WakeHeld makes the tasks held for reason due now (the Gitea outage they
// waited out is over) and returns how many.
func (q *Queries) WakeHeld(ctx context.Context, reason task.HoldReason) (int, error) {
	tag, err := q.db.Exec(ctx, `UPDATE task_state SET not_before = now(), updated_at = now()
		WHERE id IN (SELECT id FROM task_state WHERE status = 'pending' AND held_for = $1 AND not_before > now()
			`+lockInOrder+`)`, string(reason))
	if err != nil {
		return 0, fmt.Errorf("wake tasks held for %s: %w", reason, err)
	}
	return int(tag.RowsAffected()), nil
}

// RunningByAgent counts live runs (unexpired leases) per agent.
func (q *Queries) RunningByAgent(ctx context.Context) (map[string]int, error) {
	rows, err := q.db.Query(ctx, `SELECT agent, count(*) FROM task_state
		WHERE lease_owner IS NOT NULL AND lease_expires_at > now() GROUP BY agent`)
	if err != nil {
		return nil, fmt.Errorf("count running tasks: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var (
			agent string
			n     int
		)
		if err := rows.Scan(&agent, &n); err != nil {
			return nil, err
		}
		out[agent] = n
	}
	return out, rows.Err()
}
