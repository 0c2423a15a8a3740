package repository

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/moziplus/mozi/repository/task"
)

// Change carries the data some events record with the transition.
type Change struct {
	// LeaseOwner names the runner (claim); for start and interrupt the
	// transition only happens while this runner holds the lease.
	LeaseOwner string
	LeaseTTL   time.Duration   // claim: how long the lease lasts (default 1m)
	NotBefore  time.Time       // retry, release: when the task may run again (zero: now)
	HeldFor    task.HoldReason // release: what the task waits for
	// WaitReason, Question: wait: what the task waits for a person about.
	WaitReason task.WaitReason
	Question   string
	// Answer, AnsweredBy: answer: the person's comment that resumes it.
	Answer     string
	AnsweredBy string
	PRNumber   int    // open_review: the pull request (0: keep)
	Attempt    int    // reclaim: the run being recorded (its task's dispatch_count)
	Error      string // retry, release, interrupt, fail, cancel: why
	// Actor is who ended the task (complete, fail, cancel): the Gitea
	// login behind the event, or mozi. A running agent whose task someone
	// else ended is stopped; one that ended it itself may finish.
	Actor string
	// Notice is what mozi tells the issue when the transition happens (a
	// failure): queued in the outbox by the same statement, once per task
	// and run ("" or a task on no issue: nothing).
	Notice string
}

// Result says whether a transition happened and what the status was when
// the event arrived (so callers can tell "already done" from an anomaly).
type Result struct {
	Applied bool
	From    task.Status
	To      task.Status
}

// effect is what an event records besides the status (the from→to table
// is task's): column assignments and conditions of its UPDATE.
type effect struct {
	// set adds column assignments; $3… are bound from Change by args.
	set string
	// guard adds conditions on the locked row.
	guard string
	args  func(Change) []any
}

const clearLease = `, lease_owner = NULL, lease_expires_at = NULL`

// effects are keyed by the state machine's events; an event without an
// entry changes the status alone.
var effects = map[task.Event]effect{
	task.EventClaim: {
		set: `, dispatch_count = t.dispatch_count + 1, lease_owner = $3,
			lease_expires_at = now() + $4::interval, heartbeat_at = now()`,
		args: func(c Change) []any { return []any{c.LeaseOwner, leaseTTL(c.LeaseTTL)} },
	},
	task.EventStart: {
		// An earlier hold's or retry's reason is history once a run starts
		// (each attempt keeps its own error).
		set:   `, heartbeat_at = now(), holds = 0, held_for = '', last_error = ''`,
		guard: ` AND t.lease_owner IS NOT DISTINCT FROM $3`,
		args:  func(c Change) []any { return []any{nullString(c.LeaseOwner)} },
	},
	task.EventRelease: {
		// Not a run: the claim's dispatch is given back, so a task held
		// through a long Gitea outage never reaches the dispatch guardrail.
		set: clearLease + `, not_before = COALESCE($3, now()), last_error = $4,
			dispatch_count = GREATEST(t.dispatch_count - 1, 0), holds = t.holds + 1, held_for = $5`,
		args: func(c Change) []any { return []any{nullTime(c.NotBefore), c.Error, string(c.HeldFor)} },
	},
	task.EventOpenReview: {
		set:  `, pr_number = COALESCE($3, t.pr_number)`,
		args: func(c Change) []any { return []any{nullInt(c.PRNumber)} },
	},
	task.EventRetry: {
		set: clearLease + `, retry_count = t.retry_count + 1,
			not_before = COALESCE($3, now()), last_error = $4`,
		args: func(c Change) []any { return []any{nullTime(c.NotBefore), c.Error} },
	},
	task.EventInterrupt: {
		// A run its backend could not take (a cluster out of reach) or
		// that hit its account's usage limit waits like a hold, until the
		// reset or with its backoff, and says why; a shutdown's runs again
		// at once.
		set: clearLease + `, not_before = COALESCE($4, now()), held_for = $5,
			holds = t.holds + CASE WHEN $5 = '' THEN 0 ELSE 1 END, last_error = $6`,
		guard: ` AND t.lease_owner IS NOT DISTINCT FROM $3`,
		args: func(c Change) []any {
			return []any{nullString(c.LeaseOwner), nullTime(c.NotBefore), string(c.HeldFor), c.Error}
		},
	},
	task.EventRescue: {
		set:   clearLease + `, not_before = now(), last_error = 'lease expired: runner lost'`,
		guard: ` AND t.lease_expires_at < now()`,
	},
	task.EventReclaim: {
		// The ticker rescued a run whose runner was alive but could not
		// reach the database (its lease expired meanwhile). Nobody claimed
		// the task since (dispatch_count is still the run's), so the
		// runner takes it back to record the outcome instead of the task
		// running again.
		set:   `, lease_owner = $3, lease_expires_at = now() + $4::interval, heartbeat_at = now(), last_error = ''`,
		guard: ` AND t.lease_owner IS NULL AND t.dispatch_count = $5`,
		args:  func(c Change) []any { return []any{c.LeaseOwner, leaseTTL(c.LeaseTTL), c.Attempt} },
	},
	task.EventNudge: {
		// The agent's last run ended without the Gitea event that would
		// move the task on: run it once more, not counted as a failure.
		set:   `, not_before = now()`,
		guard: ` AND t.lease_owner IS NULL`,
	},
	// The terminal events keep a running agent's lease: its run holds the
	// agent's slot until its outcome is recorded (FinishRun drops it).
	task.EventComplete: {
		set:  `, finished_at = now(), ended_by = $3`,
		args: func(c Change) []any { return []any{c.Actor} },
	},
	task.EventFail: {
		set:  `, finished_at = now(), last_error = $3, ended_by = $4`,
		args: func(c Change) []any { return []any{c.Error, c.Actor} },
	},
	task.EventCancel: {
		set:  `, finished_at = now(), last_error = $3, ended_by = $4`,
		args: func(c Change) []any { return []any{c.Error, c.Actor} },
	},
	task.EventWait: {
		// A running agent keeps its lease, as with the terminal events:
		// its run's outcome is still to be recorded (FinishRun drops it).
		set: `, wait_reason = COALESCE(NULLIF($3, ''), 'question'), daemon_meta = (t.daemon_meta - 'answer' - 'answered_by')
			|| jsonb_build_object('question', $4::text)`,
		args: func(c Change) []any { return []any{string(c.WaitReason), c.Question} },
	},
	task.EventAnswer: {
		// Due at once, on the same branch (Meta.WorkBranch is kept): the
		// answer is in the next run's prompt. A lease is kept: a run that
		// asked and has not exited yet holds the task until it records its
		// outcome (no reclaim), and the claim waits for it.
		set: `, wait_reason = '', not_before = now(), holds = 0, held_for = '',
			daemon_meta = t.daemon_meta || jsonb_build_object('answer', $3::text, 'answered_by', $4::text)`,
		args: func(c Change) []any { return []any{c.Answer, c.AnsweredBy} },
	},
	task.EventGreen: {
		// Only a wait for a red head ends when it turns green (a person
		// fixed it, or a flaky check passed on a rerun): a question still
		// waits for its answer.
		set:   `, wait_reason = ''`,
		guard: ` AND t.wait_reason = 'ci_red'`,
	},
	task.EventRequeue: {
		set: `, retry_count = 0, not_before = now(), finished_at = NULL, last_error = '', ended_by = ''`,
	},
}

