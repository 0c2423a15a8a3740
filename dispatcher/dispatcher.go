// Package dispatcher claims due tasks and hands them to the spawner. It
// wakes within milliseconds of new work (PostgreSQL LISTEN/NOTIFY across
// replicas, and an in-process signal), keeps a global and a per-agent
// concurrency limit, and checks guardrails before anything is spawned.
//
// Invariant: a task is spawned only after a claim that moved it from
// pending to claimed in the database, under a lock every replica shares,
// so no two runners ever spawn the same task.
package dispatcher

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/gitea"
	"github.com/moziplus/mozi/repository/lease"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/spawner/notice"
)

// Handler runs a claimed task (the spawner).
type Handler interface {
	Handle(ctx context.Context, t task.Task)
}

// Store is what the dispatcher claims from (repository.Store).
type Store interface {
	ClaimTasks(ctx context.Context, req repository.ClaimRequest) ([]task.Task, error)
	Apply(ctx context.Context, id int64, ev task.Event, c repository.Change) (repository.Result, error)
	SpawnCounts(ctx context.Context, repo string, issue int, agent string, since time.Time) (int, int, error)
	Heartbeat(ctx context.Context, id int64, owner string, ttl time.Duration) (repository.LeaseState, error)
	DropLease(ctx context.Context, id int64, owner string) error
}

// IssueSource answers the dependency guardrail (gitea.IssueReader).
type IssueSource interface {
	Issue(ctx context.Context, repo string, number int) (task.Issue, error)
	BlockedBy(ctx context.Context, repo string, number int) ([]int, error)
}

// Agent is an agent the dispatcher may spawn.
type Agent struct {
	Login          string
	MaxConcurrency int
	Enabled        bool
}

// Defaults of Config.
const (
	DefaultMaxConcurrency       = 4
	DefaultLeaseTTL             = time.Minute
	DefaultPollInterval         = 5 * time.Second
	DefaultSpawnsPerIssuePerDay = 20
	DefaultSpawnsPerAgentPerDay = 200
	DefaultGuardTimeout         = 30 * time.Second
	// DefaultAgentConcurrency is an Agent's MaxConcurrency when its
	// configuration says nothing: one run of an agent at a time.
	DefaultAgentConcurrency = 1
)

// The hold backoff's defaults are the task's (kept here for the
// configuration's defaults).
const (
	DefaultHoldBase = task.DefaultHoldBase
	DefaultHoldMax  = task.DefaultHoldMax
)

// Config configures the dispatcher; zero fields take defaults.
type Config struct {
	// Owner names this runner (lease holder).
	Owner string
	// MaxConcurrency caps agent processes this mozi runs at once (default
	// DefaultMaxConcurrency, 4).
	MaxConcurrency int
	Agents         []Agent
	// LeaseTTL of a claim (default DefaultLeaseTTL, 60s).
	LeaseTTL time.Duration
	// PollInterval is the safety net when no wake-up comes (default
	// DefaultPollInterval, 5s).
	PollInterval time.Duration
	// SpawnsPerIssuePerDay and SpawnsPerAgentPerDay are spawn budgets over
	// 24 hours (defaults DefaultSpawnsPerIssuePerDay and
	// DefaultSpawnsPerAgentPerDay, 20 and 200); a task over budget waits an
	// hour.
	SpawnsPerIssuePerDay int
	SpawnsPerAgentPerDay int
	// MaxHops fails mention tasks deeper in an agent-to-agent chain
	// (default task.DefaultMaxMentionHops, 4).
	MaxHops int
	// MaxDispatches fails a task dispatched this often without finishing,
	// rescues included, holds not (default: its max_retries + 5).
	MaxDispatches int
	// HoldBase and HoldMax shape the wait of a task held for a reason
	// outside it (Gitea unreachable: HoldBase, doubling per consecutive
	// hold; a dependency still open: 4×HoldBase, doubling), capped at
	// HoldMax (defaults DefaultHoldBase and DefaultHoldMax, 15s and 10m).
	HoldBase time.Duration
	HoldMax  time.Duration
	// GuardTimeout bounds the guardrail checks that ask Gitea (default
	// DefaultGuardTimeout, 30s): a slow Gitea holds the task instead of
	// the worker.
	GuardTimeout time.Duration
	// Notices words the comment queued on the issue when a guardrail fails
	// a task (nil: none).
	Notices *notice.Notices
	Logger  *slog.Logger
	Metrics *Metrics
	Now     func() time.Time
	// NewTicker makes the beat of lease renewals (default: a time.Ticker);
	// tests drive it.
	NewTicker func(d time.Duration) lease.Ticker
}

