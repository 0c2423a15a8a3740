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
	LeaseTTL   time.Duration // claim: how long the lease lasts (default 1m)
	NotBefore  time.Time     // retry, release: when the task may run again (zero: now)
	PRNumber   int           // open_review: the pull request (0: keep)
	Attempt    int           // reclaim: the run being recorded (its task's dispatch_count)
	Error      string        // retry, release, fail, cancel: why
}

// Result says whether a transition happened and what the status was when
// the event arrived (so callers can tell "already done" from an anomaly).
type Result struct {
	Applied bool
	From    task.Status
	To      task.Status
}

type rule struct {
	from []task.Status
	to   task.Status
	// set adds column assignments; $3… are bound from Change by args.
	set string
	// guard adds conditions on the locked row.
	guard string
	args  func(Change) []any
}

const clearLease = `, lease_owner = NULL, lease_expires_at = NULL`

var rules = map[task.Event]rule{
	task.EventClaim: {
		from: []task.Status{task.StatusPending}, to: task.StatusClaimed,
		set: `, dispatch_count = t.dispatch_count + 1, lease_owner = $3,
			lease_expires_at = now() + $4::interval, heartbeat_at = now()`,
		args: func(c Change) []any { return []any{c.LeaseOwner, leaseTTL(c.LeaseTTL)} },
	},
	task.EventStart: {
		from: []task.Status{task.StatusClaimed}, to: task.StatusWorking,
		set:   `, heartbeat_at = now(), holds = 0`,
		guard: ` AND t.lease_owner IS NOT DISTINCT FROM $3`,
		args:  func(c Change) []any { return []any{nullString(c.LeaseOwner)} },
	},
	task.EventRelease: {
		// Not a run: the claim's dispatch is given back, so a task held
		// through a long Gitea outage never reaches the dispatch guardrail.
		from: []task.Status{task.StatusClaimed}, to: task.StatusPending,
		set: clearLease + `, not_before = COALESCE($3, now()), last_error = $4,
			dispatch_count = GREATEST(t.dispatch_count - 1, 0), holds = t.holds + 1`,
		args: func(c Change) []any { return []any{nullTime(c.NotBefore), c.Error} },
	},
	task.EventOpenReview: {
		// From pending too: a PR for the issue already exists (opened by a
		// previous attempt or a human), so spawning the agent again would
		// duplicate the work.
		from: []task.Status{task.StatusPending, task.StatusClaimed, task.StatusWorking}, to: task.StatusReview,
		set:  `, pr_number = COALESCE($3, t.pr_number)`,
		args: func(c Change) []any { return []any{nullInt(c.PRNumber)} },
	},
	task.EventRequestChanges: {from: []task.Status{task.StatusReview}, to: task.StatusWorking},
	task.EventRetry: {
		from: []task.Status{task.StatusClaimed, task.StatusWorking}, to: task.StatusPending,
		set: clearLease + `, retry_count = t.retry_count + 1,
			not_before = COALESCE($3, now()), last_error = $4`,
		args: func(c Change) []any { return []any{nullTime(c.NotBefore), c.Error} },
	},
	task.EventInterrupt: {
		from: []task.Status{task.StatusClaimed, task.StatusWorking}, to: task.StatusPending,
		set:   clearLease + `, not_before = now()`,
		guard: ` AND t.lease_owner IS NOT DISTINCT FROM $3`,
		args:  func(c Change) []any { return []any{nullString(c.LeaseOwner)} },
	},
	task.EventRescue: {
		from: []task.Status{task.StatusClaimed, task.StatusWorking}, to: task.StatusPending,
		set:   clearLease + `, not_before = now(), last_error = 'lease expired: runner lost'`,
		guard: ` AND t.lease_expires_at < now()`,
	},
	task.EventReclaim: {
		// The ticker rescued a run whose runner was alive but could not
		// reach the database (its lease expired meanwhile). Nobody claimed
		// the task since (dispatch_count is still the run's), so the
		// runner takes it back to record the outcome instead of the task
		// running again.
		from: []task.Status{task.StatusPending}, to: task.StatusWorking,
		set:   `, lease_owner = $3, lease_expires_at = now() + $4::interval, heartbeat_at = now(), last_error = ''`,
		guard: ` AND t.lease_owner IS NULL AND t.dispatch_count = $5`,
		args:  func(c Change) []any { return []any{c.LeaseOwner, leaseTTL(c.LeaseTTL), c.Attempt} },
	},
	task.EventNudge: {
		// The agent's last run ended without the Gitea event that would
		// move the task on: run it once more, not counted as a failure.
		from: []task.Status{task.StatusWorking}, to: task.StatusPending,
		set:   `, not_before = now()`,
		guard: ` AND t.lease_owner IS NULL`,
	},
	task.EventComplete: {
		from: task.LiveStatuses, to: task.StatusDone,
		set: clearLease + `, finished_at = now()`,
	},
	task.EventFail: {
		from: task.LiveStatuses, to: task.StatusFailed,
		set:  clearLease + `, finished_at = now(), last_error = $3`,
		args: func(c Change) []any { return []any{c.Error} },
	},
	task.EventCancel: {
		from: task.LiveStatuses, to: task.StatusCancelled,
		set:  clearLease + `, finished_at = now(), last_error = $3`,
		args: func(c Change) []any { return []any{c.Error} },
	},
	task.EventRequeue: {
		from: []task.Status{task.StatusFailed, task.StatusCancelled}, to: task.StatusPending,
		set: `, retry_count = 0, not_before = now(), finished_at = NULL, last_error = ''`,
	},
}