// transitionSQL is built once per event. prev locks the row and remembers
// its status; upd is the conditional UPDATE; note queues the transition's
// notice in the outbox when it happened. All run as one statement.
var transitionSQL = func() map[task.Event]string {
	out := make(map[task.Event]string, len(task.Events))
	for _, ev := range task.Events {
		tr, _ := ev.Transition()
		e := effects[ev]
		notice := fmt.Sprintf("$%d", 3+e.nargs())
		out[ev] = `WITH prev AS (
				SELECT id, status FROM task_state WHERE id = $1 FOR UPDATE
			), upd AS (
				UPDATE task_state t SET status = '` + string(tr.To) + `', updated_at = now()` + e.set + `
				FROM prev WHERE t.id = prev.id AND t.status = ANY($2)` + e.guard + `
				RETURNING t.id, t.repo, t.issue_number, t.dispatch_count
			), note AS (
				INSERT INTO outbox (repo, issue_number, kind, dedupe_key, body)
				SELECT upd.repo, upd.issue_number, 'task_` + string(ev) + `', upd.id || ':' || upd.dispatch_count, ` + notice + `::text
				FROM upd WHERE ` + notice + `::text <> '' AND upd.issue_number > 0
				ON CONFLICT (kind, dedupe_key) DO NOTHING
			)
			SELECT prev.status, EXISTS (SELECT 1 FROM upd) FROM prev`
	}
	return out
}()

// nargs is how many parameters the effect binds after $1 and $2.
func (e effect) nargs() int {
	if e.args == nil {
		return 0
	}
	return len(e.args(Change{}))
}

// Apply moves task id through the state machine if its current status allows
// the event. Not applying is not an error: Result.Applied says what happened.
func (q *Queries) Apply(ctx context.Context, id int64, ev task.Event, c Change) (Result, error) {
	res, err := q.transition(ctx, id, ev, c)
	if err == nil && res.Applied {
		q.observe(ev, res.To, 1)
	}
	return res, err
}

func (q *Queries) transition(ctx context.Context, id int64, ev task.Event, c Change) (Result, error) {
	tr, ok := ev.Transition()
	if !ok {
		return Result{}, fmt.Errorf("task %d: unknown event %q", id, ev)
	}
	from := make([]string, len(tr.From))
	for i, st := range tr.From {
		from[i] = string(st)
	}
	args := []any{id, from}
	if e := effects[ev]; e.args != nil {
		args = append(args, e.args(c)...)
	}
	args = append(args, c.Notice)
	var (
		prev    string
		applied bool
	)
	err := q.db.QueryRow(ctx, transitionSQL[ev], args...).Scan(&prev, &applied)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Result{}, fmt.Errorf("%s task %d: %w", ev, id, task.ErrNotFound)
	case isUniqueViolation(err):
		return Result{}, fmt.Errorf("%s task %d: a live task for the same issue, action and agent exists: %w",
			ev, id, ErrDuplicateTask)
	case err != nil:
		return Result{}, fmt.Errorf("%s task %d: %w", ev, id, err)
	}
	return Result{Applied: applied, From: task.Status(prev), To: tr.To}, nil
}

// leaseTTL is a lease's length as a $n::interval parameter; zero means
// the default minute.
func leaseTTL(ttl time.Duration) string {
	if ttl <= 0 {
		ttl = time.Minute
	}
	return interval(ttl)
}

// interval formats d as a $n::interval parameter.
func interval(d time.Duration) string { return fmt.Sprintf("%d milliseconds", d.Milliseconds()) }