// Dispatcher is the claim loop.
type Dispatcher struct {
	cfg     Config
	store   Store
	issues  IssueSource
	handler Handler
	wake    chan struct{}
	freed   chan struct{}
	running atomic.Int64 // tasks in guard or handler
	busy    atomic.Int64 // tasks claimed and not finished, queued ones included
	wg      sync.WaitGroup

	// kicks make a run's lease keeper look at its task now (it ended).
	mu    sync.Mutex
	kicks map[int64]chan struct{}
}

// New builds a dispatcher; issues may be nil (no dependency guardrail).
func New(cfg Config, store Store, issues IssueSource, handler Handler) *Dispatcher {
	if cfg.MaxConcurrency <= 0 {
		cfg.MaxConcurrency = DefaultMaxConcurrency
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.SpawnsPerIssuePerDay <= 0 {
		cfg.SpawnsPerIssuePerDay = DefaultSpawnsPerIssuePerDay
	}
	if cfg.SpawnsPerAgentPerDay <= 0 {
		cfg.SpawnsPerAgentPerDay = DefaultSpawnsPerAgentPerDay
	}
	if cfg.MaxHops <= 0 {
		cfg.MaxHops = task.DefaultMaxMentionHops
	}
	if cfg.HoldBase <= 0 {
		cfg.HoldBase = DefaultHoldBase
	}
	if cfg.HoldMax <= 0 {
		cfg.HoldMax = DefaultHoldMax
	}
	if cfg.GuardTimeout <= 0 {
		cfg.GuardTimeout = DefaultGuardTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Dispatcher{cfg: cfg, store: store, issues: issues, handler: handler,
		wake: make(chan struct{}, 1), freed: make(chan struct{}, 1), kicks: map[int64]chan struct{}{}}
}

// TaskEnded tells the run of task id, if this dispatcher runs it, that the
// task became terminal (repository.TaskEndedChannel): its lease keeper
// looks at once and stops the agent if someone else ended the task. It
// never blocks.
func (d *Dispatcher) TaskEnded(id int64) {
	d.mu.Lock()
	kick := d.kicks[id]
	d.mu.Unlock()
	if kick != nil {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
}

// NotificationsLost makes every running task's lease keeper look at its
// task now: an end notified while the listener was away is not missed.
func (d *Dispatcher) NotificationsLost() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, kick := range d.kicks {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
}

// Wake asks for a claim now. It never blocks.
func (d *Dispatcher) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Running is how many tasks this dispatcher is running.
func (d *Dispatcher) Running() int { return int(d.running.Load()) }

// Run claims and hands out tasks until claimCtx ends; the handlers get
// runCtx, which the caller ends later (after a grace period) to kill what
// still runs. Run returns when it stopped claiming; Wait waits for the
// workers.
//
// MaxConcurrency workers run the tasks. The claim loop claims only for
// idle workers: a claimed task holds a lease that nobody renews until its
// agent starts, so it must not wait behind agents that run for minutes.
// Claims batch by themselves: workers that free up while a claim is in
// flight are all served by the next one.
func (d *Dispatcher) Run(claimCtx, runCtx context.Context) {
	agents := d.enabledAgents()
	if len(agents) == 0 {
		d.cfg.Logger.Warn("no enabled agent declared: nothing will be spawned")
	}
	queue := make(chan task.Task, d.cfg.MaxConcurrency)
	for range d.cfg.MaxConcurrency {
		d.wg.Go(func() { d.work(claimCtx, runCtx, queue) })
	}
	defer close(queue)
	for claimCtx.Err() == nil {
		// busy counts claimed tasks until their worker is done with them,
		// so room never exceeds the idle workers or the queue's space.
		room := d.cfg.MaxConcurrency - int(d.busy.Load())
		claimed := 0
		if room > 0 && len(agents) > 0 {
			tasks, err := d.store.ClaimTasks(claimCtx, repository.ClaimRequest{Owner: d.cfg.Owner, Limit: room,
				LeaseTTL: d.cfg.LeaseTTL, Agents: agents})
			switch {
			case err != nil && claimCtx.Err() == nil:
				d.cfg.Logger.Error("claim failed", "error", err)
			case err == nil:
				claimed = len(tasks)
				d.cfg.Metrics.claims.Add(float64(claimed))
				d.busy.Add(int64(claimed))
				for _, t := range tasks {
					queue <- t
				}
			}
		}
		if claimed > 0 && claimed == room {
			continue // maybe more is due
		}
		select {
		case <-claimCtx.Done():
		case <-d.wake:
		case <-d.freed:
		case <-time.After(d.cfg.PollInterval):
		}
	}
}

// work runs queued tasks. Tasks still queued when claiming stops were
// never started: they go back to pending at once.
func (d *Dispatcher) work(claimCtx, runCtx context.Context, queue <-chan task.Task) {
	for t := range queue {
		if claimCtx.Err() != nil {
			d.release(t)
			d.busy.Add(-1)
			continue
		}
		d.running.Add(1)
		d.runClaimed(runCtx, t)
		d.running.Add(-1)
		d.busy.Add(-1)
		select {
		case d.freed <- struct{}{}:
		default:
		}
	}
}

// runClaimed holds a claimed task's lease from the claim to the end of its
// run, through the guardrails (which may wait on Gitea), the agent's
// preparation and the recording of its outcome: the lease never expires
// under a live runner. Losing it (the task finished in Gitea, or another
// runner took it over) cancels the handler's context with ErrLeaseLost.
func (d *Dispatcher) runClaimed(runCtx context.Context, t task.Task) {
	ctx, cancel := context.WithCancelCause(runCtx)
	defer cancel(nil)
	kick := make(chan struct{}, 1)
	d.mu.Lock()
	d.kicks[t.ID] = kick
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.kicks, t.ID)
		d.mu.Unlock()
	}()
	var wg sync.WaitGroup
	wg.Go(func() { d.keepLease(ctx, cancel, t, kick) })
	if d.guard(ctx, t) {
		d.handler.Handle(ctx, t)
	}
	cancel(nil)
	wg.Wait()
	// A task that moved before its agent started (or whose run could not
	// be recorded) may still carry this runner's lease: it runs nothing.
	if err := d.store.DropLease(context.WithoutCancel(ctx), t.ID, d.cfg.Owner); err != nil {
		d.cfg.Logger.Warn("lease not dropped; it expires by itself", "task_id", t.ID, "error", err)
	}
}

// keepLease renews the task's lease every third of its TTL until ctx ends,
// and at once when kicked (the task ended). It stops the agent when
// someone other than the agent ended the task (a merge, a close, an
// operator): an agent whose own review or report ended it may finish. The
// run keeps its lease (and so its agent's slot) until its outcome is
// recorded, whatever happened to the task.
//
// When no renewal has succeeded for a whole TTL (the database is out of
// reach), another runner may take the task over if this one is thought
// dead: the run stops rather than become a second writer on the task's
// branch.
func (d *Dispatcher) keepLease(ctx context.Context, cancel context.CancelCauseFunc, t task.Task, kick <-chan struct{}) {
	log := d.cfg.Logger.With("task_id", t.ID, "repo", t.Repo, "issue", t.IssueNumber, "agent", t.Agent)
	k := lease.Keeper{TTL: d.cfg.LeaseTTL, Kick: kick, Now: d.cfg.Now, NewTicker: d.cfg.NewTicker,
		Retrying: func(err error) { log.Warn("heartbeat failed, will try again", "error", err) },
		Renew: func(beat context.Context) (bool, error) {
			st, err := d.store.Heartbeat(beat, t.ID, d.cfg.Owner, d.cfg.LeaseTTL)
			if err != nil || ctx.Err() != nil {
				return true, err
			}
			if !st.Held && st.Status.Terminal() {
				// Runs keep their lease through others' terminal events: a
				// finished task without it is this run's own outcome, recorded
				// (and its lease dropped) a moment before the run returns.
				log.Debug("task finished and its lease released: the run is over", "status", st.Status)
				return false, nil
			}
			if !st.Held {
				log.Error("lease lost: another runner holds the task, stopping the agent", "status", st.Status)
				cancel(task.ErrLeaseLost)
				return false, nil
			}
			if st.Status.Terminal() && !strings.EqualFold(st.EndedBy, t.Agent) {
				endedBy := cmp.Or(st.EndedBy, task.ActorMozi)
				log.Info("task ended while its agent ran: stopping the agent", "status", st.Status, "ended_by", endedBy)
				cancel(fmt.Errorf("%w: %s by %s", task.ErrTaskEnded, st.Status, endedBy))
				return false, nil
			}
			return true, nil
		}}
	if err := k.Run(ctx); err != nil {
		log.Error("lease not renewed for its whole TTL: stopping the agent (the task may run elsewhere now)",
			"lease_ttl", d.cfg.LeaseTTL.String(), "error", err)
		cancel(task.ErrLeaseLost)
	}
}

func (d *Dispatcher) release(t task.Task) {
	if _, err := d.store.Apply(context.Background(), t.ID, task.EventRelease,
		repository.Change{Error: "not started: mozi was shutting down", HeldFor: task.HeldForShutdown}); err != nil {
		d.cfg.Logger.Error("claimed task not released", "task_id", t.ID, "error", err)
	}
}

// Wait blocks until every worker returned (after Run returned).
func (d *Dispatcher) Wait() { d.wg.Wait() }

func (d *Dispatcher) enabledAgents() []repository.AgentLimit {
	var out []repository.AgentLimit
	for _, a := range d.cfg.Agents {
		if a.Enabled {
			out = append(out, repository.AgentLimit{Login: a.Login, MaxConcurrency: a.MaxConcurrency})
		}
	}
	return out
}

// guard checks the guardrails of a claimed task. A task that may never run
// fails; one that must wait goes back to pending with a not_before.
func (d *Dispatcher) guard(ctx context.Context, t task.Task) bool {
	log := d.cfg.Logger.With("task_id", t.ID, "repo", t.Repo, "issue", t.IssueNumber, "agent", t.Agent,
		"action_type", t.ActionType)
	bg := context.WithoutCancel(ctx)
	fail := func(reason, why string) bool {
		log.Warn("guardrail: task failed", "guardrail", reason, "reason", why)
		d.cfg.Metrics.guardrails.WithLabelValues(reason).Inc()
		if _, err := d.store.Apply(bg, t.ID, task.EventFail, repository.Change{Error: why, Actor: task.ActorMozi,
			Notice: d.cfg.Notices.TaskFailed(t, why)}); err != nil {
			log.Error("task not failed", "error", err)
		}
		return false
	}
	hold := func(reason, why string, heldFor task.HoldReason, wait time.Duration) bool {
		log.Info("guardrail: task waits", "guardrail", reason, "reason", why, "wait", wait.Round(time.Second).String())
		d.cfg.Metrics.guardrails.WithLabelValues(reason).Inc()
		if _, err := d.store.Apply(bg, t.ID, task.EventRelease, repository.Change{
			NotBefore: d.cfg.Now().Add(wait), Error: why, HeldFor: heldFor}); err != nil {
			log.Error("task not released", "error", err)
		}
		return false
	}
	// Only enabled, declared agents' tasks are claimed (tasks of agents no
	// longer declared are failed by the ticker's orphans job).
	if t.HopCount > d.cfg.MaxHops {
		return fail("hops", fmt.Sprintf("mention chain of %d hops is longer than the %d allowed", t.HopCount, d.cfg.MaxHops))
	}
	maxDispatches := d.cfg.MaxDispatches
	if maxDispatches <= 0 {
		maxDispatches = t.MaxRetries + 5
	}
	if t.DispatchCount > maxDispatches {
		return fail("dispatches", fmt.Sprintf("dispatched %d times without finishing", t.DispatchCount))
	}
	perIssue, perAgent, err := d.store.SpawnCounts(ctx, t.Repo, t.IssueNumber, t.Agent, d.cfg.Now().Add(-24*time.Hour))
	if err != nil {
		return hold("error", err.Error(), task.HeldForDatabase, task.Backoff(t.Holds+1, d.cfg.HoldBase, d.cfg.HoldMax))
	}
	if t.IssueNumber > 0 && perIssue >= d.cfg.SpawnsPerIssuePerDay {
		return hold("issue_budget", fmt.Sprintf("%d spawns on this issue in 24h (budget %d)", perIssue, d.cfg.SpawnsPerIssuePerDay),
			task.HeldForBudget, time.Hour)
	}
	if perAgent >= d.cfg.SpawnsPerAgentPerDay {
		return hold("agent_budget", fmt.Sprintf("%d spawns of %s in 24h (budget %d)", perAgent, t.Agent, d.cfg.SpawnsPerAgentPerDay),
			task.HeldForBudget, time.Hour)
	}
	depCtx, cancel := context.WithTimeout(ctx, d.cfg.GuardTimeout)
	blocker, err := d.openDependency(depCtx, t)
	cancel()
	switch {
	case err != nil && ctx.Err() != nil:
		return hold("shutdown", "mozi is shutting down", task.HeldForShutdown, 0)
	case errors.Is(err, context.DeadlineExceeded):
		return hold("dependencies", fmt.Sprintf("dependencies unknown: Gitea did not answer within %s", d.cfg.GuardTimeout),
			task.HeldForGitea, task.Backoff(t.Holds+1, d.cfg.HoldBase, d.cfg.HoldMax))
	case err != nil:
		return hold("dependencies", "dependencies unknown: "+err.Error(), task.HeldForGitea,
			task.Backoff(t.Holds+1, d.cfg.HoldBase, d.cfg.HoldMax))
	case blocker > 0:
		return hold("dependencies", fmt.Sprintf("waits for #%d", blocker), task.HeldForDependency,
			task.Backoff(t.Holds+1, 4*d.cfg.HoldBase, d.cfg.HoldMax))
	}
	return true
}

// openDependency returns an issue this one waits for that is still open:
// its Depends: lines and Gitea's native blocked-by, read fresh enough.
func (d *Dispatcher) openDependency(ctx context.Context, t task.Task) (int, error) {
	if d.issues == nil || t.IssueNumber == 0 || t.ActionType != task.ActionIssueAssigned {
		return 0, nil
	}
	deps := slices.Clone(t.DependsOn)
	blocked, err := d.issues.BlockedBy(ctx, t.Repo, t.IssueNumber)
	if err != nil && !errors.Is(err, task.ErrNotFound) {
		// (Gitea has no such issue: nothing blocks it; its run finds out.)
		return 0, err
	}
	deps = append(deps, blocked...)
	for _, n := range deps {
		if n == t.IssueNumber {
			continue
		}
		issue, err := d.issues.Issue(ctx, t.Repo, n)
		if errors.Is(err, task.ErrNotFound) || errors.Is(err, gitea.ErrUnavailable) {
			// A dependency that does not exist, or that mozi cannot know
			// without a Gitea, blocks nothing.
			continue
		}
		if err != nil {
			return 0, err
		}
		if !issue.Closed() {
			return n, nil
		}
	}
	return 0, nil
}

// Metrics are the dispatcher's collectors.
type Metrics struct {
	claims     prometheus.Counter
	guardrails *prometheus.CounterVec
}

// NewMetrics creates the collectors on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		claims: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mozi_dispatcher_claims_total",
			Help: "Tasks claimed by this mozi.",
		}),
		guardrails: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mozi_guardrail_hits_total",
			Help: "Claimed tasks stopped by a guardrail, by guardrail (hops, dispatches, issue_budget, agent_budget, dependencies, error, shutdown).",
		}, []string{"guardrail"}),
	}
	if reg != nil {
		reg.MustRegister(m.claims, m.guardrails)
	}
	return m
}
