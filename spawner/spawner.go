package spawner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/moziplus/mozi/prompts"
	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/spawner/backend"
	"github.com/moziplus/mozi/spawner/notice"
)

// Store is what the spawner records runs in (repository.Store).
type Store interface {
	Apply(ctx context.Context, id int64, ev task.Event, c repository.Change) (repository.Result, error)
	StartRun(ctx context.Context, t task.Task, owner, logPath string) (task.Attempt, bool, error)
	FinishRun(ctx context.Context, e repository.RunEnd) (repository.Result, error)
	PatchTaskMeta(ctx context.Context, id int64, patch task.Meta, clear ...string) error
	RecordAttemptPrompt(ctx context.Context, attemptID int64, prompt string) error
}

// Prompter builds a task's prompt in two steps around the place it runs
// in (prompts.Assembler): Gather reads (it may ask Gitea), Build renders.
type Prompter interface {
	Gather(ctx context.Context, t task.Task) (*prompts.Input, error)
	Build(in *prompts.Input) (*prompts.Prompt, error)
}

// Defaults of Config.
const (
	DefaultRetryBase = 30 * time.Second
	DefaultRetryMax  = 30 * time.Minute
	DefaultHoldBase  = task.DefaultHoldBase
	DefaultHoldMax   = task.DefaultHoldMax
)

// Config configures the spawner.
type Config struct {
	// Owner names this runner: the lease holder of the tasks it runs.
	Owner string
	// Agents by login.
	Agents map[string]Agent
	// StateDir holds logs/ (one log per attempt, and the outcome of a run
	// not recorded yet).
	StateDir string
	GiteaURL string
	// RetryBase and RetryMax shape the backoff between attempts (defaults
	// DefaultRetryBase and DefaultRetryMax, 30s and 30m); HoldBase and
	// HoldMax the wait of a task that cannot start yet for a reason
	// outside it (defaults DefaultHoldBase and DefaultHoldMax, 15s and 10m).
	RetryBase time.Duration
	RetryMax  time.Duration
	HoldBase  time.Duration
	HoldMax   time.Duration
	TailBytes int
	// KillGrace is how long a stopped run has before it is forced
	// (default DefaultKillGrace, 10s).
	KillGrace time.Duration
	Getenv    func(string) string
	Logger    *slog.Logger
	Metrics   *Metrics
	// Notices words the comment queued on the issue when a task fails for
	// good (nil: none).
	Notices *notice.Notices
	// Images name the container image of each repository's runs (owner/name
	// → image), over the agent's own: the repository's toolchain.
	Images map[string]string
	// Done ends mozi's process: a run's outcome not recorded by then is
	// kept on disk for the next start. Nothing else stops the recording,
	// however long the database is away (nil: nothing).
	Done <-chan struct{}
	// Pauses records the usage limits agents hit, so that every agent on
	// the same credential waits for the reset (nil: only the task waits).
	Pauses Pauser
	// MaxResumesPerDay caps the unattended resumes of a credential per
	// day (UTC); past it its tasks wait for a person (default
	// DefaultMaxResumesPerDay).
	MaxResumesPerDay int
}

// Spawner runs a claimed task's agent and moves the task by the outcome.
// The caller (the dispatcher) holds the task's lease for the whole of
// Handle and cancels its context with task.ErrLeaseLost when the
// lease is lost.
type Spawner struct {
	cfg     Config
	store   Store
	backend backend.Backend
	prompts Prompter

	// recording are the outcome files a Handle is recording right now,
	// which RecordLeftovers must leave alone.
	mu        sync.Mutex
	recording map[string]bool
}

// New builds a spawner that runs agents on b.
func New(cfg Config, store Store, b backend.Backend, prompter Prompter) *Spawner {
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = DefaultRetryBase
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = DefaultRetryMax
	}
	if cfg.HoldBase <= 0 {
		cfg.HoldBase = DefaultHoldBase
	}
	if cfg.HoldMax <= 0 {
		cfg.HoldMax = DefaultHoldMax
	}
	if cfg.MaxResumesPerDay <= 0 {
		cfg.MaxResumesPerDay = DefaultMaxResumesPerDay
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = DefaultKillGrace
	}
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	return &Spawner{cfg: cfg, store: store, backend: b, prompts: prompter, recording: map[string]bool{}}
}

