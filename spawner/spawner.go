package spawner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moziplus/mozi/prompts"
	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/spawner/backend/local/sandbox"
	"github.com/moziplus/mozi/spawner/backend/local/workspace"
	"github.com/moziplus/mozi/spawner/notice"
)

// Store is what the spawner records runs in (repository.Store).
type Store interface {
	Apply(ctx context.Context, id int64, ev task.Event, c repository.Change) (repository.Result, error)
	StartRun(ctx context.Context, t task.Task, owner, logPath string) (task.Attempt, bool, error)
	FinishRun(ctx context.Context, e repository.RunEnd) (repository.Result, error)
	PatchTaskMeta(ctx context.Context, id int64, patch task.Meta, clear ...string) error
}

// Runner runs one process (ProcessRunner; tests use fakes).
type Runner interface {
	Run(ctx context.Context, c Command) Result
}

// Prompter builds a task's prompt in two steps around the worktree
// (prompts.Assembler): Gather reads (it may ask Gitea), Build renders.
type Prompter interface {
	Gather(ctx context.Context, t task.Task) (*prompts.Input, error)
	Build(in *prompts.Input) (*prompts.Prompt, error)
}

// Workspaces prepares worktrees (workspace.Manager).
type Workspaces interface {
	Prepare(ctx context.Context, req workspace.Request) (workspace.Workspace, error)
	Done(taskID int64)
}

// Defaults of Config.
const (
	DefaultRetryBase = 30 * time.Second
	DefaultRetryMax  = 30 * time.Minute
	DefaultHoldBase  = 15 * time.Second
	DefaultHoldMax   = 10 * time.Minute
)

// Config configures the spawner.
type Config struct {
	// Owner names this runner: the lease holder of the tasks it runs.
	Owner string
	// Agents by login.
	Agents map[string]Agent
	// StateDir holds runs/ (prompt files, each run's /tmp) and logs/ (one
	// log per attempt, and the outcome of a run not recorded yet).
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
	Getenv    func(string) string
	Logger    *slog.Logger
	Metrics   *Metrics
	// Notices words the comment queued on the issue when a task fails for
	// good (nil: none).
	Notices *notice.Notices

	// Workspaces prepares the worktrees of agents with Worktree set
	// (nil: such agents cannot run).
	Workspaces Workspaces
	// Sandbox wraps the runs of sandboxed agents; SandboxErr says why
	// there is none (bwrap missing).
	Sandbox    *sandbox.Sandbox
	SandboxErr error
	// RunAs is the user agents run as when mozi is root (nil: mozi's).
	RunAs *syscall.Credential
	// Hide are paths no sandboxed agent may see: mozi's configuration and
	// secret files, its home, other agents' homes and directories (the
	// state directory is always hidden).
	Hide []string
	// RunScope marks this mozi's runs (RunScope(StateDir) when empty):
	// the next start ends what a killed one left (EndLeftoverRuns).
	RunScope string
	// Done ends mozi's process: a run's outcome not recorded by then is
	// kept on disk for the next start. Nothing else stops the recording,
	// however long the database is away (nil: nothing).
	Done <-chan struct{}
}

// Spawner runs a claimed task's agent and moves the task by the outcome.
// The caller (the dispatcher) holds the task's lease for the whole of
// Handle and cancels its context with task.ErrLeaseLost when the
// lease is lost.
type Spawner struct {
	cfg     Config
	store   Store
	runner  Runner
	prompts Prompter

	// recording are the outcome files a Handle is recording right now,
	// which RecordLeftovers must leave alone.
	mu        sync.Mutex
	recording map[string]bool
}

// New builds a spawner.
func New(cfg Config, store Store, runner Runner, prompter Prompter) *Spawner {
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
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.RunScope == "" {
		cfg.RunScope = RunScope(cfg.StateDir)
	}
	return &Spawner{cfg: cfg, store: store, runner: runner, prompts: prompter, recording: map[string]bool{}}
}

// errPromptUnavailable is a transient failure to build the prompt.
var errPromptUnavailable = errors.New("prompt unavailable")

