// Package ticker is mozi's periodic safety net, run by one leader among the
// replicas (elected through a lease row in PostgreSQL): it rescues tasks
// whose runner died, reconciles with Gitea after lost webhooks, consumes
// the mention queue, starts round reviews and discussion broadcasts, polls
// commit statuses of pull requests in review, fails tasks of agents that
// are gone, folds the counts of finished tasks, and prunes old data.
//
// What it learns from Gitea it feeds through the webhook inbox as
// deliveries of the shape Gitea would have sent, so the same mapping rules
// apply, once.
package ticker

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/gitea"
	"github.com/moziplus/mozi/repository/lease"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/repository/task/build"
	"github.com/moziplus/mozi/spawner/notice"
)

// Gitea is what the ticker asks Gitea (gitea.Client). What it answers
// names its repository (and a status its commit), as Gitea's client does.
type Gitea interface {
	FetchIssue(ctx context.Context, repo string, number int) (task.Issue, error)
	FetchPullRequest(ctx context.Context, repo string, number int) (task.PullRequest, error)
	FetchStatuses(ctx context.Context, repo, sha string) ([]task.CommitStatus, error)
	OpenIssuesSince(ctx context.Context, repo string, since time.Time, limit int) ([]task.Issue, error)
	OpenPullRequestsSince(ctx context.Context, repo string, since time.Time, limit int) ([]task.PullRequest, error)
	PendingReviewRequests(ctx context.Context, repo string, number int) ([]string, error)
	CommentsSince(ctx context.Context, repo string, since time.Time, limit int) ([]gitea.IssueComment, error)
}

// Defaults of Config.
const (
	DefaultLeaderTTL      = 15 * time.Second
	DefaultSweepEvery     = 10 * time.Second
	DefaultReconcileEvery = 5 * time.Minute
	DefaultReconcileAge   = 10 * time.Minute
	DefaultMentionsAge    = time.Minute
	DefaultStatusesEvery  = 2 * time.Minute
	DefaultPruneEvery     = time.Hour
	DefaultRetention      = 30 * 24 * time.Hour
)

// DefaultWatchdogQuiet is how long a task waits on its agent's output
// before the completion watchdog steps in.
const DefaultWatchdogQuiet = 30 * time.Minute

// Config configures the ticker; zero durations take defaults.
type Config struct {
	// Owner names this replica in the leader election.
	Owner string
	// Agents are the enabled agents (discussions go to each); Lead gets
	// round reviews; Declared are all agents (others' tasks fail).
	Agents   []string
	Lead     string
	Declared []string
	// Repos are the configured repositories (gitea.repos): the catch-up
	// reads them, and every repository mozi has seen an issue of, after
	// downtime (every ReconcileEvery).
	Repos []string
	// LeaderTTL is the leader lease (default DefaultLeaderTTL, 15s,
	// renewed every third).
	LeaderTTL time.Duration
	// SweepEvery runs the quick sweeps: rescue, mentions, rounds,
	// discussions, orphans, watchdog and counts (default
	// DefaultSweepEvery, 10s).
	SweepEvery time.Duration
	// ReconcileEvery re-reads from Gitea the issues live tasks wait on
	// (default DefaultReconcileEvery, 5m); issues whose copy is older than
	// ReconcileAge are re-read (default DefaultReconcileAge, 10m).
	ReconcileEvery time.Duration
	ReconcileAge   time.Duration
	// MentionsAge: queued mentions older than this are turned into tasks
	// (default DefaultMentionsAge, 1m).
	MentionsAge time.Duration
	// StatusesEvery polls the commit statuses of pull requests in review
	// (default DefaultStatusesEvery, 2m).
	StatusesEvery time.Duration
	// PruneEvery deletes what is older than Retention (default
	// DefaultPruneEvery, 1h).
	PruneEvery time.Duration
	// WatchdogQuiet is how long a task may wait on its agent's output
	// (a pull request, an [Action Report], a push, a review) after the
	// agent's run ended before the watchdog steps in (default
	// DefaultWatchdogQuiet, 30m).
	WatchdogQuiet time.Duration
	// Retention keeps processed deliveries, effects, mentions and attempt
	// logs of finished tasks this long (default DefaultRetention, 30 days).
	Retention time.Duration
	// MaxRetries of the tasks the ticker creates (0: the default); unused
	// when Tasks is set.
	MaxRetries int
	// TaskBudgetPerHour caps the tasks created per issue per hour, for the
	// ticker's tasks as for the webhook's (0: no cap; unused when Tasks is
	// set).
	TaskBudgetPerHour int
	// Notices words the comment queued when the watchdog fails a task
	// (nil: none).
	Notices *notice.Notices
	// RunnerTTL is how long a runner (a mozi process) may go without a
	// heartbeat before its runs are rescued (default: the default lease
	// TTL, 60s).
	RunnerTTL time.Duration
	// DatabaseUpFor says how long this process has reached the database
	// without interruption (nil: always long enough). Nothing is rescued
	// before a whole RunnerTTL of it: after an outage, live runners beat
	// again and record their runs, and only dead runners' tasks are
	// rescued.
	DatabaseUpFor func() time.Duration
	// WakeInbox and WakeDispatcher are called when the ticker added work.
	WakeInbox      func()
	WakeDispatcher func()
	Logger         *slog.Logger
	Metrics        *Metrics
	// Creations is told of every task the ticker creates and of those a
	// guard refused, once their transaction committed, as the webhook's
	// rules are (nil: nobody), so that mozi_tasks_created_total counts
	// round reviews, discussions and late mentions too.
	Creations CreationObserver
	// Tasks builds and guards the tasks the ticker creates (default: one
	// built from MaxRetries, TaskBudgetPerHour and Creations). mozi serve
	// passes the rules', so both share one guard configuration.
	Tasks *build.Builder
	Now   func() time.Time
	// NewTicker makes the beat of leadership renewals while jobs run
	// (default: a time.Ticker); tests drive it.
	NewTicker func(d time.Duration) lease.Ticker
}