// errPromptUnavailable is a transient failure to build the prompt.
var errPromptUnavailable = errors.New("prompt unavailable")

// Handle runs a claimed task: gather, prepare its place, build its
// prompt, start the run, stream it, record how it ended. ctx ending means
// shutdown (the agent is stopped and the attempt recorded as interrupted,
// not as a failure) or a lost lease (context.Cause is task.ErrLeaseLost).
func (s *Spawner) Handle(ctx context.Context, t task.Task) {
	log := s.cfg.Logger.With("task_id", t.ID, "repo", t.Repo, "issue", t.IssueNumber, "agent", t.Agent,
		"action_type", t.ActionType, "attempt", t.DispatchCount)
	bg := context.WithoutCancel(ctx) // bookkeeping outlives the shutdown signal
	agent, ok := s.cfg.Agents[t.Agent]
	if !ok {
		s.failNow(bg, log, t, "agent "+t.Agent+" is not declared")
		return
	}
	if image := s.cfg.Images[t.Repo]; image != "" {
		agent.Image = image // the repository's toolchain
	}
	env := s.environment(agent, t)
	resolved, err := s.runnable(agent, env)
	if err != nil {
		// A configuration error: no retry can help until an operator acts.
		s.failNow(bg, log, t, err.Error())
		return
	}
	agent.Agent = resolved
	in, err := s.prompts.Gather(ctx, t)
	if err != nil {
		// Gitea down, issue unreadable: the task waits, nothing is lost.
		s.hold(bg, log, t, fmt.Sprintf("%v: %v", errPromptUnavailable, err), task.HeldForGitea)
		return
	}
	run := backend.Run{TaskID: t.ID, Attempt: t.DispatchCount, Repo: t.Repo, Agent: agent.Agent, Checkout: CheckoutOf(t, in)}
	place, err := s.backend.Prepare(ctx, run)
	if err != nil {
		s.prepareFailed(bg, log, t, err)
		return
	}
	defer place.Release()
	where := place.Where()
	s.keepWorkBranch(bg, log, t, where.Branch)
	if agent.Worktree {
		in.Checkout = PromptCheckout(where)
	}
	p, err := s.prompts.Build(in)
	if err != nil {
		s.failNow(bg, log, t, "prompt: "+err.Error())
		return
	}
	logPath := filepath.Join(s.cfg.StateDir, "logs", safeName(t.Repo), fmt.Sprintf("%d-%d.log", t.ID, t.DispatchCount))
	attempt, started, err := s.store.StartRun(bg, t, s.cfg.Owner, logPath)
	if err != nil {
		// The database did not answer: give the claim back (it was not a
		// run) rather than leave it to expire and count as a dispatch.
		s.hold(bg, log, t, "not started: "+err.Error(), task.HeldForDatabase)
		return
	}
	if !started {
		log.Info("task moved before its agent started: not spawning")
		return
	}
	cmd := s.command(agent, where, p.Text, env)
	cmd.LogPath = logPath
	s.keepPrompt(bg, log, attempt, cmd)
	log.Info("agent started", "backend", s.backend.Name(), "dir", where.Dir, "branch", where.Branch, "sandbox", agent.Sandboxed)
	s.cfg.Metrics.started(t)
	result := s.execute(ctx, place, run, cmd)
	s.finish(ctx, log, t, attempt, result)
}

// hold puts the task back without counting a run: it waits for something
// outside it (Gitea, a branch another run uses).
func (s *Spawner) hold(ctx context.Context, log *slog.Logger, t task.Task, why string, heldFor task.HoldReason) {
	wait := s.holdWait(t, heldFor)
	log.Warn("task cannot start yet, it waits", "reason", why, "wait", wait.Round(time.Second).String())
	s.apply(ctx, log, t, task.EventRelease, repository.Change{NotBefore: time.Now().Add(wait), Error: why, HeldFor: heldFor})
}