// Handle runs a claimed task. ctx ending means shutdown (the agent is
// killed and the attempt recorded as interrupted, not as a failure) or a
// lost lease (context.Cause is task.ErrLeaseLost).
func (s *Spawner) Handle(ctx context.Context, t task.Task) {
	log := s.cfg.Logger.With("task_id", t.ID, "repo", t.Repo, "issue", t.IssueNumber, "agent", t.Agent,
		"action_type", t.ActionType, "attempt", t.DispatchCount)
	bg := context.WithoutCancel(ctx) // bookkeeping outlives the shutdown signal
	agent, ok := s.cfg.Agents[t.Agent]
	if !ok {
		s.failNow(bg, log, t, "agent "+t.Agent+" is not declared")
		return
	}
	env := s.environment(agent, t)
	path, err := s.runnable(agent, env)
	if err != nil {
		// A configuration error: no retry can help until an operator acts.
		s.failNow(bg, log, t, err.Error())
		return
	}
	// The command found is the one run: inside the sandbox a bare name
	// would be looked up again, and could find another copy (or none).
	agent.Argv = append([]string{path}, agent.Argv[1:]...)
	in, err := s.prompts.Gather(ctx, t)
	if err != nil {
		// Gitea down, issue unreadable: the task waits, nothing is lost.
		s.hold(bg, log, t, fmt.Sprintf("%v: %v", errPromptUnavailable, err), task.HeldForGitea)
		return
	}
	r, err := s.prepare(ctx, t, agent, in)
	if err != nil {
		s.prepareFailed(bg, log, t, err)
		return
	}
	defer r.cleanup()
	s.keepWorkBranch(bg, log, t, r)
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
	cmd, err := s.command(agent, t, r, p.Text, env)
	if err != nil {
		s.finish(ctx, log, t, attempt, Result{ExitCode: -1, Outcome: OutcomeSpawnError, Err: err.Error()})
		return
	}
	cmd.LogPath = logPath
	log.Info("agent started", "dir", r.dir, "branch", r.branch, "sandbox", agent.Sandboxed)
	s.cfg.Metrics.started(t)
	result := s.runner.Run(ctx, cmd)
	s.finish(ctx, log, t, attempt, result)
}

