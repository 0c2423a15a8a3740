package repository

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/moziplus/mozi/repository/task"
)

// Tx is a unit of work: every change made through it commits or rolls back
// together. The webhook mapper applies one delivery's effects in one Tx.
type Tx struct {
	Queries
	tx pgx.Tx
	// clock is frozen at the transaction's start (nil: the database's).
	clock Clock
	// applied transitions are reported to the store's observer after commit.
	applied []appliedTransition
}

type appliedTransition struct {
	ev task.Event
	to task.Status
	n  int
}

func newTx(pgtx pgx.Tx, clock Clock) *Tx {
	if clock != nil {
		clock = frozen(clock.Now())
	}
	t := &Tx{tx: pgtx, clock: clock}
	t.Queries = Queries{db: withClock(pgtx, clock), observe: func(ev task.Event, to task.Status, n int) {
		t.applied = append(t.applied, appliedTransition{ev, to, n})
	}}
	return t
}

// InTx runs fn in a transaction, committing when it returns nil.
func (s *Store) InTx(ctx context.Context, fn func(tx *Tx) error) error {
	pgtx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	defer pgtx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	tx := newTx(pgtx, s.clock)
	if err := fn(tx); err != nil {
		return err
	}
	if err := pgtx.Commit(ctx); err != nil {
		return fmt.Errorf("commit transaction: %w", err)
	}
	for _, a := range tx.applied {
		s.observe(a.ev, a.to, a.n)
	}
	return nil
}

// LockCommit serialises the events about one commit across connections
// and replicas until the transaction ends: its statuses, and the pull
// request events that make it a head. Without it a status handled beside
// the push that made its commit a head finds neither the pull request
// (not committed yet) nor is found by it (its note not committed yet).
// Lock order: a commit before any issue (LockIssue).
func (t *Tx) LockCommit(ctx context.Context, repo, sha string) error {
	if sha == "" {
		return nil
	}
	_, err := t.db.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1 || '@' || $2, 0))`, repo, sha)
	if err != nil {
		return fmt.Errorf("lock commit %s of %s: %w", sha, repo, err)
	}
	return nil
}

// LockIssue serialises work on one issue across connections and replicas
// until the transaction ends.
func (t *Tx) LockIssue(ctx context.Context, repo string, number int) error {
	_, err := t.db.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, $2))`, repo, int64(number))
	if err != nil {
		return fmt.Errorf("lock %s#%d: %w", repo, number, err)
	}
	return nil
}

// LiveTasks returns the live tasks of an issue or pull request, oldest first.
func (q *Queries) LiveTasks(ctx context.Context, repo string, number int) ([]task.Task, error) {
	rows, err := q.db.Query(ctx, `SELECT `+taskColumns+` FROM task_state
		WHERE repo = $1 AND issue_number = $2 AND status IN ('pending', 'claimed', 'working', 'review', 'waiting')
		ORDER BY id`, repo, number)
	if err != nil {
		return nil, fmt.Errorf("live tasks of %s#%d: %w", repo, number, err)
	}
	return collectTasks(rows)
}

// LatestTask returns the newest task (live or not) of an agent on an issue
// (task.ErrNotFound: the agent never had one there).
func (q *Queries) LatestTask(ctx context.Context, repo string, number int, agent string) (task.Task, error) {
	rows, err := q.db.Query(ctx, `SELECT `+taskColumns+` FROM task_state
		WHERE repo = $1 AND issue_number = $2 AND agent = $3 ORDER BY id DESC LIMIT 1`, repo, number, agent)
	if err != nil {
		return task.Task{}, fmt.Errorf("latest task of %s on %s#%d: %w", agent, repo, number, err)
	}
	tasks, err := collectTasks(rows)
	if err != nil {
		return task.Task{}, err
	}
	if len(tasks) == 0 {
		return task.Task{}, fmt.Errorf("task of %s on %s#%d: %w", agent, repo, number, task.ErrNotFound)
	}
	return tasks[0], nil
}

// Guard is what a new task is checked against, whoever creates it (a
// webhook's mapping or the ticker): the same rules for every task.
type Guard struct {
	// At is when the causing event happened (zero: unknown). Work caused
	// before its issue was closed is not created: the close finished it.
	At time.Time
	// Notification tasks are about the close itself and skip that check.
	Notification bool
	// BudgetPerHour caps the tasks created on one issue in an hour, which
	// stops runaway chains (0: no cap).
	BudgetPerHour int
}

// Refusal says why CreateGuarded made no task ("" when it made one).
type Refusal string

// Refusals.
const (
	RefusedClosed    Refusal = "issue_closed" // the issue was closed after the event
	RefusedBudget    Refusal = "budget"       // the issue's hourly task budget is spent
	RefusedDuplicate Refusal = "duplicate"    // a live task like it, or its dedupe key, exists
)

