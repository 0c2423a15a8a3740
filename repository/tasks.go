package repository

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moziplus/mozi/repository/task"
)

var (
	// ErrDuplicateTask means the database refused a task because a live one
	// for the same (repo, issue, action, agent) exists, or one with the same
	// dedupe key was made before.
	ErrDuplicateTask = errors.New("duplicate task")
)

// NewTask describes a task to create.
type NewTask struct {
	Repo         string
	IssueNumber  int
	PRNumber     int
	ParentIssue  int
	ActionType   task.ActionType
	BusinessType task.BusinessType
	Agent        string
	// Priority is 0 (P0, most urgent) … 3 (P3); callers without a
	// priority label pass DefaultPriority.
	Priority       int
	MaxRetries     int // 0: DefaultMaxRetries; NoRetries: none
	DependsOn      []int
	Meta           task.Meta
	IssueBody      string // kept as task.CapBody keeps it
	IssueUpdatedAt time.Time
	DedupeKey      string
	HopCount       int
	NotBefore      time.Time // zero: now
}

func (n NewTask) validate() error {
	switch {
	case !strings.Contains(n.Repo, "/"):
		return fmt.Errorf("repo %q is not owner/name", n.Repo)
	case n.IssueNumber < 0 || n.IssueNumber == 0 && !n.ActionType.RepositoryLevel():
		return fmt.Errorf("issue number %d is not positive", n.IssueNumber)
	case n.Agent == "":
		return errors.New("agent is empty")
	case n.Priority < task.PriorityP0 || n.Priority > task.PriorityP3:
		return fmt.Errorf("priority %d is outside 0..3", n.Priority)
	}
	if _, err := task.ParseActionType(string(n.ActionType)); err != nil {
		return err
	}
	if n.BusinessType != "" {
		if _, err := task.ParseBusinessType(string(n.BusinessType)); err != nil {
			return err
		}
	}
	return nil
}

const taskColumns = `id, repo, issue_number, pr_number, parent_issue, action_type, business_type,
	agent, status, retry_count, dispatch_count, max_retries, priority, depends_on, daemon_meta,
	issue_body_cache, issue_updated_at, dedupe_key, hop_count, not_before, lease_owner,
	lease_expires_at, heartbeat_at, last_error, created_at, updated_at, finished_at, holds, held_for, ended_by, wait_reason`

// lockInOrder ends the subquery that picks the task rows a statement
// changes several of: it locks them by id. Every writer of several tasks
// takes them in that order (and transactions that move tasks one by one
// go by LiveTasks, also ordered by id), so no two writers wait for each
// other in a cycle (a deadlock, 40P01). Advisory locks come before: a
// commit (LockCommit), then issues (LockIssue).
const lockInOrder = `ORDER BY id FOR UPDATE`

// createdTaskColumns is what CreateTask reads back: the row but its copy
// of the issue body, which the caller already has.
var createdTaskColumns = strings.Replace(taskColumns, "issue_body_cache", "''::text", 1)

// CreateTask inserts a pending task. It returns ErrDuplicateTask when the
// database refuses it as a second live task or a repeated dedupe key.
func (q *Queries) CreateTask(ctx context.Context, n NewTask) (task.Task, error) {
	if err := n.validate(); err != nil {
		return task.Task{}, fmt.Errorf("create task: %w", err)
	}
	meta, err := json.Marshal(n.Meta)
	if err != nil {
		return task.Task{}, fmt.Errorf("create task: encode meta: %w", err)
	}
	maxRetries := task.EffectiveMaxRetries(n.MaxRetries)
	depends := n.DependsOn
	if depends == nil {
		depends = []int{}
	}
	body := task.CapBody(n.IssueBody)
	row := q.db.QueryRow(ctx, `
		INSERT INTO task_state (repo, issue_number, pr_number, parent_issue, action_type,
			business_type, agent, max_retries, priority, depends_on, daemon_meta,
			issue_body_cache, issue_updated_at, dedupe_key, hop_count, not_before)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15,
			COALESCE($16, now()))
		ON CONFLICT DO NOTHING
		RETURNING `+createdTaskColumns,
		n.Repo, n.IssueNumber, nullInt(n.PRNumber), nullInt(n.ParentIssue), string(n.ActionType),
		string(n.BusinessType), n.Agent, maxRetries, n.Priority, depends, meta,
		body, nullTime(n.IssueUpdatedAt), nullString(n.DedupeKey), n.HopCount,
		nullTime(n.NotBefore))
	t, err := scanTask(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return task.Task{}, fmt.Errorf("create %s task for %s#%d agent %s: %w",
			n.ActionType, n.Repo, n.IssueNumber, n.Agent, ErrDuplicateTask)
	}
	if err != nil {
		return task.Task{}, fmt.Errorf("create %s task for %s#%d: %w", n.ActionType, n.Repo, n.IssueNumber, err)
	}
	t.IssueBodyCache = body
	return t, nil
}