// hold puts the task back without counting a run: it waits for something
// outside it (Gitea, a branch another run uses).
func (s *Spawner) hold(ctx context.Context, log *slog.Logger, t task.Task, why string, heldFor task.HoldReason) {
	wait := task.Backoff(t.Holds+1, s.cfg.HoldBase, s.cfg.HoldMax)
	if heldFor == task.HeldForShutdown {
		wait = 0
	}
	log.Warn("task cannot start yet, it waits", "reason", why, "wait", wait.Round(time.Second).String())
	s.apply(ctx, log, t, task.EventRelease, repository.Change{NotBefore: time.Now().Add(wait), Error: why, HeldFor: heldFor})
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

// prepareFailed decides what a failure to prepare the worktree means for
// the task.
func (s *Spawner) prepareFailed(ctx context.Context, log *slog.Logger, t task.Task, err error) {
	why := "workspace: " + err.Error()
	switch {
	case errors.Is(err, context.Canceled):
		s.hold(ctx, log, t, "not started: mozi is shutting down", task.HeldForShutdown)
	case errors.Is(err, workspace.ErrUnreachable):
		s.hold(ctx, log, t, why, task.HeldForGitea)
	case errors.Is(err, workspace.ErrBranchBusy):
		s.hold(ctx, log, t, why, task.HeldForBranch)
	case errors.Is(err, workspace.ErrBranchGone):
		s.failNow(ctx, log, t, why)
	default: // no access, no repository, disk full: an operator may fix it meanwhile
		s.retryLater(ctx, log, t, why)
	}
}

// runnable checks what only an operator can fix: the agent's command
// exists, its sandbox too, and the command can be seen from inside it. It
// returns the command's absolute path, the one to run.
func (s *Spawner) runnable(a Agent, env []string) (string, error) {
	if len(a.Argv) == 0 {
		return "", fmt.Errorf("agent %s has no command", a.Login)
	}
	path, err := lookPath(a.Argv[0], envValue(env, "PATH"))
	if err != nil {
		return "", fmt.Errorf("agent %s: %w", a.Login, err)
	}
	if path, err = filepath.Abs(path); err != nil {
		return "", fmt.Errorf("agent %s: %w", a.Login, err)
	}
	if a.TokenFile != "" {
		if _, err := os.ReadFile(a.TokenFile); err != nil {
			return "", fmt.Errorf("agent %s: token file: %w", a.Login, err)
		}
	}
	if a.Sandboxed && s.cfg.Sandbox == nil {
		why := s.cfg.SandboxErr
		if why == nil {
			why = sandbox.ErrUnavailable
		}
		return "", fmt.Errorf("agent %s runs sandboxed: %w", a.Login, why)
	}
	if a.Sandboxed {
		if by, hidden := s.sandboxSpec(a).Conceals(path); hidden {
			return "", fmt.Errorf("agent %s: its command %s cannot be seen inside its sandbox (%s is hidden there): install it elsewhere, or set sandbox: none",
				a.Login, path, by)
		}
	}
	if a.Worktree && s.cfg.Workspaces == nil {
		return "", fmt.Errorf("agent %s works in a worktree, but mozi has no repository to clone from (set gitea.url or workspace.remote)", a.Login)
	}
	return path, nil
}

// sandboxSpec is the view every sandboxed run of agent a gets; a run adds
// its worktree and run directory.
func (s *Spawner) sandboxSpec(a Agent) sandbox.Spec {
	spec := sandbox.Spec{Hide: append([]string{s.cfg.StateDir}, s.cfg.Hide...), RunAs: s.cfg.RunAs}
	if a.Home != "" {
		spec.Writable = append(spec.Writable, a.Home)
	}
	return spec
}

// prepared is what one run needs on disk.
type prepared struct {
	dir    string // where the agent works
	branch string // the branch checked out ("" when detached or unknown)
	mirror string // the worktree's mirror ("" without a worktree)
	runDir string // prompt file, and the run's /tmp
	done   func()
}

func (r *prepared) cleanup() {
	if r.done != nil {
		r.done()
	}
	if r.runDir != "" {
		_ = removeAll(r.runDir)
	}
}

// prepare makes the run's directories: the worktree (and tells the prompt
// about it), the agent's home, the run's private directory.
func (s *Spawner) prepare(ctx context.Context, t task.Task, a Agent, in *prompts.Input) (*prepared, error) {
	r := &prepared{dir: a.Workdir, runDir: filepath.Join(s.cfg.StateDir, "runs", fmt.Sprintf("%d-%d", t.ID, t.DispatchCount))}
	if a.Worktree {
		req := Checkout(t, in)
		ws, err := s.cfg.Workspaces.Prepare(ctx, req)
		if err != nil {
			return nil, err
		}
		r.done = func() { s.cfg.Workspaces.Done(t.ID) }
		r.dir, r.branch, r.mirror = ws.Dir, ws.Branch, ws.Mirror
		in.Checkout = PromptCheckout(req, ws)
	}
	dirs := []string{r.runDir, filepath.Join(r.runDir, "tmp")}
	if a.Home != "" {
		dirs = append(dirs, a.Home)
	}
	if !a.Worktree {
		dirs = append(dirs, a.Workdir)
	}
	for _, d := range dirs {
		if err := s.mkdirForAgent(d); err != nil {
			r.cleanup()
			return nil, err
		}
	}
	return r, nil
}

// keepWorkBranch records the branch a task's own work went on the first
// time it is prepared, so that later runs (retries, the watchdog's
// follow-up) continue on it even if the issue is retitled or relabelled
// meanwhile (the branch name derives from both). Failing to record it only
// costs that guarantee.
func (s *Spawner) keepWorkBranch(ctx context.Context, log *slog.Logger, t task.Task, r *prepared) {
	if r.branch == "" || !t.ActionType.OpensPullRequest() || t.Meta.WorkBranch == r.branch {
		return
	}
	if err := s.store.PatchTaskMeta(ctx, t.ID, task.Meta{WorkBranch: r.branch}); err != nil {
		log.Warn("work branch not recorded: a retry derives it from the issue again", "branch", r.branch, "error", err)
	}
}

// mkdirForAgent creates a directory the agent's user owns (mozi's parts
// of the path stay mozi's and traversable).
func (s *Spawner) mkdirForAgent(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if s.cfg.RunAs != nil {
		if err := os.Chown(dir, int(s.cfg.RunAs.Uid), int(s.cfg.RunAs.Gid)); err != nil {
			return fmt.Errorf("give %s to the agents' user: %w", dir, err)
		}
	}
	return nil
}

// PromptCheckout is what the prompt says of a prepared worktree.
func PromptCheckout(req workspace.Request, ws workspace.Workspace) *prompts.Checkout {
	ref := req.Ref
	if req.Mode == workspace.Detached && ref != "" {
		ref = "origin/" + ref
	}
	return &prompts.Checkout{Dir: ws.Dir, Branch: ws.Branch, Ref: ref, Base: ws.DefaultBranch, Note: ws.Note}
}

// Checkout is the worktree a task needs: its own new branch for an
// assigned issue (or a broken deployment to fix), the pull request's head
// for work on the pull request, and a detached checkout for the rest
// (reviews of others' work, notifications, discussions, round reviews).
func Checkout(t task.Task, in *prompts.Input) workspace.Request {
	req := workspace.Request{TaskID: t.ID, Repo: t.Repo, Mode: workspace.Detached}
	head := t.Meta.HeadBranch
	switch t.ActionType {
	case task.ActionIssueAssigned, task.ActionDeployFailure, task.ActionInfrastructureFailure:
		req.Mode, req.Branch = workspace.NewBranch, in.Branch()
	case task.ActionReviewResult, task.ActionReviewComment, task.ActionCIFailure,
		task.ActionReviewUpdated:
		if head != "" {
			req.Mode, req.Branch = workspace.ExistingBranch, head
		}
	case task.ActionReviewRequest:
		req.Ref = head
	case task.ActionMention:
		// On a pull request, its author may push to it; anyone else reads.
		if head != "" && strings.EqualFold(t.Meta.IssueAuthor, t.Agent) && t.PRNumber > 0 {
			req.Mode, req.Branch = workspace.ExistingBranch, head
		} else {
			req.Ref = head
		}
	}
	return req
}

// command builds the process to run: the agent's argv with its prompt,
// inside its sandbox when it has one.
func (s *Spawner) command(a Agent, t task.Task, r *prepared, prompt string, env []string) (Command, error) {
	promptFile := filepath.Join(r.runDir, "prompt.md")
	if err := os.WriteFile(promptFile, []byte(prompt), 0o644); err != nil {
		return Command{}, fmt.Errorf("write prompt: %w", err)
	}
	env = setEnv(env, "MOZI_PROMPT_FILE", promptFile)
	args, stdin := argv(a.Argv, promptFile, prompt)
	cmd := Command{Argv: args, Dir: r.dir, Env: env, Timeout: a.Timeout, Usage: a.Usage,
		MaxCostUSD: a.MaxCostUSD, MaxTokens: a.MaxTokens, TailBytes: s.cfg.TailBytes, Credential: s.cfg.RunAs,
		Secrets: a.secretValues(s.cfg.Getenv)}
	if stdin {
		cmd.Stdin = []byte(prompt)
	}
	if !a.Sandboxed {
		return cmd, nil
	}
	spec := s.sandboxSpec(a)
	spec.Chdir, spec.Tmp = r.dir, filepath.Join(r.runDir, "tmp")
	spec.Writable = append(spec.Writable, r.dir)
	spec.ReadOnly = append(spec.ReadOnly, r.runDir)
	if r.mirror != "" {
		// Commits write the mirror's objects and refs; its configuration
		// and hooks stay read-only, so nothing the agent writes there runs
		// later as mozi.
		spec.Writable = append(spec.Writable, r.mirror)
		spec.ReadOnly = append(spec.ReadOnly, filepath.Join(r.mirror, "config"), filepath.Join(r.mirror, "hooks"),
			filepath.Join(r.mirror, "info"))
	}
	wrapped, err := s.cfg.Sandbox.Command(spec, a.Limits, cmd.Argv)
	if err != nil {
		return Command{}, err
	}
	cmd.Argv = wrapped
	return cmd, nil
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
	env = setEnv(env, RunEnv, runMark(s.cfg.RunScope, t.ID, t.DispatchCount))
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

func envValue(env []string, k string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, k+"="); ok {
			return v
		}
	}
	return ""
}

