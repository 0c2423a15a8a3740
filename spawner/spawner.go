package spawner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moziplus/mozi/repository"
)

// Store is what the spawner records runs in (repository.Store).
type Store interface {
	Apply(ctx context.Context, id int64, ev repository.Event, c repository.Change) (repository.Result, error)
	StartRun(ctx context.Context, t repository.Task, owner, logPath string) (repository.Attempt, bool, error)
	FinishRun(ctx context.Context, a repository.Attempt, owner string, ev repository.Event, c repository.Change) (repository.Result, error)
	FinishAttempt(ctx context.Context, a repository.Attempt) error
	Heartbeat(ctx context.Context, id int64, owner string, ttl time.Duration) (bool, error)
	Task(ctx context.Context, id int64) (repository.Task, error)
	SetTaskMeta(ctx context.Context, id int64, m repository.Meta) error
}

// Runner runs one process (ProcessRunner; tests use fakes).
type Runner interface {
	Run(ctx context.Context, c Command) Result
}

// PromptFunc builds a task's prompt.
type PromptFunc func(ctx context.Context, t repository.Task) (string, error)

// Commenter posts the one comment that explains a failed task.
type Commenter interface {
	PostComment(ctx context.Context, repo string, number int, body string) (int64, error)
}

// Config configures the spawner.
type Config struct {
	// Owner names this runner: the lease holder of the tasks it runs.
	Owner string
	// Agents by login.
	Agents map[string]Agent
	// StateDir holds runs/ (prompt files) and logs/ (one log per attempt).
	StateDir string
	GiteaURL string
	// LeaseTTL is the lease each heartbeat renews (default 60s).
	LeaseTTL time.Duration
	// RetryBase and RetryMax shape the backoff between attempts (defaults
	// 30s and 30m).
	RetryBase time.Duration
	RetryMax  time.Duration
	// FailureComment posts one comment on the issue when a task fails
	// (default true).
	FailureComment bool
	TailBytes      int
	Getenv         func(string) string
	Logger         *slog.Logger
	Metrics        *Metrics
}

// Spawner runs a claimed task's agent and moves the task by the outcome.
type Spawner struct {
	cfg       Config
	store     Store
	runner    Runner
	prompt    PromptFunc
	commenter Commenter
}

// New builds a spawner; commenter may be nil (no Gitea: no failure comments).
func New(cfg Config, store Store, runner Runner, prompt PromptFunc, commenter Commenter) *Spawner {
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = time.Minute
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = 30 * time.Second
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = 30 * time.Minute
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
	return &Spawner{cfg: cfg, store: store, runner: runner, prompt: prompt, commenter: commenter}
}

// errPromptUnavailable is a transient failure to build the prompt.
var errPromptUnavailable = errors.New("prompt unavailable")

// Handle runs a claimed task. ctx ending means shutdown: the agent is
// killed and the attempt recorded as interrupted, not as a failure.
func (s *Spawner) Handle(ctx context.Context, t repository.Task) {
	log := s.cfg.Logger.With("task_id", t.ID, "repo", t.Repo, "issue", t.IssueNumber, "agent", t.Agent,
		"action_type", t.ActionType, "attempt", t.DispatchCount)
	bg := context.WithoutCancel(ctx) // bookkeeping outlives the shutdown signal
	agent, ok := s.cfg.Agents[t.Agent]
	if !ok {
		s.apply(bg, log, t, repository.EventFail, repository.Change{Error: "agent " + t.Agent + " is not declared"})
		return
	}
	prompt, err := s.prompt(ctx, t)
	if err != nil {
		// Gitea down, issue unreadable: the task waits, nothing is lost.
		log.Warn("prompt not built, task waits", "error", err)
		s.apply(bg, log, t, repository.EventRelease, repository.Change{
			NotBefore: time.Now().Add(time.Minute), Error: fmt.Sprintf("%v: %v", errPromptUnavailable, err)})
		return
	}
	runDir := filepath.Join(s.cfg.StateDir, "runs", fmt.Sprintf("%d-%d", t.ID, t.DispatchCount))
	logPath := filepath.Join(s.cfg.StateDir, "logs", safeName(t.Repo), fmt.Sprintf("%d-%d.log", t.ID, t.DispatchCount))
	attempt, started, err := s.store.StartRun(bg, t, s.cfg.Owner, logPath)
	if err != nil || !started {
		log.Info("task moved before its agent started: not spawning", "error", err)
		return
	}
	promptFile := filepath.Join(runDir, "prompt.md")
	if err := writePrompt(promptFile, prompt); err != nil {
		s.finish(bg, log, t, agent, attempt, Result{ExitCode: -1, Outcome: OutcomeSpawnError, Err: err.Error()})
		return
	}
	defer os.RemoveAll(runDir)

	args, stdin := argv(agent.Argv, promptFile, prompt)
	cmd := Command{Argv: args, Dir: agent.Workdir, LogPath: logPath, Timeout: agent.Timeout,
		Usage: agent.Usage, MaxCostUSD: agent.MaxCostUSD, MaxTokens: agent.MaxTokens, TailBytes: s.cfg.TailBytes,
		Env: environment(agent, Vars{TaskID: t.ID, Repo: t.Repo, Issue: t.IssueNumber, PR: t.PRNumber,
			Action: string(t.ActionType), Attempt: t.DispatchCount, PromptFile: promptFile, GiteaURL: s.cfg.GiteaURL},
			s.cfg.Getenv)}
	if stdin {
		cmd.Stdin = []byte(prompt)
	}
	if err := os.MkdirAll(agent.Workdir, 0o755); err != nil {
		s.finish(bg, log, t, agent, attempt, Result{ExitCode: -1, Outcome: OutcomeSpawnError,
			Err: "create working directory: " + err.Error()})
		return
	}

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go s.heartbeat(runCtx, cancel, t, log)
	log.Info("agent started")
	s.cfg.Metrics.started(t)
	result := s.runner.Run(runCtx, cmd)
	cancel(nil)
	s.finish(bg, log, t, agent, attempt, result)
}

