package repository

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Event is something that moves a task through the state machine of SPEC §3:
//
//	pending → claimed → working → review → done
//	             ↑          │  ↘               ↗
//	             └─ retry ──┘   failed
//	review → working (changes requested); live → cancelled (agent unassigned)
type Event string

// State machine events.
const (
	EventClaim          Event = "claim"           // pending → claimed (dispatcher)
	EventStart          Event = "start"           // claimed → working (agent process started)
	EventRelease        Event = "release"         // claimed → pending (held: not spawned after all; the claim is given back)
	EventOpenReview     Event = "open_review"     // pending, claimed, working → review (PR opened)
	EventRequestChanges Event = "request_changes" // review → working (review asked for changes)
	EventRetry          Event = "retry"           // claimed, working → pending, counted as a failed attempt
	EventInterrupt      Event = "interrupt"       // claimed, working → pending, not counted (shutdown)
	EventRescue         Event = "rescue"          // claimed, working with an expired lease → pending
	EventReclaim        Event = "reclaim"         // pending → working: a runner rescued by mistake records its run
	EventNudge          Event = "nudge"           // working without a run → pending: the watchdog runs the agent once more
	EventComplete       Event = "complete"        // live → done (terminal Gitea event, auto-pass)
	EventFail           Event = "fail"            // live → failed (retries exhausted)
	EventCancel         Event = "cancel"          // live → cancelled (agent unassigned, operator)
	EventRequeue        Event = "requeue"         // failed, cancelled → pending (operator retry)
)

// Events lists every state machine event.
var Events = []Event{
	EventClaim, EventStart, EventRelease, EventOpenReview, EventRequestChanges,
	EventRetry, EventInterrupt, EventRescue, EventReclaim, EventNudge, EventComplete, EventFail, EventCancel,
	EventRequeue,
}

// ErrLeaseLost is the cause of a run's context ending because its task's
// lease was lost: the task finished in Gitea meanwhile, or another runner
// took it over after this one stopped renewing it.
var ErrLeaseLost = errors.New("lease lost")

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
	From    Status
	To      Status
}

type rule struct {
	from []Status
	to   Status
	// set adds column assignments; $3… are bound from Change by args.
	set string
	// guard adds conditions on the locked row.
	guard string
	args  func(Change) []any
}

const clearLease = `, lease_owner = NULL, lease_expires_at = NULL`

var rules = map[Event]rule{
	EventClaim: {
		from: []Status{StatusPending}, to: StatusClaimed,
		set: `, dispatch_count = t.dispatch_count + 1, lease_owner = $3,
			lease_expires_at = now() + $4::interval, heartbeat_at = now()`,
		args: func(c Change) []any { return []any{c.LeaseOwner, leaseTTL(c.LeaseTTL)} },
	},
	EventStart: {
		from: []Status{StatusClaimed}, to: StatusWorking,
		set:   `, heartbeat_at = now(), holds = 0`,
		guard: ` AND t.lease_owner IS NOT DISTINCT FROM $3`,
		args:  func(c Change) []any { return []any{nullString(c.LeaseOwner)} },
	},
	EventRelease: {
		// Not a run: the claim's dispatch is given back, so a task held
		// through a long Gitea outage never reaches the dispatch guardrail.
		from: []Status{StatusClaimed}, to: StatusPending,
		set: clearLease + `, not_before = COALESCE($3, now()), last_error = $4,
			dispatch_count = GREATEST(t.dispatch_count - 1, 0), holds = t.holds + 1`,
		args: func(c Change) []any { return []any{nullTime(c.NotBefore), c.Error} },
	},
	EventOpenReview: {
		// From pending too: a PR for the issue already exists (opened by a
		// previous attempt or a human), so spawning the agent again would
		// duplicate the work.
		from: []Status{StatusPending, StatusClaimed, StatusWorking}, to: StatusReview,
		set:  `, pr_number = COALESCE($3, t.pr_number)`,
		args: func(c Change) []any { return []any{nullInt(c.PRNumber)} },
	},
	EventRequestChanges: {from: []Status{StatusReview}, to: StatusWorking},
	EventRetry: {
		from: []Status{StatusClaimed, StatusWorking}, to: StatusPending,
		set: clearLease + `, retry_count = t.retry_count + 1,
			not_before = COALESCE($3, now()), last_error = $4`,
		args: func(c Change) []any { return []any{nullTime(c.NotBefore), c.Error} },
	},
	EventInterrupt: {
		from: []Status{StatusClaimed, StatusWorking}, to: StatusPending,
		set:   clearLease + `, not_before = now()`,
		guard: ` AND t.lease_owner IS NOT DISTINCT FROM $3`,
		args:  func(c Change) []any { return []any{nullString(c.LeaseOwner)} },
	},
	EventRescue: {
		from: []Status{StatusClaimed, StatusWorking}, to: StatusPending,
		set:   clearLease + `, not_before = now(), last_error = 'lease expired: runner lost'`,
		guard: ` AND t.lease_expires_at < now()`,
	},
	EventReclaim: {
		// The ticker rescued a run whose runner was alive but could not
		// reach the database (its lease expired meanwhile). Nobody claimed
		// the task since (dispatch_count is still the run's), so the
		// runner takes it back to record the outcome instead of the task
		// running again.
		from: []Status{StatusPending}, to: StatusWorking,
		set:   `, lease_owner = $3, lease_expires_at = now() + $4::interval, heartbeat_at = now(), last_error = ''`,
		guard: ` AND t.lease_owner IS NULL AND t.dispatch_count = $5`,
		args:  func(c Change) []any { return []any{c.LeaseOwner, leaseTTL(c.LeaseTTL), c.Attempt} },
	},
	EventNudge: {
		// The agent's last run ended without the Gitea event that would
		// move the task on: run it once more, not counted as a failure.
		from: []Status{StatusWorking}, to: StatusPending,
		set:   `, not_before = now()`,
		guard: ` AND t.lease_owner IS NULL`,
	},
	EventComplete: {
		from: LiveStatuses, to: StatusDone,
		set: clearLease + `, finished_at = now()`,
	},
	EventFail: {
		from: LiveStatuses, to: StatusFailed,
		set:  clearLease + `, finished_at = now(), last_error = $3`,
		args: func(c Change) []any { return []any{c.Error} },
	},
	EventCancel: {
		from: LiveStatuses, to: StatusCancelled,
		set:  clearLease + `, finished_at = now(), last_error = $3`,
		args: func(c Change) []any { return []any{c.Error} },
	},
	EventRequeue: {
		from: []Status{StatusFailed, StatusCancelled}, to: StatusPending,
		set: `, retry_count = 0, not_before = now(), finished_at = NULL, last_error = ''`,
	},
}

// transitionSQL is built once per event. prev locks the row and remembers
// its status; upd is the conditional UPDATE. Both run as one statement.
var transitionSQL = func() map[Event]string {
	out := make(map[Event]string, len(rules))
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
func (s *Store) Apply(ctx context.Context, id int64, ev Event, c Change) (Result, error) {
	res, err := apply(ctx, s.pool, id, ev, c)
	if err == nil && res.Applied {
		s.observe(ev, res.To, 1)
	}
	return res, err
}

func apply(ctx context.Context, q querier, id int64, ev Event, c Change) (Result, error) {
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
	return Result{Applied: applied, From: Status(prev), To: r.to}, nil
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