// lookPath finds a command on a PATH other than mozi's own.
func lookPath(name, path string) (string, error) {
	if strings.Contains(name, "/") {
		if st, err := os.Stat(name); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return "", fmt.Errorf("command %s is not an executable file", name)
		}
		return name, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("command %q not found on PATH (%s): install it or fix the agent's command", name, path)
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
	end := repository.RunEnd{Attempt: attempt, Owner: s.cfg.Owner, Reclaim: true}
	var msg string
	switch {
	case r.Outcome == OutcomeStopped:
		end.Reclaim = false // the task is over: nothing to move
		msg = "agent stopped: " + strings.TrimPrefix(r.Err, "stopped: ")
	case r.Outcome == OutcomeLeaseLost:
		// Killed: if the task is still this runner's (the database was
		// away), it runs again, not counted as a failure; if another runner
		// took it over, this records the attempt only.
		end.Event, end.Change, end.Reclaim = task.EventInterrupt, repository.Change{LeaseOwner: s.cfg.Owner}, false
		msg = "agent stopped: mozi lost the task's lease"
	case r.Outcome == OutcomeInterrupted:
		end.Event, end.Change, end.Reclaim = task.EventInterrupt, repository.Change{LeaseOwner: s.cfg.Owner}, false
		msg = "agent interrupted by shutdown; the task will run again"
	case r.Outcome == OutcomeSucceeded || t.ActionType.Notification() && r.Outcome != OutcomeSpawnError:
		if t.ActionType.FinishedOnExit() {
			end.Event, end.Change, msg = task.EventComplete, repository.Change{Actor: t.Agent}, "agent finished; task done"
		} else {
			msg = "agent finished; task waits for Gitea" // no event: only the lease is dropped
		}
	case t.RetryCount < t.MaxRetries:
		delay := task.Backoff(t.RetryCount+1, s.cfg.RetryBase, s.cfg.RetryMax)
		end.Event, end.Change = task.EventRetry, repository.Change{NotBefore: time.Now().Add(delay), Error: r.Err}
		log = log.With("error", r.Err, "retry_in", delay.Round(time.Second).String(), "retries_left", t.MaxRetries-t.RetryCount-1)
		msg = "agent failed, will retry"
		s.cfg.Metrics.retries.WithLabelValues(t.Agent).Inc()
	default:
		end.Event, end.Change = task.EventFail, repository.Change{Error: r.Err, Actor: task.ActorMozi,
			Notice: s.cfg.Notices.TaskFailed(t, r.Err)}
		log = log.With("error", r.Err)
		msg = "agent failed, no retry left: task failed"
	}
	res, ok := s.record(ctx, log, end)
	switch {
	case !ok:
		return
	case end.Event != "" && !res.Applied:
		log.Info("task had already moved", "transition", end.Event, "status", res.From)
		return
	case end.Event == task.EventRetry || end.Event == task.EventFail || r.Outcome == OutcomeLeaseLost:
		log.Warn(msg)
	default:
		log.Info(msg)
	}
}