// heartbeat renews the run's lease; losing it (the ticker rescued the task
// from a runner it thought dead) stops the agent so it never runs twice.
func (s *Spawner) heartbeat(ctx context.Context, cancel context.CancelCauseFunc, t repository.Task, log *slog.Logger) {
	ticker := time.NewTicker(s.cfg.LeaseTTL / 3)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			held, err := s.store.Heartbeat(context.WithoutCancel(ctx), t.ID, s.cfg.Owner, s.cfg.LeaseTTL)
			if err != nil {
				log.Warn("heartbeat failed", "error", err)
				continue
			}
			if !held {
				// Usually Gitea finished the task meanwhile (the issue was
				// closed); otherwise another runner took it over.
				if cur, err := s.store.Task(context.WithoutCancel(ctx), t.ID); err == nil && cur.Status.Terminal() {
					log.Info("task ended in Gitea while its agent ran: stopping the agent", "status", cur.Status)
				} else {
					log.Error("lease lost: stopping the agent")
				}
				cancel(ErrLeaseLost)
				return
			}
		}
	}
}

// finish records the attempt and moves the task by its outcome, in one
// transaction.
func (s *Spawner) finish(ctx context.Context, log *slog.Logger, t repository.Task, a Agent, attempt repository.Attempt, r Result) {
	attempt.Outcome, attempt.Error, attempt.OutputTail = r.Outcome, r.Err, r.Tail
	attempt.Duration, attempt.TokensIn, attempt.TokensOut, attempt.CostUSD = r.Duration, r.TokensIn, r.TokensOut, r.CostUSD
	if r.ExitCode >= 0 {
		code := r.ExitCode
		attempt.ExitCode = &code
	}
	s.cfg.Metrics.finished(t, r)
	log = log.With("outcome", r.Outcome, "duration", r.Duration.Round(time.Millisecond).String())
	var (
		ev  repository.Event
		c   repository.Change
		msg string
	)
	switch {
	case r.Outcome == OutcomeLeaseLost:
		log.Warn("agent stopped: its task was taken over")
		if err := s.store.FinishAttempt(ctx, attempt); err != nil {
			log.Error("attempt not recorded", "error", err)
		}
		return
	case r.Outcome == OutcomeInterrupted:
		ev, c, msg = repository.EventInterrupt, repository.Change{LeaseOwner: s.cfg.Owner}, "agent interrupted by shutdown; the task will run again"
	case r.Outcome == OutcomeSucceeded || t.ActionType.Notification() && r.Outcome != OutcomeSpawnError:
		if t.ActionType.FinishedOnExit() {
			ev, msg = repository.EventComplete, "agent finished; task done"
		} else {
			msg = "agent finished; task waits for Gitea" // ev "": only the lease is dropped
		}
	case t.RetryCount < t.MaxRetries:
		delay := s.backoff(t.RetryCount + 1)
		ev, c = repository.EventRetry, repository.Change{NotBefore: time.Now().Add(delay), Error: r.Err}
		log = log.With("error", r.Err, "retry_in", delay.Round(time.Second).String(), "retries_left", t.MaxRetries-t.RetryCount-1)
		msg = "agent failed, will retry"
		s.cfg.Metrics.retries.WithLabelValues(t.Agent).Inc()
	default:
		ev, c = repository.EventFail, repository.Change{Error: r.Err}
		log = log.With("error", r.Err)
		msg = "agent failed, no retry left: task failed"
	}
	res, err := s.store.FinishRun(ctx, attempt, s.cfg.Owner, ev, c)
	switch {
	case err != nil:
		log.Error("run not recorded", "error", err)
		return
	case ev != "" && !res.Applied:
		log.Info("task had already moved", "transition", ev, "status", res.From)
		return
	case ev == repository.EventRetry || ev == repository.EventFail:
		log.Warn(msg)
	default:
		log.Info(msg)
	}
	if ev == repository.EventFail && s.cfg.FailureComment && s.commenter != nil && t.IssueNumber > 0 {
		s.commentFailure(ctx, log, t, r)
	}
}

