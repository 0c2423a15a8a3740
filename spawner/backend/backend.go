// Package backend is the seam between a run's lifecycle (the spawner:
// gather, prepare, prompt, start, stream, record) and the engine that runs
// its process: the local sandbox (spawner/backend/local), a container
// (spawner/backend/container) or a Kubernetes Job (spawner/backend/kube).
//
// A backend prepares the place a run works in (a checkout of the right
// ref), starts the agent's process there with its limits and environment,
// streams its output, reports its exit, stops it with grace, releases the
// place, and sweeps what runs of a dead replica left behind. Everything
// else — the prompt, budgets, redaction, the outcome policy, recording —
// is the spawner's and the same for every backend.
package backend

import (
	"context"
	"errors"
	"io"
	"time"
)

// Backend runs agent processes somewhere.
type Backend interface {
	// Name is the backend's name in logs and metrics ("local",
	// "container", "kubernetes").
	Name() string
	// Check says whether agent a can run on this backend at all: what
	// only an operator can fix (a command not found, no sandbox, no
	// image). It returns the agent with its command resolved as it will
	// run (an absolute path on the local backend). env is the agent's
	// environment (its PATH decides where a bare command is looked up).
	Check(a Agent, env []string) (Agent, error)
	// Prepare makes the place one run works in: the checkout r asks for
	// and the run's private directories. Errors wrap ErrUnreachable,
	// ErrBranchBusy or ErrBranchGone where they say so; context.Canceled
	// when mozi stops meanwhile.
	Prepare(ctx context.Context, r Run) (Place, error)
	// Describe is what Prepare would give r, without preparing anything:
	// what `mozi prompt render` shows.
	Describe(ctx context.Context, r Run) Where
	// Start starts the run's process in p. Everything the process writes
	// (stdout and stderr) goes to out, and nothing more once the process
	// is Done. ctx bounds the start only: the process lives until it
	// exits or is stopped. An error wrapping ErrUnavailable means the
	// engine cannot take the run now (unreachable, full): the task waits,
	// as for a Gitea outage; any other error is the run's failure.
	Start(ctx context.Context, p Place, s Step, out io.Writer) (Process, error)
	// Sweep removes what runs no longer need: places of finished tasks
	// (after their keep delay and within a disk budget) and whatever runs
	// of this mozi's earlier lives or dead replicas left behind.
	Sweep(ctx context.Context, l Ledger) (SweepResult, error)
}

// Agent is what a backend needs to know of an agent.
type Agent struct {
	Login string
	// Argv is the agent's command; Check resolves its first word.
	Argv []string
	// Home is the agent's home directory, kept between runs ("": none).
	Home string
	// Workdir is where an agent without a worktree works.
	Workdir string
	// Worktree: the agent works in a checkout of the task's repository.
	Worktree bool
	// Sandboxed: the local backend runs it in its bubblewrap sandbox.
	Sandboxed bool
	// Image is the container image the agent runs in (container and
	// Kubernetes backends).
	Image  string
	Limits Limits
}

// Limits bound one run's process.
type Limits struct {
	MemoryBytes int64
	Processes   int
	CPUTime     time.Duration
	OpenFiles   int
}

// Mode is how a run's checkout relates to a branch.
type Mode int

const (
	// NewBranch works on Branch: origin's if it exists there (an earlier
	// run's), else a new one from the default branch.
	NewBranch Mode = iota
	// ExistingBranch works on Branch as origin has it (a pull request's
	// head).
	ExistingBranch
	// Detached checks out Ref (default: the default branch) without a
	// branch.
	Detached
)

// Checkout is what a run works on.
type Checkout struct {
	Mode   Mode
	Branch string // NewBranch, ExistingBranch
	Ref    string // Detached: a commit or a branch of origin ("" = the default branch)
}

// Run identifies one run and what it needs prepared.
type Run struct {
	TaskID   int64
	Attempt  int
	Repo     string
	Agent    Agent
	Checkout Checkout
}