// CreationObserver learns of the tasks the ticker creates or is refused.
type CreationObserver = build.Observer

func (c *Config) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.LeaderTTL, DefaultLeaderTTL)
	def(&c.SweepEvery, DefaultSweepEvery)
	def(&c.ReconcileEvery, DefaultReconcileEvery)
	def(&c.ReconcileAge, DefaultReconcileAge)
	def(&c.MentionsAge, DefaultMentionsAge)
	def(&c.StatusesEvery, DefaultStatusesEvery)
	def(&c.PruneEvery, DefaultPruneEvery)
	def(&c.WatchdogQuiet, DefaultWatchdogQuiet)
	def(&c.Retention, DefaultRetention)
	def(&c.RunnerTTL, time.Minute)
	if c.WakeInbox == nil {
		c.WakeInbox = func() {}
	}
	if c.WakeDispatcher == nil {
		c.WakeDispatcher = func() {}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Tasks == nil {
		c.Tasks = build.New(build.Config{MaxRetries: c.MaxRetries, BudgetPerHour: c.TaskBudgetPerHour,
			Observer: c.Creations})
	}
}

// Ticker runs the periodic jobs while it leads.
type Ticker struct {
	cfg   Config
	store *repository.Store
	gitea Gitea // nil: the jobs that need Gitea are skipped
	jobs  []job
}

type job struct {
	name  string
	every time.Duration
	run   func(ctx context.Context) (int, error)
	last  time.Time
}

// Job names.
const (
	JobRescue      = "rescue"
	JobReconcile   = "reconcile"
	JobMentions    = "mentions"
	JobRounds      = "rounds"
	JobDiscussions = "discussions"
	JobStatuses    = "statuses"
	JobOrphans     = "orphans"
	JobPrune       = "prune"
	JobWatchdog    = "watchdog"
	JobCatchUp     = "catch_up"
	JobCounts      = "counts"
)

// New builds a ticker; gitea may be nil.
func New(cfg Config, store *repository.Store, gitea Gitea) *Ticker {
	cfg.setDefaults()
	t := &Ticker{cfg: cfg, store: store, gitea: gitea}
	t.jobs = []job{
		{name: JobRescue, every: cfg.SweepEvery, run: t.rescue},
		{name: JobCatchUp, every: cfg.ReconcileEvery, run: t.catchUp},
		{name: JobReconcile, every: cfg.ReconcileEvery, run: t.reconcile},
		{name: JobMentions, every: cfg.SweepEvery, run: t.mentions},
		{name: JobRounds, every: cfg.SweepEvery, run: t.rounds},
		{name: JobDiscussions, every: cfg.SweepEvery, run: t.discussions},
		{name: JobStatuses, every: cfg.StatusesEvery, run: t.statuses},
		{name: JobOrphans, every: cfg.SweepEvery, run: t.orphans},
		{name: JobPrune, every: cfg.PruneEvery, run: t.prune},
		{name: JobWatchdog, every: cfg.SweepEvery, run: t.watchdog},
		{name: JobCounts, every: cfg.SweepEvery, run: t.store.FoldTaskCounts},
	}
	return t
}