// commentFailure posts one comment on the issue, idempotently: the
// comment's id is kept with the task and checked first.
func (s *Spawner) commentFailure(ctx context.Context, log *slog.Logger, t repository.Task, r Result) {
	cur, err := s.store.Task(ctx, t.ID)
	if err != nil {
		log.Error("failure comment skipped", "error", err)
		return
	}
	if cur.Meta.Extra["failure_comment_id"] != "" {
		return
	}
	attempts := t.RetryCount + 1
	body := fmt.Sprintf("**mozi**: the `%s` task of @%s on this issue failed after %d attempt(s): %s.\n\n"+
		"mozi will not run it again by itself. Details: `mozi task show %d`; to try again: `mozi task retry %d`.",
		t.ActionType, t.Agent, attempts, strings.TrimSuffix(r.Err, "."), t.ID, t.ID)
	id, err := s.commenter.PostComment(ctx, t.Repo, t.IssueNumber, body)
	if err != nil {
		log.Error("failure comment not posted", "error", err)
		return
	}
	if cur.Meta.Extra == nil {
		cur.Meta.Extra = map[string]string{}
	}
	cur.Meta.Extra["failure_comment_id"] = fmt.Sprint(id)
	if err := s.store.SetTaskMeta(ctx, t.ID, cur.Meta); err != nil {
		log.Error("failure comment id not kept", "error", err)
	}
}

// backoff is exponential with jitter: RetryBase·2^(n-1), capped, ±25%.
func (s *Spawner) backoff(n int) time.Duration {
	d := s.cfg.RetryBase << min(n-1, 20)
	if d <= 0 || d > s.cfg.RetryMax {
		d = s.cfg.RetryMax
	}
	jitter := time.Duration(rand.Int64N(int64(d/2)+1)) - d/4
	return d + jitter
}

func (s *Spawner) apply(ctx context.Context, log *slog.Logger, t repository.Task, ev repository.Event, c repository.Change) bool {
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

func writePrompt(path, prompt string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create run directory: %w", err)
	}
	if err := os.WriteFile(path, []byte(prompt), 0o600); err != nil {
		return fmt.Errorf("write prompt: %w", err)
	}
	return nil
}

// safeName makes owner/name usable as a directory name.
func safeName(repo string) string {
	return strings.NewReplacer("/", "_", "..", "_").Replace(repo)
}

// Metrics are the spawner's collectors.
type Metrics struct {
	runs     *prometheus.CounterVec
	duration *prometheus.HistogramVec
	retries  *prometheus.CounterVec
	tokens   *prometheus.CounterVec
	cost     *prometheus.CounterVec
	latency  prometheus.Histogram
}

// NewMetrics creates the spawner's collectors on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mozi_agent_runs_total",
			Help: "Agent runs by agent and outcome (succeeded, failed, timeout, budget_exceeded, interrupted, spawn_error, lease_lost).",
		}, []string{"agent", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mozi_agent_run_seconds",
			Help:    "Duration of agent runs, by agent.",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600},
		}, []string{"agent"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mozi_task_retries_total",
			Help: "Failed runs retried, by agent.",
		}, []string{"agent"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mozi_agent_tokens_total",
			Help: "Tokens agents reported, by agent and direction (in, out).",
		}, []string{"agent", "direction"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mozi_agent_cost_usd_total",
			Help: "Cost agents reported, in US dollars, by agent.",
		}, []string{"agent"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "mozi_dispatch_latency_seconds",
			Help:    "Time from a task's creation to its agent's start.",
			Buckets: []float64{.005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900},
		}),
	}
	if reg != nil {
		reg.MustRegister(m.runs, m.duration, m.retries, m.tokens, m.cost, m.latency)
	}
	return m
}

func (m *Metrics) started(t repository.Task) {
	if t.DispatchCount == 1 && !t.CreatedAt.IsZero() {
		m.latency.Observe(time.Since(t.CreatedAt).Seconds())
	}
}

func (m *Metrics) finished(t repository.Task, r Result) {
	m.runs.WithLabelValues(t.Agent, r.Outcome).Inc()
	if r.Outcome != OutcomeSpawnError {
		m.duration.WithLabelValues(t.Agent).Observe(r.Duration.Seconds())
	}
	if r.TokensIn > 0 {
		m.tokens.WithLabelValues(t.Agent, "in").Add(float64(r.TokensIn))
	}
	if r.TokensOut > 0 {
		m.tokens.WithLabelValues(t.Agent, "out").Add(float64(r.TokensOut))
	}
	if r.CostUSD > 0 {
		m.cost.WithLabelValues(t.Agent).Add(r.CostUSD)
	}
}
