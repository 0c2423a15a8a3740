package prompts

import (
	"context"
	"fmt"

	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/templates"
)

// Reader is where the assembler reads a task's issue and its context
// (gitea.IssueReader: mozi's cache first, Gitea on a miss).
type Reader interface {
	IssueSource
	MergeTask(ctx context.Context, t task.Task) (task.MergedTask, error)
}

// AttemptLister lists a task's runs (repository.Store), for the retry
// context.
type AttemptLister interface {
	Attempts(ctx context.Context, taskID int64) ([]task.Attempt, error)
}

// AssemblerConfig configures an Assembler.
type AssemblerConfig struct {
	Set      *templates.Set
	Reader   Reader
	Attempts AttemptLister
	// Agents are what prompts say about each declared agent, by login.
	Agents   map[string]Agent
	GiteaURL string
	Lead     string // the lead agent's login, "" when none
	// Reviews reads the review round of review_result and review_comment
	// tasks at run time (nil: the task's own review text only).
	Reviews ReviewSource
	// BotUser is mozi's own login: its comments are not feedback.
	BotUser string
	// CILogs reads failed Actions jobs' logs for repair rounds (nil: the
	// prompt says the log could not be read); LogTailLines is how many
	// last lines (default task.DefaultLogTailLines); MaxRepairRounds is
	// the rounds a pull request gets (default task.DefaultMaxRepairRounds).
	CILogs          CILogReader
	LogTailLines    int
	MaxRepairRounds int
}

// Assembler builds the prompt mozi hands an agent for a task: the one
// place that does, for `mozi serve`, `mozi prompt render` and the
// benchmarks alike. It works in two steps so the spawner can prepare the
// worktree in between: Gather reads everything (it may ask Gitea), Build
// renders (it never does).
type Assembler struct {
	cfg     AssemblerConfig
	builder *Builder
}

// NewAssembler builds an assembler with the default sections and budget.
func NewAssembler(cfg AssemblerConfig) *Assembler {
	return &Assembler{cfg: cfg, builder: NewBuilder(cfg.Set, nil, 0)}
}

// Gather resolves the task (as claimed: its issue merged with the local
// row) into the input its prompt is built from, with the previous
// attempt's error and output on a retry.
func (a *Assembler) Gather(ctx context.Context, t task.Task) (*Input, error) {
	agent, ok := a.cfg.Agents[t.Agent]
	if !ok {
		return nil, fmt.Errorf("agent %s is not declared", t.Agent)
	}
	merged, err := a.cfg.Reader.MergeTask(ctx, t)
	if err != nil {
		return nil, err
	}
	t = merged.Task
	in, err := Gather(ctx, a.cfg.Reader, t, agent, a.cfg.GiteaURL, a.cfg.Lead)
	if err != nil {
		return nil, err
	}
	if in.Round, err = a.round(ctx, t); err != nil {
		return nil, err
	}
	if t.ActionType == task.ActionCIFailure {
		in.CILog = a.ciLog(ctx, t)
	}
	if t.DispatchCount > 1 || t.RetryCount > 0 {
		in.Retry, err = a.retry(ctx, t)
		if err != nil {
			return nil, err
		}
	}
	return in, nil
}

// retry tells a run what the previous, failed, attempt left; nil when the
// previous attempt ended cleanly.
func (a *Assembler) retry(ctx context.Context, t task.Task) (*Retry, error) {
	rt := &Retry{Attempt: t.DispatchCount, Error: t.LastError}
	if a.cfg.Attempts == nil {
		return rt, nil
	}
	attempts, err := a.cfg.Attempts.Attempts(ctx, t.ID)
	if err != nil {
		return nil, fmt.Errorf("attempts of task %d: %w", t.ID, err)
	}
	for i := len(attempts) - 1; i >= 0; i-- {
		if attempts[i].Attempt >= t.DispatchCount {
			continue // the run being prepared, when it has its row already
		}
		last := attempts[i]
		if last.Outcome == task.AttemptSucceeded {
			return nil, nil // a follow-up after a clean run: its own section says what is missing
		}
		if last.Error != "" {
			rt.Error = last.Error
		}
		rt.OutputTail = last.OutputTail
		break
	}
	return rt, nil
}

// Build renders the prompt for a gathered input.
func (a *Assembler) Build(in *Input) (*Prompt, error) { return a.builder.Build(in) }