// CreateGuarded creates a pending task unless a guard refuses it.
func (t *Tx) CreateGuarded(ctx context.Context, n NewTask, g Guard) (task.Task, Refusal, error) {
	if n.IssueNumber > 0 && !g.Notification {
		closedAt, closed, err := t.closedAt(ctx, n.Repo, n.IssueNumber)
		if err != nil {
			return task.Task{}, "", err
		}
		if closed && !g.At.After(closedAt) {
			return task.Task{}, RefusedClosed, nil
		}
	}
	if n.IssueNumber > 0 && g.BudgetPerHour > 0 {
		var recent int
		err := t.db.QueryRow(ctx, `SELECT count(*) FROM task_state
			WHERE repo = $1 AND issue_number = $2 AND created_at > now() - interval '1 hour'`,
			n.Repo, n.IssueNumber).Scan(&recent)
		if err != nil {
			return task.Task{}, "", fmt.Errorf("count recent tasks of %s#%d: %w", n.Repo, n.IssueNumber, err)
		}
		if recent >= g.BudgetPerHour {
			return task.Task{}, RefusedBudget, nil
		}
	}
	tk, err := t.CreateTask(ctx, n)
	if errors.Is(err, ErrDuplicateTask) {
		return task.Task{}, RefusedDuplicate, nil
	}
	if err != nil {
		return task.Task{}, "", err
	}
	return tk, "", nil
}

// closedAt reports whether the issue or pull request is known closed, and
// since when.
func (t *Tx) closedAt(ctx context.Context, repo string, number int) (time.Time, bool, error) {
	pr, err := t.PullRequest(ctx, repo, number)
	if err == nil {
		return pr.ClosedAt, pr.State == "closed", nil
	}
	if !errors.Is(err, task.ErrNotFound) {
		return time.Time{}, false, err
	}
	issue, err := t.Issue(ctx, repo, number)
	if errors.Is(err, task.ErrNotFound) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, err
	}
	return issue.ClosedAt, issue.Closed(), nil
}

// IssueFacts are the issue fields copied onto its live tasks when the
// issue changes.
type IssueFacts struct {
	BusinessType task.BusinessType // applied to issue_assigned tasks only
	Priority     int
	ParentIssue  int
	DependsOn    []int
	Body         string // kept as task.CapBody keeps it
	UpdatedAt    time.Time
	Title        string
	Labels       []string
}

// RefreshLiveTasks copies an issue's current facts onto its live tasks.
func (q *Queries) RefreshLiveTasks(ctx context.Context, repo string, number int, f IssueFacts) error {
	depends := f.DependsOn
	if depends == nil {
		depends = []int{}
	}
	labels := f.Labels
	if labels == nil {
		labels = []string{}
	}
	_, err := q.db.Exec(ctx, `UPDATE task_state SET
			business_type = CASE WHEN action_type = 'issue_assigned' THEN $3 ELSE business_type END,
			priority = $4, parent_issue = $5, depends_on = $6, issue_body_cache = $7,
			issue_updated_at = COALESCE($8, issue_updated_at),
			daemon_meta = daemon_meta || jsonb_build_object('title', $9::text, 'labels', to_jsonb($10::text[])),
			updated_at = now()
		WHERE id IN (SELECT id FROM task_state
			WHERE repo = $1 AND issue_number = $2 AND status IN ('pending', 'claimed', 'working', 'review', 'waiting')
			`+lockInOrder+`)`,
		repo, number, string(f.BusinessType), f.Priority, nullInt(f.ParentIssue), depends, task.CapBody(f.Body),
		nullTime(f.UpdatedAt), f.Title, labels)
	if err != nil {
		return fmt.Errorf("refresh live tasks of %s#%d: %w", repo, number, err)
	}
	return nil
}

// WakeDependents makes the held tasks that wait for issue number (its
// Depends: lines, or Gitea's blocked-by) due now: its close may free them,
// and they need not wait out their hold.
func (q *Queries) WakeDependents(ctx context.Context, repo string, number int) error {
	_, err := q.db.Exec(ctx, `UPDATE task_state SET not_before = now(), updated_at = now()
		WHERE id IN (SELECT d.id FROM task_state d
			WHERE d.status = 'pending' AND d.repo = $1 AND d.not_before > now()
			  AND ($2 = ANY(d.depends_on) OR EXISTS (SELECT 1 FROM issues i
			       WHERE i.repo = d.repo AND i.number = d.issue_number AND $2 = ANY(i.blocked_by)))
			`+lockInOrder+`)`, repo, number)
	if err != nil {
		return fmt.Errorf("wake tasks waiting for %s#%d: %w", repo, number, err)
	}
	return nil
}