// Task returns the local row of one task.
func (q *Queries) Task(ctx context.Context, id int64) (task.Task, error) {
	t, err := scanTask(q.db.QueryRow(ctx, `SELECT `+taskColumns+` FROM task_state WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return task.Task{}, fmt.Errorf("task %d: %w", id, task.ErrNotFound)
	}
	if err != nil {
		return task.Task{}, fmt.Errorf("read task %d: %w", id, err)
	}
	return t, nil
}

// TaskFilter selects tasks for listing; zero fields match everything.
type TaskFilter struct {
	Status      task.Status
	Repo        string
	IssueNumber int
	Agent       string
	ActionType  task.ActionType
	Limit       int // 0: 100
}

// ListTasks returns tasks matching the filter, newest first.
func (q *Queries) ListTasks(ctx context.Context, f TaskFilter) ([]task.Task, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := q.db.Query(ctx, `SELECT `+taskColumns+` FROM task_state
		WHERE ($1 = '' OR status = $1) AND ($2 = '' OR repo = $2)
		  AND ($3 = 0 OR issue_number = $3) AND ($4 = '' OR agent = $4)
		  AND ($5 = '' OR action_type = $5)
		ORDER BY id DESC LIMIT $6`,
		string(f.Status), f.Repo, f.IssueNumber, f.Agent, string(f.ActionType), limit)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return collectTasks(rows)
}

func collectTasks(rows pgx.Rows) ([]task.Task, error) {
	defer rows.Close()
	var out []task.Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, fmt.Errorf("scan task: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read tasks: %w", err)
	}
	return out, nil
}

func scanTask(row pgx.Row) (task.Task, error) { return scanTaskWith(row) }

// scanTaskWith scans a task's columns followed by more.
func scanTaskWith(row pgx.Row, more ...any) (task.Task, error) {
	var (
		t                                      task.Task
		pr, parent                             *int32
		action, business, status               string
		meta                                   []byte
		issueUpdated, leaseExp, beat, finished *time.Time
		dedupe, leaseOwner                     *string
		heldFor, waitReason                    string
		depends                                []int32
	)
	err := row.Scan(append([]any{&t.ID, &t.Repo, &t.IssueNumber, &pr, &parent, &action, &business,
		&t.Agent, &status, &t.RetryCount, &t.DispatchCount, &t.MaxRetries, &t.Priority,
		&depends, &meta, &t.IssueBodyCache, &issueUpdated, &dedupe, &t.HopCount,
		&t.NotBefore, &leaseOwner, &leaseExp, &beat, &t.LastError, &t.CreatedAt,
		&t.UpdatedAt, &finished, &t.Holds, &heldFor, &t.EndedBy, &waitReason}, more...)...)
	if err != nil {
		return task.Task{}, err
	}
	t.ActionType, t.BusinessType, t.Status = task.ActionType(action), task.BusinessType(business), task.Status(status)
	t.HeldFor, t.WaitReason = task.HoldReason(heldFor), task.WaitReason(waitReason)
	t.PRNumber, t.ParentIssue = derefInt(pr), derefInt(parent)
	t.IssueUpdatedAt, t.LeaseExpiresAt = derefTime(issueUpdated), derefTime(leaseExp)
	t.HeartbeatAt, t.FinishedAt = derefTime(beat), derefTime(finished)
	t.DedupeKey, t.LeaseOwner = derefString(dedupe), derefString(leaseOwner)
	for _, d := range depends {
		t.DependsOn = append(t.DependsOn, int(d))
	}
	if err := json.Unmarshal(meta, &t.Meta); err != nil {
		return task.Task{}, fmt.Errorf("decode daemon_meta of task %d: %w", t.ID, err)
	}
	return t, nil
}

// isUniqueViolation reports whether err is PostgreSQL's unique_violation.
func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

func nullInt(v int) *int {
	if v == 0 {
		return nil
	}
	return &v
}

func nullString(v string) *string {
	if v == "" {
		return nil
	}
	return &v
}

func nullTime(v time.Time) *time.Time {
	if v.IsZero() {
		return nil
	}
	return &v
}

func derefInt(v *int32) int {
	if v == nil {
		return 0
	}
	return int(*v)
}

func derefString(v *string) string {
	if v == nil {
		return ""
	}
	return *v
}

func derefTime(v *time.Time) time.Time {
	if v == nil {
		return time.Time{}
	}
	return *v
}

// PatchTaskMeta writes the fields set in patch into a task's daemon_meta
// and removes the fields named in clear (JSON names), leaving every other
// field as it is in the row: writers that do not share a lock (webhook
// rules, the watchdog, failure notices) never undo each other. Extra is
// merged key by key.
func (q *Queries) PatchTaskMeta(ctx context.Context, id int64, patch task.Meta, clear ...string) error {
	doc, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("encode meta of task %d: %w", id, err)
	}
	tag, err := q.db.Exec(ctx, `UPDATE task_state SET daemon_meta = (daemon_meta - COALESCE($3::text[], '{}')) || ($2::jsonb - 'extra')
			|| CASE WHEN $2::jsonb ? 'extra'
			   THEN jsonb_build_object('extra', COALESCE(daemon_meta->'extra', '{}'::jsonb) || ($2::jsonb->'extra'))
			   ELSE '{}'::jsonb END,
			updated_at = now()
		WHERE id = $1`, id, doc, clear)
	if err != nil {
		return fmt.Errorf("update meta of task %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("update meta of task %d: %w", id, task.ErrNotFound)
	}
	return nil
}

func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// qualify prefixes each column of a column list with alias.
func qualify(alias, columns string) string {
	parts := strings.Split(columns, ",")
	for i, p := range parts {
		parts[i] = alias + "." + strings.TrimSpace(p)
	}
	return strings.Join(parts, ", ")
}
