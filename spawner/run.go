package spawner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/spawner/backend"
)

// Command is one agent run as the spawner drives it; the backend runs
// its process.
type Command struct {
	Argv  []string
	Env   []string
	Stdin []byte // nil: none
	// Prompt is written where the place says before the start.
	Prompt string
	// LogPath receives everything the process writes (stdout and stderr).
	LogPath string
	// Timeout is the wall-clock limit; the run is stopped (default
	// DefaultTimeout, 30m).
	Timeout time.Duration
	// Usage names the output format to read token and cost usage from.
	Usage string
	// MaxCostUSD and MaxTokens stop the run when exceeded (0: no limit).
	MaxCostUSD float64
	MaxTokens  int64
	// TailBytes bounds the output kept for the task attempt (default
	// DefaultTailBytes, 16 KiB).
	TailBytes int
	// Secrets are values the agent may print (its API keys, say) that must
	// not reach its log or the attempt's tail, which mozi task show and the
	// next prompt display: they read [redacted] there. The agent's Gitea
	// token, GITEA_TOKEN in Env, always is one.
	Secrets []string
}

// Result is how a run ended.
type Result struct {
	ExitCode  int // -1 when killed or never started
	Outcome   string
	Err       string // why it failed, for the task and the issue comment
	Tail      string // the last TailBytes of output
	Duration  time.Duration
	TokensIn  int64
	TokensOut int64
	CostUSD   float64
	// Reset is when the usage limit a paused run hit resets (zero: the
	// CLI gave none).
	Reset time.Time
}

// Outcomes of a run, as recorded in task_attempts (the list is
// repository/task's AttemptOutcomes).
const (
	OutcomeSucceeded   = task.AttemptSucceeded
	OutcomeFailed      = task.AttemptFailed
	OutcomeTimeout     = task.AttemptTimeout
	OutcomeBudget      = task.AttemptBudget
	OutcomeInterrupted = task.AttemptInterrupted
	OutcomeSpawnError  = task.AttemptSpawnError
	OutcomeLeaseLost   = task.AttemptLost
	OutcomeStopped     = task.AttemptStopped
	OutcomeUnavailable = task.AttemptUnavailable
	OutcomePaused      = task.AttemptPaused
)

// ErrLeaseLost cancels a run whose task another runner took over.
var ErrLeaseLost = task.ErrLeaseLost

// Defaults of a run.
const (
	// DefaultKillGrace is how long a stop waits before forcing.
	DefaultKillGrace = 10 * time.Second
	// DefaultTailBytes of a run's output are kept with its attempt.
	DefaultTailBytes = 16 << 10
	// DefaultTimeout is a run's wall-clock limit.
	DefaultTimeout = 30 * time.Minute
)

// execute starts c in its place on the backend and follows it to its end:
// its output through the filters into its log, its tail and the usage
// meter; a stop with grace at its time limit, over its budget, at
// shutdown or when its lease is lost (context.Cause(ctx) says which).
func (s *Spawner) execute(ctx context.Context, pl backend.Place, run backend.Run, c Command) Result {
	grace := s.cfg.KillGrace
	tailBytes := c.TailBytes
	if tailBytes <= 0 {
		tailBytes = DefaultTailBytes
	}
	start := time.Now()
	res := Result{ExitCode: -1}
	if len(c.Argv) == 0 {
		res.Outcome, res.Err = OutcomeSpawnError, "no command"
		return res
	}
	if err := os.MkdirAll(filepath.Dir(c.LogPath), 0o700); err != nil {
		res.Outcome, res.Err = OutcomeSpawnError, "create log directory: "+err.Error()
		return res
	}
	logFile, err := os.OpenFile(c.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		res.Outcome, res.Err = OutcomeSpawnError, "open log: "+err.Error()
		return res
	}
	defer logFile.Close()

	tail := newTail(tailBytes)
	usage := newUsageMeter(c.Usage, c.MaxCostUSD, c.MaxTokens)
	limits := newLimitWatch(c.Usage, time.Now)
	logw := &logWriter{f: logFile}
	redact := newRedactor(io.MultiWriter(logw, tail, usage, limits), c.secrets())
	out := &lockedWriter{w: redact}

	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	proc, err := s.backend.Start(ctx, pl, backend.Step{TaskID: run.TaskID, Attempt: run.Attempt, Repo: run.Repo,
		Agent: run.Agent, Argv: c.Argv, Env: c.Env, Stdin: c.Stdin, Prompt: c.Prompt, Timeout: timeout,
		KillGrace: grace}, out)
	if err != nil {
		res.Outcome, res.Err = OutcomeSpawnError, err.Error()
		if errors.Is(err, backend.ErrUnavailable) {
			res.Outcome = OutcomeUnavailable
		}
		fmt.Fprintf(logFile, "mozi: %s\n", res.Err)
		return res
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()

	select {
	case <-proc.Done():
	case <-timer.C:
		res.Outcome, res.Err = OutcomeTimeout, fmt.Sprintf("killed after its %s time limit", timeout)
	case <-usage.exceeded:
		res.Outcome, res.Err = OutcomeBudget, usage.reason()
	case <-ctx.Done():
		res.Outcome, res.Err = OutcomeInterrupted, "interrupted: mozi is shutting down"
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, ErrLeaseLost):
			res.Outcome, res.Err = OutcomeLeaseLost, "killed: mozi lost the task's lease (the database was out of reach, or another runner took the task over)"
		case errors.Is(cause, task.ErrTaskEnded):
			res.Outcome, res.Err = OutcomeStopped, "stopped: "+cause.Error()
		}
	}
	if res.Outcome != "" {
		proc.Stop(grace)
	}
	<-proc.Done()
	// The process is gone: nothing writes any more, what was held back as
	// the possible start of a secret can go.
	out.mu.Lock()
	redact.Flush()
	out.mu.Unlock()

	res.Duration = time.Since(start)
	res.Tail = tail.String()
	res.TokensIn, res.TokensOut, res.CostUSD = usage.totals()
	if res.Outcome == "" {
		exit := proc.Exit()
		res.ExitCode, res.Err = exit.Code, exit.Why
		res.Outcome = OutcomeFailed
		if exit.Code == 0 && exit.Why == "" {
			res.Outcome = OutcomeSucceeded
		}
		if hit, reset := limits.limit(); hit && res.Outcome == OutcomeFailed {
			res.Outcome, res.Reset, res.Err = OutcomePaused, reset, limitReason(reset)
		}
		if exit.Lingered {
			fmt.Fprintf(logw, "\nmozi: exited 0; a process it left running still held its output %s later and was killed\n", grace)
		}
	}
	if err := logw.err(); err != nil {
		// The agent's outcome stands; the attempt says what its log lacks.
		res.Err = strings.TrimPrefix(res.Err+"; log incomplete: "+err.Error(), "; ")
	}
	if res.Err != "" {
		fmt.Fprintf(logw, "\nmozi: %s\n", res.Err)
	}
	return res
}

// secrets are the values redacted from what is kept of the run: its
// Secrets and the agent's Gitea token.
func (c Command) secrets() []string {
	secrets := c.Secrets
	for _, kv := range c.Env {
		if tok, ok := strings.CutPrefix(kv, "GITEA_TOKEN="); ok {
			secrets = append(slices.Clip(secrets), tok)
		}
	}
	return secrets
}