// holdWait is how long a task held for heldFor waits.
func (s *Spawner) holdWait(t task.Task, heldFor task.HoldReason) time.Duration {
	if heldFor == task.HeldForShutdown {
		return 0
	}
	return task.Backoff(t.Holds+1, s.cfg.HoldBase, s.cfg.HoldMax)
}

// failNow fails a task that no retry can help, with its one comment.
func (s *Spawner) failNow(ctx context.Context, log *slog.Logger, t task.Task, why string) {
	log.Error("task failed", "reason", why)
	s.apply(ctx, log, t, task.EventFail, repository.Change{Error: why, Actor: task.ActorMozi,
		Notice: s.cfg.Notices.TaskFailed(t, why)})
}

// retryLater counts a failure to start as a failed attempt: retried with
// backoff, failed once retries run out.
func (s *Spawner) retryLater(ctx context.Context, log *slog.Logger, t task.Task, why string) {
	if t.RetryCount >= t.MaxRetries {
		s.failNow(ctx, log, t, why)
		return
	}
	delay := task.Backoff(t.RetryCount+1, s.cfg.RetryBase, s.cfg.RetryMax)
	log.Warn("task could not start, will retry", "reason", why, "retry_in", delay.Round(time.Second).String())
	s.apply(ctx, log, t, task.EventRetry, repository.Change{NotBefore: time.Now().Add(delay), Error: why})
}

// prepareFailed decides what a failure to prepare the run's place means
// for the task.
func (s *Spawner) prepareFailed(ctx context.Context, log *slog.Logger, t task.Task, err error) {
	why := "workspace: " + err.Error()
	switch {
	case errors.Is(err, context.Canceled):
		s.hold(ctx, log, t, "not started: mozi is shutting down", task.HeldForShutdown)
	case errors.Is(err, backend.ErrUnreachable):
		s.hold(ctx, log, t, why, task.HeldForGitea)
	case errors.Is(err, backend.ErrBranchBusy):
		s.hold(ctx, log, t, why, task.HeldForBranch)
	case errors.Is(err, backend.ErrUnavailable):
		s.hold(ctx, log, t, why, task.HeldForBackend)
	case errors.Is(err, backend.ErrBranchGone):
		s.failNow(ctx, log, t, why)
	default: // no access, no repository, disk full: an operator may fix it meanwhile
		s.retryLater(ctx, log, t, why)
	}
}

// runnable checks what only an operator can fix: the agent's token file
// is readable and its backend can run it. The agent's command comes back
// resolved, as the backend will run it.
func (s *Spawner) runnable(a Agent, env []string) (backend.Agent, error) {
	if a.TokenFile != "" {
		if _, err := os.ReadFile(a.TokenFile); err != nil {
			return a.Agent, fmt.Errorf("agent %s: token file: %w", a.Login, err)
		}
	}
	return s.backend.Check(a.Agent, env)
}

// keepWorkBranch records the branch a task's own work went on the first
// time it is prepared, so that later runs (retries, the watchdog's
// follow-up) continue on it even if the issue is retitled or relabelled
// meanwhile (the branch name derives from both). Failing to record it only
// costs that guarantee.
func (s *Spawner) keepWorkBranch(ctx context.Context, log *slog.Logger, t task.Task, branch string) {
	if branch == "" || !t.ActionType.OpensPullRequest() || t.Meta.WorkBranch == branch {
		return
	}
	if err := s.store.PatchTaskMeta(ctx, t.ID, task.Meta{WorkBranch: branch}); err != nil {
		log.Warn("work branch not recorded: a retry derives it from the issue again", "branch", branch, "error", err)
	}
}

// PromptCheckout is what the prompt says of a run's place.
func PromptCheckout(w backend.Where) *prompts.Checkout {
	return &prompts.Checkout{Dir: w.Dir, Branch: w.Branch, Ref: w.Ref, Base: w.Base, Note: w.Note}
}

