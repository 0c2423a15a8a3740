package repository

import (
	"context"
	"fmt"
	"time"

	"github.com/moziplus/mozi/repository/task"
)

// StartAttempt records that a task's agent is being spawned.
func (q *Queries) StartAttempt(ctx context.Context, t task.Task, runner, logPath string) (task.Attempt, error) {
	a, err := q.insertAttempt(ctx, t, runner, logPath)
	if err != nil {
		return task.Attempt{}, fmt.Errorf("record attempt %d of task %d: %w", t.DispatchCount, t.ID, err)
	}
	return a, nil
}

// insertAttempt records attempt t.DispatchCount of t as running; a rescued
// attempt that is run again reuses its row.
func (q *Queries) insertAttempt(ctx context.Context, t task.Task, runner, logPath string) (task.Attempt, error) {
	a := task.Attempt{TaskID: t.ID, Attempt: t.DispatchCount, Agent: t.Agent, Runner: runner, Repo: t.Repo,
		Issue: t.IssueNumber, LogPath: logPath, Outcome: task.AttemptRunning}
	err := q.db.QueryRow(ctx, `INSERT INTO task_attempts (task_id, attempt, agent, runner, repo,
			issue_number, log_path) VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (task_id, attempt) DO UPDATE SET started_at = now(), runner = EXCLUDED.runner,
			finished_at = NULL, outcome = 'running', log_path = EXCLUDED.log_path, prompt = NULL
		RETURNING id, started_at`,
		a.TaskID, a.Attempt, a.Agent, a.Runner, a.Repo, a.Issue, a.LogPath).Scan(&a.ID, &a.StartedAt)
	return a, err
}

// FinishAttempt records how an attempt ended.
func (q *Queries) FinishAttempt(ctx context.Context, a task.Attempt) error {
	_, err := q.db.Exec(ctx, `UPDATE task_attempts SET finished_at = now(), exit_code = $2, outcome = $3,
			error = $4, output_tail = $5, duration_ms = $6, tokens_in = NULLIF($7, 0),
			tokens_out = NULLIF($8, 0), cost_usd = $9
		WHERE id = $1`,
		a.ID, a.ExitCode, a.Outcome, a.Error, a.OutputTail, a.Duration.Milliseconds(), a.TokensIn, a.TokensOut, a.CostUSD)
	if err != nil {
		return fmt.Errorf("finish attempt %d of task %d: %w", a.Attempt, a.TaskID, err)
	}
	return nil
}

