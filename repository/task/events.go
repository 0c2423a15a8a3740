package task

import (
	"errors"
	"time"
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
	EventWait           Event = "wait"            // working, review → waiting (a question, CI still red)
	EventAnswer         Event = "answer"          // waiting → pending (a person answered)
	EventGreen          Event = "green"           // waiting for a red CI → review (the head turned green)
)

// Events lists every state machine event.
var Events = []Event{
	EventClaim, EventStart, EventRelease, EventOpenReview, EventRequestChanges,
	EventRetry, EventInterrupt, EventRescue, EventReclaim, EventNudge, EventComplete, EventFail, EventCancel,
	EventRequeue, EventWait, EventAnswer, EventGreen,
}

// Transition is what an event does to a task's status: it applies only
// while the task is in one of From, and moves it to To.
type Transition struct {
	From []Status
	To   Status
}

// transitions is the state machine's from→to table. The store applies
// each event as one conditional UPDATE (… WHERE status = ANY(From)), with
// the columns the event records besides the status.
var transitions = map[Event]Transition{
	EventClaim:   {From: []Status{StatusPending}, To: StatusClaimed},
	EventStart:   {From: []Status{StatusClaimed}, To: StatusWorking},
	EventRelease: {From: []Status{StatusClaimed}, To: StatusPending},
	// From pending too: a PR for the issue already exists (opened by a
	// previous attempt or a human), so spawning the agent again would
	// duplicate the work.
	EventOpenReview:     {From: []Status{StatusPending, StatusClaimed, StatusWorking}, To: StatusReview},
	EventRequestChanges: {From: []Status{StatusReview}, To: StatusWorking},
	EventRetry:          {From: []Status{StatusClaimed, StatusWorking}, To: StatusPending},
	EventInterrupt:      {From: []Status{StatusClaimed, StatusWorking}, To: StatusPending},
	EventRescue:         {From: []Status{StatusClaimed, StatusWorking}, To: StatusPending},
	EventReclaim:        {From: []Status{StatusPending}, To: StatusWorking},
	EventNudge:          {From: []Status{StatusWorking}, To: StatusPending},
	EventComplete:       {From: LiveStatuses, To: StatusDone},
	EventFail:           {From: LiveStatuses, To: StatusFailed},
	EventCancel:         {From: LiveStatuses, To: StatusCancelled},
	EventRequeue:        {From: []Status{StatusFailed, StatusCancelled}, To: StatusPending},
	EventWait:           {From: []Status{StatusWorking, StatusReview}, To: StatusWaiting},
	EventAnswer:         {From: []Status{StatusWaiting}, To: StatusPending},
	EventGreen:          {From: []Status{StatusWaiting}, To: StatusReview},
}

// Transition returns what the event does; false for an unknown event.
func (e Event) Transition() (Transition, bool) {
	tr, ok := transitions[e]
	return tr, ok
}

// HoldReason says what a held task waits for.
type HoldReason string

// Hold reasons.
const (
	HeldForGitea      HoldReason = "gitea"      // Gitea (its API or git) did not answer
	HeldForDatabase   HoldReason = "database"   // the database did not answer
	HeldForDependency HoldReason = "dependency" // an issue it depends on is open
	HeldForBudget     HoldReason = "budget"     // a spawn budget is spent
	HeldForBranch     HoldReason = "branch"     // another run has its branch checked out
	HeldForShutdown   HoldReason = "shutdown"   // mozi stopped before it started
	HeldForBackend    HoldReason = "backend"    // the execution backend could not take the run
)

// HeldForUsageLimit: the agent's account hit a usage limit; the task waits
// for its reset (docs/loop/usage-limits.md).
const HeldForUsageLimit HoldReason = "usage_limit"

// HeldForAPerson is the not_before of a task held for a usage limit whose
// credential resumed by itself as often as a day allows: it waits for a
// person (mozi task resume).
var HeldForAPerson = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// ActorMozi is who ends a task when mozi itself does (retries exhausted,
// a guardrail, the watchdog).
const ActorMozi = "mozi"

// ErrTaskEnded is the cause of a run's context ending because someone
// other than its agent ended its task in Gitea meanwhile (a merge, a
// close, an operator): the agent is stopped, its run recorded.
var ErrTaskEnded = errors.New("task ended")

// ErrLeaseLost is the cause of a run's context ending because its task's
// lease was lost: the task finished in Gitea meanwhile, or another runner
// took it over after this one stopped renewing it.
var ErrLeaseLost = errors.New("lease lost")
