package spawner

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/spawner/notice"
)

// Policy is what the outcome policy needs besides the run: the runner
// and the backoffs.
type Policy struct {
	Owner     string
	RetryBase time.Duration
	RetryMax  time.Duration
	HoldBase  time.Duration
	HoldMax   time.Duration
	Notices   *notice.Notices
}

// Verdict is what a run's outcome means for its task.
type Verdict struct {
	// Event moves the task (with Change); "" drops the run's lease only.
	Event  task.Event
	Change repository.Change
	// Reclaim: the run ended by itself, so a task rescued meanwhile is
	// taken back to record it (repository.RunEnd.Reclaim).
	Reclaim bool
	// Message is the log line; Warn makes it a warning.
	Message string
	Warn    bool
	// Retry is the delay before the next attempt when the run failed and
	// retries remain (0 otherwise).
	Retry time.Duration
}

// Judge is the outcome policy: what a run that ended with r means for task
// t, decided at now. It has no side effect.
func Judge(p Policy, t task.Task, r Result, now time.Time) Verdict {
	switch {
	case r.Outcome == OutcomeStopped:
		// The task is over: nothing to move.
		return Verdict{Message: "agent stopped: " + strings.TrimPrefix(r.Err, "stopped: ")}
	case r.Outcome == OutcomeLeaseLost:
		// Killed: if the task is still this runner's (the database was
		// away), it runs again, not counted as a failure; if another runner
		// took it over, this records the attempt only.
		return Verdict{Event: task.EventInterrupt, Change: repository.Change{LeaseOwner: p.Owner},
			Message: "agent stopped: mozi lost the task's lease", Warn: true}
	case r.Outcome == OutcomeInterrupted:
		return Verdict{Event: task.EventInterrupt, Change: repository.Change{LeaseOwner: p.Owner},
			Message: "agent interrupted by shutdown; the task will run again"}
	case r.Outcome == OutcomeUnavailable:
		// The backend could not take the run: it waits like a hold, with
		// its backoff, and is not counted as a failure.
		wait := task.Backoff(t.Holds+1, p.HoldBase, p.HoldMax)
		return Verdict{Event: task.EventInterrupt, Change: repository.Change{LeaseOwner: p.Owner,
			NotBefore: now.Add(wait), HeldFor: task.HeldForBackend, Error: r.Err},
			Message: "backend could not take the run; the task waits", Warn: true}
	case r.Outcome == OutcomePaused:
		// The account's usage limit, not the task: it waits for the reset
		// (Spawner.pause settled it), not counted as a failure.
		until := r.Reset
		if until.IsZero() {
			until = now.Add(task.Backoff(t.Holds+1, p.HoldBase, p.HoldMax))
		}
		return Verdict{Event: task.EventInterrupt, Change: repository.Change{LeaseOwner: p.Owner,
			NotBefore: until, HeldFor: task.HeldForUsageLimit, Error: r.Err},
			Message: "agent paused at its account's usage limit; the task waits for the reset", Warn: true}
	case r.Outcome == OutcomeSucceeded || t.ActionType.Notification() && r.Outcome != OutcomeSpawnError:
		if t.ActionType.FinishedOnExit() {
			return Verdict{Event: task.EventComplete, Change: repository.Change{Actor: t.Agent}, Reclaim: true,
				Message: "agent finished; task done"}
		}
		return Verdict{Reclaim: true, Message: "agent finished; task waits for Gitea"}
	case t.RetryCount < t.MaxRetries:
		delay := task.Backoff(t.RetryCount+1, p.RetryBase, p.RetryMax)
		return Verdict{Event: task.EventRetry, Change: repository.Change{NotBefore: now.Add(delay), Error: r.Err},
			Reclaim: true, Message: "agent failed, will retry", Warn: true, Retry: delay}
	default:
		return Verdict{Event: task.EventFail, Change: repository.Change{Error: r.Err, Actor: task.ActorMozi,
			Notice: p.Notices.TaskFailed(t, r.Err)}, Reclaim: true,
			Message: "agent failed, no retry left: task failed", Warn: true}
	}
}

func (s *Spawner) policy() Policy {
	return Policy{Owner: s.cfg.Owner, RetryBase: s.cfg.RetryBase, RetryMax: s.cfg.RetryMax,
		HoldBase: s.cfg.HoldBase, HoldMax: s.cfg.HoldMax, Notices: s.cfg.Notices}
}

// finish records the attempt and moves the task by its outcome, in one
// transaction, and does not give up while the database is away (see
// record).
func (s *Spawner) finish(ctx context.Context, log *slog.Logger, t task.Task, attempt task.Attempt, r Result) {
	attempt.Outcome, attempt.Error, attempt.OutputTail = r.Outcome, r.Err, r.Tail
	attempt.Duration, attempt.TokensIn, attempt.TokensOut = r.Duration, r.TokensIn, r.TokensOut
	if r.CostUSD > 0 {
		cost := r.CostUSD
		attempt.CostUSD = &cost
	}
	if r.ExitCode >= 0 {
		code := r.ExitCode
		attempt.ExitCode = &code
	}
	s.cfg.Metrics.finished(t, r)
	log = log.With("outcome", r.Outcome, "duration", r.Duration.Round(time.Millisecond).String())
	now := time.Now()
	if r.Outcome == OutcomePaused {
		r = s.pause(ctx, log, t, r, now)
		attempt.Error = r.Err
		log = log.With("until", r.Reset.UTC().Format(time.RFC3339))
	}
	v := Judge(s.policy(), t, r, now)
	switch v.Event {
	case task.EventRetry:
		log = log.With("error", r.Err, "retry_in", v.Retry.Round(time.Second).String(), "retries_left", t.MaxRetries-t.RetryCount-1)
		s.cfg.Metrics.retries.WithLabelValues(t.Agent).Inc()
	case task.EventFail:
		log = log.With("error", r.Err)
	}
	end := repository.RunEnd{Attempt: attempt, Owner: s.cfg.Owner, Event: v.Event, Change: v.Change, Reclaim: v.Reclaim}
	res, ok := s.record(ctx, log, end)
	switch {
	case !ok:
		return
	case end.Event != "" && !res.Applied:
		log.Info("task had already moved", "transition", end.Event, "status", res.From)
	case v.Warn:
		log.Warn(v.Message)
	default:
		log.Info(v.Message)
	}
}
