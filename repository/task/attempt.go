package task

import "time"

// Attempt outcomes.
const (
	AttemptRunning     = "running"
	AttemptSucceeded   = "succeeded" // exit 0
	AttemptFailed      = "failed"    // non-zero exit
	AttemptTimeout     = "timeout"   // killed at its wall-clock limit
	AttemptBudget      = "budget_exceeded"
	AttemptInterrupted = "interrupted" // mozi shut down; not counted as a failure
	AttemptRescued     = "rescued"     // its runner died
	AttemptSpawnError  = "spawn_error" // the command could not start
	AttemptLost        = "lease_lost"  // another runner took the task over
	AttemptStopped     = "stopped"     // someone else ended the task in Gitea meanwhile
	// AttemptUnavailable: the execution backend could not take the run (a
	// cluster out of reach); the task waits, not counted as a failure.
	AttemptUnavailable = "backend_unavailable"
	// AttemptPaused: the agent's account hit a usage limit; the task
	// waits for its reset, not counted as a failure.
	AttemptPaused = "paused"
)

// AttemptOutcomes is every outcome an attempt can end with: the one list.
var AttemptOutcomes = []string{AttemptSucceeded, AttemptFailed, AttemptTimeout, AttemptBudget, AttemptInterrupted,
	AttemptRescued, AttemptSpawnError, AttemptLost, AttemptStopped, AttemptUnavailable, AttemptPaused}

// Attempt is one spawn of an agent for a task.
type Attempt struct {
	ID         int64
	TaskID     int64
	Attempt    int
	Agent      string
	Runner     string
	Repo       string
	Issue      int
	StartedAt  time.Time
	FinishedAt time.Time
	ExitCode   *int
	Outcome    string
	Error      string
	OutputTail string
	LogPath    string
	Duration   time.Duration
	TokensIn   int64
	TokensOut  int64
	CostUSD    *float64 // nil: the agent reported no cost (codex reports none)
}
