// Package build makes the tasks mozi creates, whoever asks for one: the
// webhook's rules, the ticker's round reviews, discussions and late
// mentions, `mozi task create`, and the made-up task of `mozi prompt
// render`. One place decides what a new task copies of its issue or pull
// request, its defaults (priority, max retries), the guards it is checked
// against (closed issue, per-issue hourly budget) and who is told of what
// was created or refused, so that every task is counted in
// mozi_tasks_created_total the same way.
//
// Invariant: a task is created only through Builder.Create (guarded) or,
// for an operator's explicit request, with Builder.Prepare's defaults.
package build

import (
	"context"
	"time"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/task"
)

// Observer learns of the tasks created and of those a guard refused
// (rules.Metrics counts them).
type Observer interface {
	TaskCreated(action task.ActionType)
	TaskRefused(action task.ActionType, why repository.Refusal)
}

// Config is the one guard configuration and the defaults of new tasks.
type Config struct {
	// MaxRetries of new tasks, as repository.NewTask.MaxRetries (0:
	// task.DefaultMaxRetries; task.NoRetries: none). A task that sets its
	// own keeps it.
	MaxRetries int
	// BudgetPerHour caps the tasks created on one issue in an hour (0: no
	// cap).
	BudgetPerHour int
	// Observer is told of creations and refusals when the caller reports
	// them (nil: nobody).
	Observer Observer
}

// Builder builds and creates tasks with one configuration. Its zero value
// is usable: default retries, no budget, nobody told.
type Builder struct {
	cfg Config
}

// New returns a builder for cfg.
func New(cfg Config) *Builder { return &Builder{cfg: cfg} }

// BudgetPerHour is the per-issue hourly budget the builder guards (0: no
// cap), for log lines.
func (b *Builder) BudgetPerHour() int { return b.cfg.BudgetPerHour }

// Prepare fills what a new task takes from the configuration.
func (b *Builder) Prepare(n repository.NewTask) repository.NewTask {
	if n.MaxRetries == 0 {
		n.MaxRetries = b.cfg.MaxRetries
	}
	return n
}

// Cause is what a task is checked against besides the budget.
type Cause struct {
	// At is when the causing event happened (zero: unknown): work caused
	// before its issue was closed is not created, the close finished it.
	At time.Time
	// Notification tasks (issue_closed, review_merged) are about the close
	// itself and skip that check.
	Notification bool
}

// Creator creates a task unless a guard refuses it (repository.Tx).
type Creator interface {
	CreateGuarded(ctx context.Context, n repository.NewTask, g repository.Guard) (task.Task, repository.Refusal, error)
}

// Create prepares n and creates it in tx unless a guard refuses it; the
// outcome is added to out, which the caller reports (Report) when it
// chooses: after its transaction committed, so that a rolled back or
// retried transaction counts nothing twice.
func (b *Builder) Create(ctx context.Context, tx Creator, out *Outcomes, n repository.NewTask, c Cause) (task.Task, repository.Refusal, error) {
	n = b.Prepare(n)
	t, why, err := tx.CreateGuarded(ctx, n, repository.Guard{At: c.At, Notification: c.Notification,
		BudgetPerHour: b.cfg.BudgetPerHour})
	if err != nil {
		return task.Task{}, "", err
	}
	out.add(n, why)
	return t, why, nil
}

// Report tells the observer of out's creations and refusals.
func (b *Builder) Report(out Outcomes) {
	if b.cfg.Observer == nil {
		return
	}
	for _, o := range out.list {
		if o.Why == "" {
			b.cfg.Observer.TaskCreated(o.Task.ActionType)
		} else {
			b.cfg.Observer.TaskRefused(o.Task.ActionType, o.Why)
		}
	}
}

// Outcome is one guarded creation: the task asked for and why it was
// refused ("": created).
type Outcome struct {
	Task repository.NewTask
	Why  repository.Refusal
}

// Outcomes collects the guarded creations of one transaction. The zero
// value is empty; a retried transaction starts a new one.
type Outcomes struct {
	list []Outcome
}

func (o *Outcomes) add(n repository.NewTask, why repository.Refusal) {
	o.list = append(o.list, Outcome{Task: n, Why: why})
}

// Created is how many tasks were created.
func (o Outcomes) Created() int {
	n := 0
	for _, x := range o.list {
		if x.Why == "" {
			n++
		}
	}
	return n
}

// Refused lists the creations a guard refused.
func (o Outcomes) Refused() []Outcome {
	var out []Outcome
	for _, x := range o.list {
		if x.Why != "" {
			out = append(out, x)
		}
	}
	return out
}

// Len is how many creations were tried.
func (o Outcomes) Len() int { return len(o.list) }