// Where describes a run's place as the agent sees it, for its prompt.
type Where struct {
	Dir    string // the working directory
	Branch string // the branch checked out ("" when detached)
	Ref    string // what a detached checkout shows
	Base   string // the repository's default branch
	Note   string // what the agent should know of the checkout ("" when nothing)
	// PromptFile is where the prompt is, as the agent sees it.
	PromptFile string
}

// Place is a prepared place. Release ends it: the run's private
// directories go, a worktree is handed to the sweep.
type Place interface {
	Where() Where
	Release()
}

// Step is the process to start.
type Step struct {
	TaskID  int64
	Attempt int
	Repo    string
	Agent   Agent
	// Argv is the command with its prompt arguments filled in.
	Argv []string
	// Env is the agent's whole environment.
	Env []string
	// Stdin is given to the process (nil: none).
	Stdin []byte
	// Prompt is written where Where().PromptFile says before the start.
	Prompt string
	// Timeout is the run's wall-clock limit (the spawner enforces it;
	// engines with a deadline of their own set it a little later).
	Timeout time.Duration
	// KillGrace is how long a stop waits before forcing.
	KillGrace time.Duration
}

// Process is a started run.
type Process interface {
	// Done is closed once the process has ended and its output is
	// written out.
	Done() <-chan struct{}
	// Exit is how the process ended; valid once Done is closed.
	Exit() Exit
	// Stop asks the process to end and forces it after grace. It does
	// not wait: Done says when it ended.
	Stop(grace time.Duration)
}

// Exit is how a process ended by itself or was stopped.
type Exit struct {
	// Code is the exit status; -1 when it was killed or is unknown.
	Code int
	// Why says how a failure ended ("exited with status 3", "killed by
	// signal KILL", "the pod was deleted"); "" on success.
	Why string
	// Lingered: it exited 0 but something it left running still held its
	// output after the grace period and was killed.
	Lingered bool
	// Deadline: the engine's own deadline ended it.
	Deadline bool
}

// Ledger tells a sweep which tasks are over and which runs are live.
type Ledger interface {
	TaskEnds(ctx context.Context, ids []int64) (map[int64]TaskEnd, error)
}

// TaskEnd is where a task stands, for the sweep.
type TaskEnd struct {
	Terminal   bool
	FinishedAt time.Time
	// Running is the attempt running now and its lease owner (0 and ""
	// when none runs).
	RunningAttempt int
	LeaseOwner     string
}

// SweepResult is what a sweep found.
type SweepResult struct {
	Removed    int
	Bytes      int64 // what the places left use
	OverBudget bool  // Bytes exceed the disk budget though nothing more could go
	// Ended are leftover runs stopped (processes, containers, Jobs).
	Ended int
}

// Errors a Prepare or Start wraps.
var (
	// ErrUnreachable: the repository's remote did not answer.
	ErrUnreachable = errors.New("repository unreachable")
	// ErrBranchGone: the branch to work on is not on the remote.
	ErrBranchGone = errors.New("branch not on the remote")
	// ErrBranchBusy: another run has the branch checked out.
	ErrBranchBusy = errors.New("branch in use by another run")
	// ErrUnavailable: the engine cannot take the run now.
	ErrUnavailable = errors.New("backend unavailable")
)

// Label keys a backend puts on what it starts, so a sweep finds exactly
// what a dead replica left.
const (
	LabelTask    = "mozi.task"
	LabelAttempt = "mozi.attempt"
	LabelOwner   = "mozi.owner"
	LabelScope   = "mozi.scope"
)

// Bind is a host path a place needs inside a container, mounted at the
// same path (a git worktree names its mirror by absolute path).
type Bind struct {
	Path     string
	ReadOnly bool
}

// Binder is implemented by places prepared on the host (the local
// backend's), so that a container backend can mount them.
type Binder interface {
	Binds() []Bind
}