// recordTimeout bounds one try to record a run.
const recordTimeout = 10 * time.Second

// record writes how a run ended to the database, retrying while the
// database does not answer, however long (only mozi's end stops it): a run
// that finished must not be rescued and run again because PostgreSQL was
// away as it ended. Retries come at most a second apart, so the record
// lands as soon as the database is back. The outcome is kept on disk, next
// to the attempt's log, until it is recorded; if mozi stops first,
// RecordLeftovers records it at the next start.
func (s *Spawner) record(ctx context.Context, log *slog.Logger, end repository.RunEnd) (repository.Result, bool) {
	path := outcomePath(end.Attempt.LogPath)
	if path != "" {
		if err := writeOutcome(path, end); err != nil {
			log.Warn("run outcome not kept on disk; recording it in the database only", "error", err)
			path = ""
		} else {
			s.setRecording(path, true)
			defer s.setRecording(path, false)
		}
	}
	for try := 1; ; try++ {
		res, err := s.finishRun(context.WithoutCancel(ctx), end)
		if err == nil {
			if path != "" {
				_ = os.Remove(path)
			}
			if try > 1 {
				log.Info("run recorded after the database came back", "tries", try)
			}
			return res, true
		}
		if try == 1 {
			log.Warn("run not recorded yet, retrying until the database answers", "error", err)
		}
		wait := task.Backoff(try, 100*time.Millisecond, time.Second)
		select {
		case <-s.cfg.Done:
			if path != "" {
				log.Error("run not recorded before mozi stops: kept on disk, recorded at the next start",
					"outcome_file", path, "error", err)
			} else {
				log.Error("run not recorded", "error", err)
			}
			return repository.Result{}, false
		case <-time.After(wait):
		}
	}
}