// transitionSQL is built once per event. prev locks the row and remembers
// its status; upd is the conditional UPDATE. Both run as one statement.
var transitionSQL = func() map[task.Event]string {
	out := make(map[task.Event]string, len(rules))
	for ev, r := range rules {
		out[ev] = `WITH prev AS (
				SELECT id, status FROM task_state WHERE id = $1 FOR UPDATE
			), upd AS (
				UPDATE task_state t SET status = '` + string(r.to) + `', updated_at = now()` + r.set + `
				FROM prev WHERE t.id = prev.id AND t.status = ANY($2)` + r.guard + `
				RETURNING t.id
			)
			SELECT prev.status, EXISTS (SELECT 1 FROM upd) FROM prev`
	}
	return out
}()

// Apply moves task id through the state machine if its current status allows
// the event. Not applying is not an error: Result.Applied says what happened.
func (s *Store) Apply(ctx context.Context, id int64, ev task.Event, c Change) (Result, error) {
	res, err := apply(ctx, s.pool, id, ev, c)
	if err == nil && res.Applied {
		s.observe(ev, res.To, 1)
	}
	return res, err
}

func apply(ctx context.Context, q querier, id int64, ev task.Event, c Change) (Result, error) {
	r, ok := rules[ev]
	if !ok {
		return Result{}, fmt.Errorf("task %d: unknown event %q", id, ev)
	}
	from := make([]string, len(r.from))
	for i, st := range r.from {
		from[i] = string(st)
	}
	args := []any{id, from}
	if r.args != nil {
		args = append(args, r.args(c)...)
	}
	var (
		prev    string
		applied bool
	)
	err := q.QueryRow(ctx, transitionSQL[ev], args...).Scan(&prev, &applied)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Result{}, fmt.Errorf("%s task %d: %w", ev, id, ErrTaskNotFound)
	case isUniqueViolation(err):
		return Result{}, fmt.Errorf("%s task %d: a live task for the same issue, action and agent exists: %w",
			ev, id, ErrDuplicateTask)
	case err != nil:
		return Result{}, fmt.Errorf("%s task %d: %w", ev, id, err)
	}
	return Result{Applied: applied, From: task.Status(prev), To: r.to}, nil
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