// Run competes for leadership and, while leading, runs each job when it is
// due, until ctx ends; then it gives the lease up.
func (t *Ticker) Run(ctx context.Context) {
	beat := time.NewTicker(min(t.cfg.LeaderTTL/3, time.Second))
	defer beat.Stop()
	leading := false
	for {
		ok, err := t.store.AcquireLeadership(ctx, "ticker", t.cfg.Owner, t.cfg.LeaderTTL)
		switch {
		case err != nil && ctx.Err() == nil:
			t.cfg.Logger.Warn("leader election failed", "error", err)
			ok = false
		case ok != leading:
			t.cfg.Logger.Info("ticker leadership changed", "leader", ok)
		}
		leading = ok
		t.cfg.Metrics.leader.Set(boolFloat(leading))
		if leading {
			leading = t.tickWhileLeading(ctx)
		}
		select {
		case <-ctx.Done():
			if leading {
				release, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				_ = t.store.ReleaseLeadership(release, "ticker", t.cfg.Owner)
				cancel()
			}
			t.cfg.Metrics.leader.Set(0)
			return
		case <-beat.C:
		}
	}
}

// tickWhileLeading runs the due jobs while renewing the leader lease
// every third of its TTL: jobs against a slow Gitea can outlast the lease,
// and two leaders would run the same jobs at once. When the lease is lost
// (or cannot be renewed for a whole TTL) the jobs' context is cancelled.
// It reports whether this runner still leads.
func (t *Ticker) tickWhileLeading(ctx context.Context) bool {
	jobCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var lost atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		k := lease.Keeper{TTL: t.cfg.LeaderTTL, Now: t.cfg.Now, NewTicker: t.cfg.NewTicker,
			Renew: func(beat context.Context) (bool, error) {
				ok, err := t.store.AcquireLeadership(beat, "ticker", t.cfg.Owner, t.cfg.LeaderTTL)
				if err == nil && !ok {
					lost.Store(true) // another replica holds it now
				}
				return ok, err
			}}
		err := k.Run(jobCtx)
		if err != nil || lost.Load() {
			t.cfg.Logger.Warn("ticker leadership lost while its jobs ran: stopping them", "error", err)
			lost.Store(true)
			cancel()
		}
	}()
	t.Tick(jobCtx)
	cancel()
	<-done
	return !lost.Load()
}

// Tick runs every job that is due now.
func (t *Ticker) Tick(ctx context.Context) {
	now := t.cfg.Now()
	for i := range t.jobs {
		j := &t.jobs[i]
		if !j.last.IsZero() && now.Sub(j.last) < j.every {
			continue
		}
		j.last = now
		t.RunJob(ctx, j.name)
	}
}

// RunJob runs one job now (tests, and `mozi` operators through Tick).
func (t *Ticker) RunJob(ctx context.Context, name string) int {
	for _, j := range t.jobs {
		if j.name != name {
			continue
		}
		start := time.Now()
		n, err := j.run(ctx)
		t.cfg.Metrics.runs.WithLabelValues(name).Inc()
		t.cfg.Metrics.seconds.WithLabelValues(name).Observe(time.Since(start).Seconds())
		if err != nil && ctx.Err() == nil {
			t.cfg.Logger.Error("ticker job failed", "job", name, "error", err)
			t.cfg.Metrics.errors.WithLabelValues(name).Inc()
		}
		if n > 0 {
			t.cfg.Metrics.items.WithLabelValues(name).Add(float64(n))
		}
		return n
	}
	panic(fmt.Sprintf("ticker: no job %q", name))
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// removeLogs deletes pruned attempt logs; a log already gone is fine.
func removeLogs(paths []string) int {
	n := 0
	for _, p := range paths {
		if err := os.Remove(p); err == nil {
			n++
		}
	}
	return n
}

// Metrics are the ticker's collectors.
type Metrics struct {
	leader  prometheus.Gauge
	runs    *prometheus.CounterVec
	errors  *prometheus.CounterVec
	items   *prometheus.CounterVec
	seconds *prometheus.HistogramVec
	rescues prometheus.Counter
	stalled *prometheus.CounterVec
}

// NewMetrics creates the collectors on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mozi_ticker_leader",
			Help: "1 when this mozi leads the ticker (exactly one replica should).",
		}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mozi_ticker_job_runs_total", Help: "Ticker job runs, by ticker job.",
		}, []string{"ticker_job"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mozi_ticker_job_errors_total", Help: "Ticker job runs that failed, by ticker job.",
		}, []string{"ticker_job"}),
		items: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mozi_ticker_job_items_total",
			Help: "What ticker jobs acted on (tasks rescued, issues reconciled, tasks created, rows pruned…), by ticker job.",
		}, []string{"ticker_job"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "mozi_ticker_job_seconds", Help: "Duration of ticker job runs, by ticker job.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9),
		}, []string{"ticker_job"}),
		rescues: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mozi_task_rescues_total", Help: "Tasks rescued after their runner's lease expired.",
		}),
		stalled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mozi_watchdog_actions_total",
			Help: "Tasks whose agent finished without what moves them on, by what the watchdog did (follow_up: ran the agent once more; fail).",
		}, []string{"action"}),
	}
	if reg != nil {
		reg.MustRegister(m.leader, m.runs, m.errors, m.items, m.seconds, m.rescues, m.stalled)
	}
	return m
}