func (s *Spawner) finishRun(ctx context.Context, end repository.RunEnd) (repository.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, recordTimeout)
	defer cancel()
	return s.store.FinishRun(ctx, end)
}

func (s *Spawner) setRecording(path string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if on {
		s.recording[path] = true
	} else {
		delete(s.recording, path)
	}
}

// outcomeSuffix names the file that keeps a run's outcome until it is
// recorded: <log>.outcome.json.
const outcomeSuffix = ".outcome.json"

func outcomePath(logPath string) string {
	if logPath == "" {
		return ""
	}
	return strings.TrimSuffix(logPath, ".log") + outcomeSuffix
}

func writeOutcome(path string, end repository.RunEnd) error {
	data, err := json.Marshal(end)
	if err != nil {
		return fmt.Errorf("encode run outcome: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create log directory: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("write run outcome: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write run outcome: %w", err)
	}
	return nil
}

// RecordLeftovers records the run outcomes kept on disk that no Handle is
// recording: those of a mozi that stopped while the database was away. It
// returns how many it recorded; the rest stay for the next call.
func (s *Spawner) RecordLeftovers(ctx context.Context) (int, error) {
	var paths []string
	err := filepath.WalkDir(filepath.Join(s.cfg.StateDir, "logs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, outcomeSuffix) {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("look for unrecorded runs: %w", err)
	}
	n := 0
	for _, p := range paths {
		s.mu.Lock()
		busy := s.recording[p]
		s.mu.Unlock()
		if busy {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			continue // recorded and removed meanwhile
		}
		var end repository.RunEnd
		if err := json.Unmarshal(data, &end); err != nil {
			s.cfg.Logger.Error("unreadable run outcome set aside", "outcome_file", p, "error", err)
			_ = os.Rename(p, p+".broken")
			continue
		}
		res, err := s.finishRun(ctx, end)
		if err != nil {
			return n, fmt.Errorf("record run of task %d kept in %s: %w", end.Attempt.TaskID, p, err)
		}
		_ = os.Remove(p)
		n++
		s.cfg.Logger.Info("recorded a run kept on disk", "task_id", end.Attempt.TaskID, "attempt", end.Attempt.Attempt,
			"outcome", end.Attempt.Outcome, "applied", res.Applied, "status", res.From)
	}
	return n, nil
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

// removeAll removes a run's directory even where the agent left
// directories without write permission in its /tmp.
func removeAll(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// safeName makes owner/name usable as a directory name.
func safeName(repo string) string {
	return strings.NewReplacer("/", "_", "..", "_").Replace(repo)
}
