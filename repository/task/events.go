package task

import "errors"

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
