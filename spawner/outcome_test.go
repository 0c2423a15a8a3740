package spawner

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/moziplus/mozi/repository/task"
)

// The outcome policy: what each way a run can end means for its task.
func TestJudge(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	p := Policy{Owner: "r1", RetryBase: 30 * time.Second, RetryMax: 30 * time.Minute, HoldBase: 15 * time.Second, HoldMax: 10 * time.Minute}
	assigned := task.Task{ActionType: task.ActionIssueAssigned, Agent: "coder1", MaxRetries: 2}
	lastTry := assigned
	lastTry.RetryCount = 2
	notification := task.Task{ActionType: task.ActionIssueClosed, Agent: "coder1", MaxRetries: 2}
	finishedOnExit := task.Task{ActionType: task.ActionDiscussion, Agent: "coder1", MaxRetries: 2}
	heldTwice := assigned
	heldTwice.Holds = 2
	tests := []struct {
		name     string
		t        task.Task
		outcome  string
		event    task.Event
		reclaim  bool
		warn     bool
		maxDelay time.Duration // the longest delay before the next run (0: none)
		heldFor  task.HoldReason
	}{
		{"success waits for Gitea", assigned, OutcomeSucceeded, "", true, false, 0, ""},
		{"success of a task finished on exit", finishedOnExit, OutcomeSucceeded, task.EventComplete, true, false, 0, ""},
		{"a notification is done even when its agent failed", notification, OutcomeFailed, task.EventComplete, true, false, 0, ""},
		{"but not when it never started", notification, OutcomeSpawnError, task.EventRetry, true, true, 30 * time.Second, ""},
		{"failure with retries left", assigned, OutcomeFailed, task.EventRetry, true, true, 30 * time.Second, ""},
		{"timeout with retries left", assigned, OutcomeTimeout, task.EventRetry, true, true, 30 * time.Second, ""},
		{"budget on the last try", lastTry, OutcomeBudget, task.EventFail, true, true, 0, ""},
		{"failure on the last try", lastTry, OutcomeFailed, task.EventFail, true, true, 0, ""},
		{"spawn error", assigned, OutcomeSpawnError, task.EventRetry, true, true, 30 * time.Second, ""},
		{"shutdown", assigned, OutcomeInterrupted, task.EventInterrupt, false, false, 0, ""},
		{"lease lost", assigned, OutcomeLeaseLost, task.EventInterrupt, false, true, 0, ""},
		{"stopped: the task ended in Gitea", assigned, OutcomeStopped, "", false, false, 0, ""},
		{"backend unavailable holds", assigned, OutcomeUnavailable, task.EventInterrupt, false, true, 15 * time.Second, task.HeldForBackend},
		{"backend unavailable backs off", heldTwice, OutcomeUnavailable, task.EventInterrupt, false, true, 60 * time.Second, task.HeldForBackend},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Judge(p, tt.t, Result{Outcome: tt.outcome, Err: "why"}, now)
			assert.Equal(t, tt.event, v.Event)
			assert.Equal(t, tt.reclaim, v.Reclaim, "reclaim")
			assert.Equal(t, tt.warn, v.Warn, "warn")
			assert.NotEmpty(t, v.Message)
			assert.Equal(t, tt.heldFor, v.Change.HeldFor)
			if tt.maxDelay == 0 {
				assert.True(t, v.Change.NotBefore.IsZero(), "no delay: %s", v.Change.NotBefore)
			} else {
				delay := v.Change.NotBefore.Sub(now)
				assert.True(t, delay >= tt.maxDelay/2 && delay <= tt.maxDelay, "delay %s, want %s to %s (jitter)",
					delay, tt.maxDelay/2, tt.maxDelay)
			}
			if tt.event == task.EventInterrupt {
				assert.Equal(t, "r1", v.Change.LeaseOwner, "only this runner's lease is given back")
			}
			if tt.event == task.EventFail {
				assert.Equal(t, task.ActorMozi, v.Change.Actor)
				assert.Equal(t, "why", v.Change.Error)
			}
		})
	}
}
