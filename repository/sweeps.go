package repository

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/moziplus/mozi/repository/task"
)

// DueDiscussions lists open, unassigned top-level issues whose discussion
// broadcast is due and not sent. An issue with deliveries still waiting in
// the inbox is not due yet: behind a backlog longer than the grace, its
// assignment may be one of them.
func (q *Queries) DueDiscussions(ctx context.Context, limit int) ([]task.Issue, error) {
	rows, err := q.db.Query(ctx, `SELECT `+issueColumns+` FROM issues i
		WHERE discussion_due_at <= now() AND discussed_at IS NULL AND state = 'open'
		  AND assignees = '{}' AND parent_issue IS NULL AND NOT is_pull
		  AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d
			WHERE d.processed_at IS NULL AND d.outcome = ''
			  AND d.repo = i.repo AND d.issue_number = i.number)
		ORDER BY discussion_due_at LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("list due discussions: %w", err)
	}
	defer rows.Close()
	var out []task.Issue
	for rows.Next() {
		i, err := scanIssue(rows)
		if err != nil {
			return nil, fmt.Errorf("scan issue: %w", err)
		}
		out = append(out, i)
	}
	return out, rows.Err()
}

// MarkDiscussed records that an issue's discussion broadcast was sent.
func (q *Queries) MarkDiscussed(ctx context.Context, repo string, number int) (bool, error) {
	tag, err := q.db.Exec(ctx, `UPDATE issues SET discussed_at = now()
		WHERE repo = $1 AND number = $2 AND discussed_at IS NULL`, repo, number)
	if err != nil {
		return false, fmt.Errorf("mark %s#%d discussed: %w", repo, number, err)
	}
	return tag.RowsAffected() == 1, nil
}

// RoundDue is a parent issue whose sub-issues are all finished and not yet
// reviewed as a round.
type RoundDue struct {
	Repo   string
	Parent int
	Round  int    // this round's number
	Key    string // "round#<parent>:<subs>": a set of sub-issues is reviewed once
}

// DueRounds lists open parent issues whose every sub-issue is finished —
// closed, or every task it had is terminal (seed §16: a failed sub ends
// its part of the round too) — for a set of sub-issues no round review
// covered yet. A sub-issue nobody has worked on yet is not finished.
//
// It reads the parents marked open and not settled (issue_parents, kept by
// the database as issues are saved) down to their sub-issues. It settles
// those whose set is finished and reviewed (until a sub-issue is added to
// or moved away from them they cannot be due), and marks closed those it
// finds closed or missing (a sub-issue saved after its parent closed marks
// it open); either only if the mark did not change since it was read. So
// neither the parents of past rounds nor open issues without sub-issues
// are read, however many the history holds. Each parent is looked up by
// its key: statistics not yet refreshed after many marks changed must not
// make the planner hash every issue. (An operator deleting a round
// review task does not make its round due again.)
func (q *Queries) DueRounds(ctx context.Context) ([]RoundDue, error) {
	rows, err := q.db.Query(ctx, `
		WITH marked AS MATERIALIZED (
			SELECT m.repo, m.number, m.changes, COALESCE((SELECT p.state = 'open' FROM issues p
			           WHERE p.repo = m.repo AND p.number = m.number), false) AS open
			FROM issue_parents m
			WHERE m.open AND NOT m.settled
		), complete AS MATERIALIZED (
			SELECT c.repo, c.number, c.changes, s.key,
			       EXISTS (SELECT 1 FROM task_state r WHERE r.repo = c.repo AND r.action_type = 'round_review'
			               AND r.dedupe_key = s.key) AS reviewed
			FROM marked c
			CROSS JOIN LATERAL (
				SELECT count(*) AS n,
				       count(*) FILTER (WHERE i.state = 'closed' OR (
				           EXISTS (SELECT 1 FROM task_state t WHERE t.repo = i.repo AND t.issue_number = i.number)
				           AND NOT EXISTS (SELECT 1 FROM task_state t WHERE t.repo = i.repo AND t.issue_number = i.number
				                           AND t.status IN ('pending', 'claimed', 'working', 'review', 'waiting')))) AS finished,
				       'round#' || c.number || ':' || string_agg(i.number::text, ',' ORDER BY i.number) AS key
				FROM issues i WHERE i.repo = c.repo AND i.parent_issue = c.number AND NOT i.is_pull
			) s
			WHERE c.open AND s.n > 0 AND s.n = s.finished
		), closed AS (
			UPDATE issue_parents m SET open = false FROM marked c
			WHERE NOT c.open AND m.repo = c.repo AND m.number = c.number AND m.changes = c.changes
		), settled AS (
			UPDATE issue_parents m SET settled = true FROM complete c
			WHERE c.reviewed AND m.repo = c.repo AND m.number = c.number AND m.changes = c.changes
		)
		SELECT c.repo, c.number, c.key,
		       (SELECT count(*) FROM task_state r WHERE r.repo = c.repo AND r.issue_number = c.number
		          AND r.action_type = 'round_review') + 1
		FROM complete c WHERE NOT c.reviewed`)
	if err != nil {
		return nil, fmt.Errorf("list due rounds: %w", err)
	}
	defer rows.Close()
	var out []RoundDue
	for rows.Next() {
		var r RoundDue
		if err := rows.Scan(&r.Repo, &r.Parent, &r.Key, &r.Round); err != nil {
			return nil, fmt.Errorf("scan round: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// IssueRef names an issue or pull request.
type IssueRef struct {
	Repo   string
	Number int
	IsPull bool
}

// StaleLiveIssues lists issues and pull requests with live tasks whose
// cached state is older than staleAfter (or unknown): the reconcile pass
// asks Gitea about them in case a webhook was lost.
func (q *Queries) StaleLiveIssues(ctx context.Context, staleAfter time.Duration, limit int) ([]IssueRef, error) {
	rows, err := q.db.Query(ctx, `
		SELECT DISTINCT t.repo, t.issue_number, COALESCE(t.pr_number = t.issue_number, false)
		FROM task_state t
		LEFT JOIN issues i ON i.repo = t.repo AND i.number = t.issue_number
		LEFT JOIN pull_requests p ON p.repo = t.repo AND p.number = t.issue_number
		WHERE t.status IN ('pending', 'claimed', 'working', 'review', 'waiting') AND t.issue_number > 0
		  AND COALESCE(p.synced_at, i.synced_at, '-infinity') < now() - $1::interval
		LIMIT $2`, interval(staleAfter), limit)
	if err != nil {
		return nil, fmt.Errorf("list stale issues: %w", err)
	}
	defer rows.Close()
	var out []IssueRef
	for rows.Next() {
		var r IssueRef
		if err := rows.Scan(&r.Repo, &r.Number, &r.IsPull); err != nil {
			return nil, fmt.Errorf("scan issue ref: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// TouchIssue records that Gitea confirmed mozi's copy of an issue.
func (q *Queries) TouchIssue(ctx context.Context, ref IssueRef) error {
	table := "issues"
	if ref.IsPull {
		table = "pull_requests"
	}
	_, err := q.db.Exec(ctx, `UPDATE `+table+` SET synced_at = now() WHERE repo = $1 AND number = $2`,
		ref.Repo, ref.Number)
	if err != nil {
		return fmt.Errorf("touch %s#%d: %w", ref.Repo, ref.Number, err)
	}
	return nil
}

// OpenPullRequestsInReview lists open pull requests some live task waits
// on. It reads from the live tasks to their pull requests: merged and
// closed ones, however many, are never scanned.
func (q *Queries) OpenPullRequestsInReview(ctx context.Context, limit int) ([]task.PullRequest, error) {
	rows, err := q.db.Query(ctx, `SELECT `+qualify("p", prColumns)+` FROM pull_requests p
		WHERE (p.repo, p.number) IN (
			SELECT t.repo, t.pr_number FROM task_state t
			WHERE t.status IN ('pending', 'claimed', 'working', 'review', 'waiting') AND t.pr_number IS NOT NULL)
		  AND p.state = 'open' AND p.head_sha <> ''
		ORDER BY p.synced_at LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("list pull requests in review: %w", err)
	}
	defer rows.Close()
	var out []task.PullRequest
	for rows.Next() {
		p, err := scanPR(rows)
		if err != nil {
			return nil, fmt.Errorf("scan pull request: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// FailOrphans fails pending tasks whose agent is not declared any more.
func (q *Queries) FailOrphans(ctx context.Context, declared []string) ([]task.Task, error) {
	rows, err := q.db.Query(ctx, `UPDATE task_state t SET status = 'failed', finished_at = now(),
			updated_at = now(), last_error = 'agent ' || t.agent || ' is not declared in mozi''s configuration'
		WHERE t.id IN (SELECT id FROM task_state WHERE status = 'pending' AND NOT (agent = ANY($1)) `+lockInOrder+`)
		RETURNING `+taskColumnsT, declared)
	if err != nil {
		return nil, fmt.Errorf("fail orphaned tasks: %w", err)
	}
	tasks, err := collectTasks(rows)
	if err == nil {
		q.observe(task.EventFail, task.StatusFailed, len(tasks))
	}
	return tasks, err
}

// PruneResult counts what a prune removed.
type PruneResult struct {
	Deliveries int64
	Effects    int64
	Mentions   int64
	Statuses   int64
	// LogPaths are the log files of pruned attempts, for the caller to delete.
	LogPaths []string
}

// Prune deletes processed deliveries, effect keys, consumed mentions, old
// kept statuses, and the logs of attempts of tasks finished before cutoff.
// Each statement is bounded by an indexed time column, so that it reads
// what aged out since the last prune, not the whole retention: a
// delivery is received before it is processed, and an attempt starts
// before its task finishes.
func (s *Store) Prune(ctx context.Context, cutoff time.Time) (PruneResult, error) {
	var r PruneResult
	err := s.InTx(ctx, func(tx *Tx) error {
		for _, q := range []struct {
			n   *int64
			sql string
		}{
			{&r.Deliveries, `DELETE FROM webhook_deliveries WHERE received_at < $1 AND processed_at < $1 AND outcome <> 'parked'`},
			{&r.Effects, `DELETE FROM webhook_effects WHERE created_at < $1`},
			{&r.Mentions, `DELETE FROM mention_queue WHERE consumed_at < $1`},
			{&r.Statuses, `DELETE FROM commit_statuses WHERE created_at < $1`},
			// The breaker looks back minutes, not the retention.
			{new(int64), `DELETE FROM agent_comments WHERE created_at < GREATEST($1, now() - interval '1 day')`},
		} {
			tag, err := tx.db.Exec(ctx, q.sql, cutoff)
			if err != nil {
				return fmt.Errorf("prune: %w", err)
			}
			*q.n = tag.RowsAffected()
		}
		// Attempts whose log is kept are found by the start (a partial
		// index), their task's end looked up for each: joined, the planner
		// hashes every finished task.
		// The stored prompt goes with the log: both are the run's record.
		rows, err := tx.db.Query(ctx, `UPDATE task_attempts a SET log_path = '', prompt = NULL
			WHERE a.log_path <> '' AND a.started_at < $1
			  AND (SELECT t.finished_at FROM task_state t WHERE t.id = a.task_id) < $1
			RETURNING (SELECT log_path FROM task_attempts o WHERE o.id = a.id)`, cutoff)
		if err != nil {
			return fmt.Errorf("prune attempt logs: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var p string
			if err := rows.Scan(&p); err != nil {
				return err
			}
			r.LogPaths = append(r.LogPaths, p)
		}
		return rows.Err()
	})
	return r, err
}

// TaskCount is the number of tasks with one status and action type, and,
// for a live status, how long the least recently updated of them has not
// moved (0 for finished ones).
type TaskCount struct {
	Status     task.Status
	ActionType task.ActionType
	N          int
	OldestAge  time.Duration
}

// TaskCounts counts tasks by status and action type (metrics gauges).
// Live tasks are counted from their rows (few, through the status index);
// finished ones, which only grow, from the counts the database keeps as
// tasks finish (task_counts plus the changes not folded into it yet, read
// in one snapshot: exact either way).
func (q *Queries) TaskCounts(ctx context.Context) ([]TaskCount, error) {
	rows, err := q.db.Query(ctx, `
		SELECT status, action_type, count(*), extract(epoch FROM now() - min(updated_at))::float8
		FROM task_state WHERE status IN ('pending', 'claimed', 'working', 'review', 'waiting') GROUP BY 1, 2
		UNION ALL
		SELECT status, action_type, sum(n)::bigint, 0::float8 FROM (
			SELECT status, action_type, n FROM task_counts
			UNION ALL
			SELECT status, action_type, n FROM task_count_changes) f
		GROUP BY 1, 2 HAVING sum(n) <> 0`)
	if err != nil {
		return nil, fmt.Errorf("count tasks: %w", err)
	}
	defer rows.Close()
	var out []TaskCount
	for rows.Next() {
		var (
			c   TaskCount
			age float64
		)
		if err := rows.Scan(&c.Status, &c.ActionType, &c.N, &age); err != nil {
			return nil, fmt.Errorf("scan task count: %w", err)
		}
		c.OldestAge = time.Duration(age * float64(time.Second))
		out = append(out, c)
	}
	return out, rows.Err()
}

// foldLockKey keeps two folds of the finished-task counts from running at
// once (their deletes could deadlock); the second one skips.
const foldLockKey = 0x6d6f7a6a

// FoldTaskCounts folds the changes of finished-task counts the database
// recorded as tasks finished into their totals, in one transaction (a
// reader sees them before or after, never twice), and returns how many
// changes it folded. Counts are exact without it: folding keeps what
// TaskCounts reads small.
func (s *Store) FoldTaskCounts(ctx context.Context) (int, error) {
	var n int
	err := s.InTx(ctx, func(tx *Tx) error {
		var locked bool
		if err := tx.db.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, foldLockKey).Scan(&locked); err != nil || !locked {
			return err
		}
		return tx.db.QueryRow(ctx, `
			WITH moved AS (DELETE FROM task_count_changes RETURNING status, action_type, n),
			     summed AS (SELECT status, action_type, sum(n) AS n, count(*) AS changes FROM moved GROUP BY 1, 2),
			     folded AS (
				INSERT INTO task_counts AS c (status, action_type, n)
				SELECT status, action_type, n FROM summed
				ON CONFLICT (status, action_type) DO UPDATE SET n = c.n + EXCLUDED.n)
			SELECT COALESCE(sum(changes), 0) FROM summed`).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("fold task counts: %w", err)
	}
	return n, nil
}

// TaskEnd is whether a task is finished, and since when; and the run
// holding its lease now (its attempt and lease owner; 0 and "" when none).
type TaskEnd struct {
	Status         task.Status
	FinishedAt     time.Time
	RunningAttempt int
	LeaseOwner     string
}

// TaskEnds returns the status of the tasks among ids that exist.
func (q *Queries) TaskEnds(ctx context.Context, ids []int64) (map[int64]TaskEnd, error) {
	rows, err := q.db.Query(ctx, `SELECT id, status, finished_at,
		CASE WHEN lease_owner IS NULL THEN 0 ELSE dispatch_count END, COALESCE(lease_owner, '')
		FROM task_state WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("read task states: %w", err)
	}
	defer rows.Close()
	out := make(map[int64]TaskEnd, len(ids))
	for rows.Next() {
		var (
			id       int64
			e        TaskEnd
			finished *time.Time
		)
		if err := rows.Scan(&id, &e.Status, &finished, &e.RunningAttempt, &e.LeaseOwner); err != nil {
			return nil, fmt.Errorf("scan task state: %w", err)
		}
		e.FinishedAt = derefTime(finished)
		out[id] = e
	}
	return out, rows.Err()
}

// stalledWhere selects working tasks whose agent's run ended (no lease)
// and whose next move needs something only the agent does: a pull request
// (none open for an assigned issue), an [Action Report], a push, a review.
// An approved review waits for a merge and an assigned issue with an open
// pull request for its review: people's work, not the agent's. The pull
// request is looked up by its key for each task (a scalar subquery): as
// an EXISTS, the planner may hash every open pull request of the history.
const stalledWhere = `t.status = 'working' AND t.lease_owner IS NULL
	AND t.action_type IN ('issue_assigned', 'ci_failure', 'deploy_failure', 'infrastructure_failure',
	                      'mention', 'review_comment', 'review_result', 'review_request', 'review_updated')
	AND NOT (t.action_type = 'review_result' AND t.daemon_meta->>'review_state' = 'approved')
	AND NOT (t.action_type = 'issue_assigned' AND COALESCE((SELECT p.state = 'open' FROM pull_requests p
	         WHERE p.repo = t.repo AND p.number = t.pr_number), false))`

// Stalled is a working task whose agent's run ended without what moves it
// on, and what that is (a FollowUp* constant).
type Stalled struct {
	Task    task.Task
	Missing string
}

// StalledTasks lists tasks stalled for longer than quiet, oldest first.
func (q *Queries) StalledTasks(ctx context.Context, quiet time.Duration, limit int) ([]Stalled, error) {
	rows, err := q.db.Query(ctx, `SELECT `+taskColumnsT+`,
			COALESCE((SELECT p.state = 'closed' AND NOT p.merged FROM pull_requests p
			          WHERE p.repo = t.repo AND p.number = t.pr_number), false)
		FROM task_state t
		WHERE `+stalledWhere+` AND t.updated_at < now() - $1::interval
		ORDER BY t.updated_at LIMIT $2`, interval(quiet), limit)
	if err != nil {
		return nil, fmt.Errorf("list stalled tasks: %w", err)
	}
	defer rows.Close()
	var out []Stalled
	for rows.Next() {
		var (
			st         Stalled
			closedPull bool
		)
		st.Task, err = scanTaskWith(rows, &closedPull)
		if err != nil {
			return nil, fmt.Errorf("scan stalled task: %w", err)
		}
		st.Missing = missingStep(st.Task, closedPull)
		out = append(out, st)
	}
	return out, rows.Err()
}

// missingStep names what a stalled task waits for.
func missingStep(t task.Task, closedPull bool) string {
	switch t.ActionType {
	case task.ActionIssueAssigned:
		if closedPull {
			return task.FollowUpPullClosed
		}
		return task.FollowUpPullRequest
	case task.ActionReviewResult:
		return task.FollowUpPush
	case task.ActionReviewRequest, task.ActionReviewUpdated:
		return task.FollowUpReview
	}
	return task.FollowUpReport
}

// StalledOldest is how long the least recently moved stalled task has
// waited (0 when none).
func (q *Queries) StalledOldest(ctx context.Context) (time.Duration, error) {
	var age float64
	err := q.db.QueryRow(ctx, `SELECT COALESCE(extract(epoch FROM now() - min(t.updated_at)), 0)::float8
		FROM task_state t WHERE `+stalledWhere).Scan(&age)
	if err != nil {
		return 0, fmt.Errorf("age of stalled tasks: %w", err)
	}
	return time.Duration(age * float64(time.Second)), nil
}

// FollowUp sends a stalled task back to its agent once more, recording
// what its last run left undone for the prompt, in one transaction.
func (s *Store) FollowUp(ctx context.Context, id int64, missing string) (Result, error) {
	var res Result
	err := s.InTx(ctx, func(tx *Tx) error {
		var err error
		res, err = tx.Apply(ctx, id, task.EventNudge, Change{})
		if err != nil || !res.Applied {
			return err
		}
		_, err = tx.db.Exec(ctx, `UPDATE task_state SET daemon_meta = daemon_meta || jsonb_build_object('follow_up', $2::text)
			WHERE id = $1`, id, missing)
		return err
	})
	if err != nil {
		return Result{}, fmt.Errorf("follow up task %d: %w", id, err)
	}
	return res, nil
}

// FailStalled fails task id with why if it is still stalled and quiet for
// longer than quiet, checked on the locked row in the same transaction:
// a pull request, review or report that arrived since the watchdog listed
// it wins over the failure.
//
// notice is the comment to queue on the issue when it fails ("": none).
func (s *Store) FailStalled(ctx context.Context, id int64, quiet time.Duration, why, notice string) (Result, error) {
	var res Result
	err := s.InTx(ctx, func(tx *Tx) error {
		var locked int64
		err := tx.db.QueryRow(ctx, `SELECT t.id FROM task_state t
			WHERE t.id = $1 AND `+stalledWhere+` AND t.updated_at < now() - $2::interval FOR UPDATE OF t`,
			id, interval(quiet)).Scan(&locked)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // it moved since it was listed
		}
		if err != nil {
			return err
		}
		res, err = tx.Apply(ctx, id, task.EventFail, Change{Error: why, Actor: task.ActorMozi, Notice: notice})
		return err
	})
	if err != nil {
		return Result{}, fmt.Errorf("fail stalled task %d: %w", id, err)
	}
	return res, nil
}