// Attempts lists a task's attempts, oldest first.
func (q *Queries) Attempts(ctx context.Context, taskID int64) ([]task.Attempt, error) {
	rows, err := q.db.Query(ctx, `SELECT id, task_id, attempt, agent, runner, repo, issue_number,
			started_at, finished_at, exit_code, outcome, error, output_tail, log_path,
			COALESCE(duration_ms, 0), COALESCE(tokens_in, 0), COALESCE(tokens_out, 0), cost_usd::float8
		FROM task_attempts WHERE task_id = $1 ORDER BY attempt, id`, taskID)
	if err != nil {
		return nil, fmt.Errorf("list attempts of task %d: %w", taskID, err)
	}
	defer rows.Close()
	var out []task.Attempt
	for rows.Next() {
		var (
			a        task.Attempt
			finished *time.Time
			ms       int64
			exit     *int32
		)
		if err := rows.Scan(&a.ID, &a.TaskID, &a.Attempt, &a.Agent, &a.Runner, &a.Repo, &a.Issue,
			&a.StartedAt, &finished, &exit, &a.Outcome, &a.Error, &a.OutputTail, &a.LogPath, &ms,
			&a.TokensIn, &a.TokensOut, &a.CostUSD); err != nil {
			return nil, fmt.Errorf("scan attempt: %w", err)
		}
		a.FinishedAt, a.Duration = derefTime(finished), time.Duration(ms)*time.Millisecond
		if exit != nil {
			code := int(*exit)
			a.ExitCode = &code
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// SpawnCounts counts the attempts started since for an issue and for an
// agent: the spawn budgets.
func (q *Queries) SpawnCounts(ctx context.Context, repo string, issue int, agent string, since time.Time) (perIssue, perAgent int, err error) {
	err = q.db.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM task_attempts WHERE repo = $1 AND issue_number = $2 AND started_at > $4),
			(SELECT count(*) FROM task_attempts WHERE agent = $3 AND started_at > $4)`,
		repo, issue, agent, since).Scan(&perIssue, &perAgent)
	if err != nil {
		return 0, 0, fmt.Errorf("count spawns of %s#%d and %s: %w", repo, issue, agent, err)
	}
	return perIssue, perAgent, nil
}

// StartRun moves a claimed task to working for owner and records its
// attempt, in one transaction. started is false when the task moved
// meanwhile (nothing is recorded then).
func (s *Store) StartRun(ctx context.Context, t task.Task, owner, logPath string) (task.Attempt, bool, error) {
	var (
		a       task.Attempt
		started bool
	)
	err := s.InTx(ctx, func(tx *Tx) error {
		res, err := tx.Apply(ctx, t.ID, task.EventStart, Change{LeaseOwner: owner})
		if err != nil || !res.Applied {
			return err
		}
		started = true
		a, err = tx.insertAttempt(ctx, t, owner, logPath)
		return err
	})
	if err != nil {
		return task.Attempt{}, false, fmt.Errorf("start run of task %d: %w", t.ID, err)
	}
	return a, started, nil
}

// RunEnd is how a run ended, to record.
type RunEnd struct {
	Attempt task.Attempt
	// Owner is the runner that held the run's lease.
	Owner string
	// Event moves the task (with Change); "" only drops the run's lease
	// (the task waits for Gitea).
	Event  task.Event
	Change Change
	// Reclaim: the run ended by itself (it was not killed for a lost lease
	// or a shutdown), so if the ticker rescued its task while the runner
	// could not reach the database, and nobody claimed it since, the
	// runner takes it back and records this outcome instead of the task
	// running again.
	Reclaim bool
}

// FinishRun records how an attempt ended and moves its task, in one
// transaction, and drops the run's lease: the agent's slot is free again.
// The task moves only while e.Owner holds its lease for this attempt;
// otherwise Result.Applied is false and From says where it is.
func (s *Store) FinishRun(ctx context.Context, e RunEnd) (Result, error) {
	var res Result
	a := e.Attempt
	err := s.InTx(ctx, func(tx *Tx) error {
		if a.ID != 0 {
			if err := tx.FinishAttempt(ctx, a); err != nil {
				return err
			}
		}
		if e.Reclaim && a.Attempt > 0 {
			if _, err := tx.Apply(ctx, a.TaskID, task.EventReclaim, Change{LeaseOwner: e.Owner, Attempt: a.Attempt}); err != nil {
				return err
			}
		}
		// Only the run that holds the task may move it: a run whose task
		// was rescued and claimed by another runner records its attempt
		// and nothing more, or it would fail, retry or complete the newer
		// run's task. The row stays locked until commit, so the check and
		// the move are one.
		var (
			owner      *string
			dispatches int
			status     string
		)
		if err := tx.db.QueryRow(ctx, `SELECT lease_owner, dispatch_count, status FROM task_state WHERE id = $1 FOR UPDATE`,
			a.TaskID).Scan(&owner, &dispatches, &status); err != nil {
			return fmt.Errorf("lock task %d: %w", a.TaskID, err)
		}
		res = Result{From: task.Status(status)}
		if owner == nil || *owner != e.Owner || a.Attempt > 0 && dispatches != a.Attempt {
			return nil
		}
		if e.Event != "" {
			var err error
			if res, err = tx.Apply(ctx, a.TaskID, e.Event, e.Change); err != nil {
				return err
			}
		}
		// The run is over: its lease goes, whatever the task's status (a
		// task Gitea ended while its agent ran kept it until now).
		_, err := tx.db.Exec(ctx, `UPDATE task_state SET lease_owner = NULL, lease_expires_at = NULL,
				updated_at = now() WHERE id = $1 AND lease_owner = $2`, a.TaskID, e.Owner)
		if err != nil {
			return fmt.Errorf("drop the lease of task %d: %w", a.TaskID, err)
		}
		return nil
	})
	if err != nil {
		return Result{}, fmt.Errorf("finish run of task %d: %w", a.TaskID, err)
	}
	return res, nil
}