// CheckoutOf is what a task works on: its own new branch for an assigned
// issue (or a broken deployment to fix), the pull request's head for work
// on the pull request, and a detached checkout for the rest (reviews of
// others' work, notifications, discussions, round reviews).
func CheckoutOf(t task.Task, in *prompts.Input) backend.Checkout {
	c := backend.Checkout{Mode: backend.Detached}
	head := t.Meta.HeadBranch
	switch t.ActionType {
	case task.ActionIssueAssigned, task.ActionDeployFailure, task.ActionInfrastructureFailure:
		c.Mode, c.Branch = backend.NewBranch, in.Branch()
	case task.ActionReviewResult, task.ActionReviewComment, task.ActionCIFailure,
		task.ActionReviewUpdated:
		if head != "" {
			c.Mode, c.Branch = backend.ExistingBranch, head
		}
	case task.ActionReviewRequest:
		c.Ref = head
	case task.ActionMention:
		// On a pull request, its author may push to it; anyone else reads.
		if head != "" && strings.EqualFold(t.Meta.IssueAuthor, t.Agent) && t.PRNumber > 0 {
			c.Mode, c.Branch = backend.ExistingBranch, head
		} else {
			c.Ref = head
		}
	}
	return c
}

// command is the run: the agent's argv with its prompt (in the file the
// place names, as an argument or on stdin).
func (s *Spawner) command(a Agent, w backend.Where, prompt string, env []string) Command {
	env = setEnv(env, "MOZI_PROMPT_FILE", w.PromptFile)
	args, stdin := argv(a.Argv, w.PromptFile, prompt)
	cmd := Command{Argv: args, Env: env, Prompt: prompt, Timeout: a.Timeout, Usage: a.Usage,
		MaxCostUSD: a.MaxCostUSD, MaxTokens: a.MaxTokens, TailBytes: s.cfg.TailBytes,
		Secrets: a.secretValues(s.cfg.Getenv)}
	if stdin {
		cmd.Stdin = []byte(prompt)
	}
	return cmd
}

// environment is the agent's whole environment for this task.
func (s *Spawner) environment(a Agent, t task.Task) []string {
	env := environment(a, Vars{TaskID: t.ID, Repo: t.Repo, Issue: t.IssueNumber, PR: t.PRNumber,
		Action: string(t.ActionType), Attempt: t.DispatchCount, GiteaURL: s.cfg.GiteaURL}, s.cfg.Getenv)
	set := func(k, v string) {
		if a.Env[k] == "" {
			env = setEnv(env, k, v)
		}
	}
	if a.Home != "" {
		set("HOME", a.Home)
	}
	if a.Sandboxed {
		set("TMPDIR", "/tmp")
	}
	// Commits carry the agent's name; pushes authenticate as it.
	set("GIT_AUTHOR_NAME", a.Login)
	set("GIT_COMMITTER_NAME", a.Login)
	set("GIT_AUTHOR_EMAIL", a.Login+"@"+emailDomain(s.cfg.GiteaURL))
	set("GIT_COMMITTER_EMAIL", a.Login+"@"+emailDomain(s.cfg.GiteaURL))
	set("GITEA_USER", a.Login)
	set("GIT_TERMINAL_PROMPT", "0")
	return env
}

// emailDomain is the domain of the agents' commit e-mail addresses:
// Gitea's no-reply convention on its host.
func emailDomain(giteaURL string) string {
	if u, err := url.Parse(giteaURL); err == nil && u.Hostname() != "" {
		return "noreply." + u.Hostname()
	}
	return "noreply.localhost"
}

// setEnv sets k in an environment list, replacing an earlier value.
func setEnv(env []string, k, v string) []string {
	for i, kv := range env {
		if strings.HasPrefix(kv, k+"=") {
			env[i] = k + "=" + v
			return env
		}
	}
	return append(env, k+"="+v)
}

func (s *Spawner) apply(ctx context.Context, log *slog.Logger, t task.Task, ev task.Event, c repository.Change) bool {
	res, err := s.store.Apply(ctx, t.ID, ev, c)
	if err != nil {
		log.Error("task not moved", "transition", ev, "error", err)
		return false
	}
	if !res.Applied {
		log.Info("task had already moved", "transition", ev, "status", res.From)
	}
	return res.Applied
}

// safeName makes owner/name usable as a directory name.
func safeName(repo string) string {
	return strings.NewReplacer("/", "_", "..", "_").Replace(repo)
}
