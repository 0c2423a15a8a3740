package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moziplus/mozi/cmd/mozi/internal/config"
	"github.com/moziplus/mozi/dispatcher"
	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/gitea"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/repository/task/build"
	"github.com/moziplus/mozi/spawner"
	"github.com/moziplus/mozi/spawner/backend"
	"github.com/moziplus/mozi/spawner/notice"
	"github.com/moziplus/mozi/spawner/progress"
	"github.com/moziplus/mozi/templates"
	"github.com/moziplus/mozi/ticker"
)

// engine is the execution side of mozi serve: dispatcher, spawner and
// ticker, with the Gitea client and issue reader they share.
type engine struct {
	cfg        *config.Config
	logger     *slog.Logger
	store      *repository.Store
	gitea      *gitea.Client // nil without gitea.url
	reader     *gitea.IssueReader
	spawner    *spawner.Spawner
	backend    backend.Backend
	dispatcher *dispatcher.Dispatcher
	ticker     *ticker.Ticker
	poster     *notice.Poster // nil without gitea.url
	progress   *progress.Poster
	owner      string
	stateDir   string
	// dbUpSince is when this process last began to reach the database
	// without interruption (unix nanoseconds; 0 while it cannot).
	dbUpSince atomic.Int64
	// runCtx is the agents' runs' context: killRuns ends it when the
	// shutdown grace is over (runs not recorded by then are kept on disk).
	runCtx   context.Context
	killRuns context.CancelFunc
}

// runnerID names this mozi process in leases: host, pid and a random part
// (a pid is reused after a restart).
func runnerID() string {
	host, _ := os.Hostname()
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

func newEngine(cfg *config.Config, set *templates.Set, store *repository.Store, stateDir string,
	getenv func(string) string, logger *slog.Logger, reg prometheus.Registerer, wakeInbox func(),
	tasks *build.Builder) (*engine, error) {
	en := &engine{cfg: cfg, logger: logger, store: store, owner: runnerID(), stateDir: stateDir}
	en.runCtx, en.killRuns = context.WithCancel(context.Background())
	if cfg.Gitea.URL != "" {
		g, err := newGiteaClient(cfg, logger, reg, en.giteaRecovered)
		if err != nil {
			return nil, err
		}
		en.gitea = g
	} else {
		// A chosen mode (the demo's), not a fault: doctor warns about it.
		logger.Info("no gitea.url configured: mozi works from webhooks alone (no prompts of unseen issues, no reconcile, no status polling, no failure comments)")
	}
	en.reader = gitea.NewIssueReader(store, en.gitea)

	var err error
	if en.backend, err = newBackend(cfg, stateDir, en.owner, logger); err != nil {
		return nil, err
	}
	spawnAgents := map[string]spawner.Agent{}
	var dispAgents []dispatcher.Agent
	var enabled []string
	for _, a := range cfg.Agents {
		sa, err := spawnerAgent(a, stateDir)
		if err != nil {
			return nil, err
		}
		spawnAgents[a.Login] = sa
		dispAgents = append(dispAgents, dispatcher.Agent{Login: a.Login, MaxConcurrency: a.MaxConcurrency, Enabled: !a.Disabled})
		if !a.Disabled {
			enabled = append(enabled, a.Login)
		}
	}
	assembler, err := newAssembler(cfg, set, en.reader, store, en.gitea)
	if err != nil {
		return nil, err
	}
	var notices *notice.Notices
	if en.gitea != nil && *cfg.Spawner.FailureComment {
		notices = notice.New()
	}
	if en.gitea != nil {
		en.poster = notice.NewPoster(store, en.gitea, notice.PosterConfig{Logger: logger, Metrics: notice.NewMetrics(reg)})
	}
	en.progress = newProgressPoster(cfg, store, en.gitea, logger, reg)
	en.spawner = spawner.New(spawner.Config{
		Owner: en.owner, Agents: spawnAgents, StateDir: stateDir, GiteaURL: cfg.Gitea.URL,
		RetryBase: cfg.Spawner.RetryBase, RetryMax: cfg.Spawner.RetryMax,
		HoldBase: cfg.Dispatcher.HoldBase, HoldMax: cfg.Dispatcher.HoldMax,
		TailBytes: cfg.Spawner.OutputTailBytes, KillGrace: cfg.Spawner.KillGrace, Getenv: getenv,
		Logger: logger, Metrics: spawner.NewMetrics(reg), Notices: notices, Images: cfg.Backend.Images,
		Done: en.runCtx.Done(), Pauses: store, MaxResumesPerDay: cfg.UsageLimits.MaxUnattendedResumesPerDay,
	}, store, en.backend, assembler)
	en.dispatcher = dispatcher.New(dispatcher.Config{
		Owner: en.owner, MaxConcurrency: cfg.Dispatcher.MaxConcurrency, Agents: dispAgents,
		LeaseTTL: cfg.Dispatcher.LeaseTTL, PollInterval: cfg.Dispatcher.PollInterval,
		SpawnsPerIssuePerDay: cfg.Dispatcher.SpawnsPerIssuePerDay, SpawnsPerAgentPerDay: cfg.Dispatcher.SpawnsPerAgentPerDay,
		HoldBase: cfg.Dispatcher.HoldBase, HoldMax: cfg.Dispatcher.HoldMax,
		MaxHops: cfg.Webhook.MaxMentionHops, Notices: notices, Logger: logger, Metrics: dispatcher.NewMetrics(reg),
	}, store, en.reader, en.spawner)
	var tg ticker.Gitea
	if en.gitea != nil {
		tg = en.gitea
	}
	en.ticker = ticker.New(ticker.Config{
		Owner: en.owner, Agents: enabled, Lead: leadLogin(cfg), Declared: agentLogins(cfg), Repos: cfg.Gitea.Repos,
		LeaderTTL: cfg.Ticker.LeaderTTL, SweepEvery: cfg.Ticker.SweepEvery,
		ReconcileEvery: cfg.Ticker.ReconcileEvery, StatusesEvery: cfg.Ticker.StatusPollEvery,
		Retention: cfg.Ticker.Retention, MaxRetries: task.MaxRetriesSetting(*cfg.Dispatcher.MaxRetries),
		RunnerTTL: cfg.Dispatcher.LeaseTTL, DatabaseUpFor: en.databaseUpFor,
		WatchdogQuiet: cfg.Ticker.WatchdogQuiet, Notices: notices,
		TaskBudgetPerHour: cfg.Webhook.TaskBudgetPerHour,
		WakeInbox:         wakeInbox, WakeDispatcher: en.dispatcher.Wake, Logger: logger, Metrics: ticker.NewMetrics(reg),
		Tasks: tasks,
	}, store, tg)
	return en, nil
}

// start runs the dispatcher, the ticker and the notification listener.
// stop ends claiming at once, lets running agents finish within the
// shutdown grace, then kills them (their attempts are recorded as
// interrupted, and the tasks run again after a restart).
// checkGiteaToken says at start, in one line, when Gitea refuses mozi's
// token: otherwise mozi looks healthy while every task waits on "dependencies
// unknown" and no comment can be posted. A Gitea that does not answer yet
// is not an error here (the client's outage log covers it).
func (en *engine) checkGiteaToken(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	login, err := en.gitea.WhoAmI(ctx)
	switch {
	case errors.Is(err, gitea.ErrUnauthorized):
		en.logger.Error("Gitea refuses mozi's token (MOZI_GITEA_TOKEN): tasks will wait and no comment can be posted until it is fixed; mozi doctor checks it",
			"gitea", en.cfg.Gitea.URL)
	case err != nil:
		en.logger.Warn("could not check mozi's Gitea token at start", "error", err)
	case !strings.EqualFold(login, en.cfg.Gitea.BotUser):
		en.logger.Warn("mozi's Gitea token acts as another user than gitea.bot_user: mozi's own comments will be taken for someone else's",
			"acts_as", login, "bot_user", en.cfg.Gitea.BotUser)
	}
}

func (en *engine) start() (stop func()) {
	// A mozi killed outright may have left runs behind (a sandbox, a
	// container, a Job): the first sweep ends them before this life runs
	// anything.
	en.sweepRuns(context.Background())
	claimCtx, stopClaims := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	beatCtx, stopBeat := context.WithCancel(context.Background())
	var beatWG sync.WaitGroup
	beatWG.Go(func() { en.beatRunner(beatCtx) })
	wg.Go(func() { en.recordLeftovers(claimCtx) })
	if en.gitea != nil {
		wg.Go(func() { en.checkGiteaToken(claimCtx) })
		wg.Go(func() { en.gitea.WatchOutages(claimCtx, gitea.DefaultProbeEvery) })
		wg.Go(func() { en.poster.Run(claimCtx) })
		wg.Go(func() { en.store.Listen(claimCtx, repository.OutboxChannel, en.poster.Wake, en.logger) })
	}
	wg.Go(func() { en.progress.Run(claimCtx) })
	wg.Go(func() { en.store.Listen(claimCtx, repository.StatusChannel, en.progress.Wake, en.logger) })
	wg.Go(func() { en.sweepLoop(claimCtx) })
	wg.Go(func() { en.dispatcher.Run(claimCtx, en.runCtx) })
	wg.Go(func() { en.ticker.Run(claimCtx) })
	wg.Go(func() { en.store.Listen(claimCtx, repository.PendingChannel, en.dispatcher.Wake, en.logger) })
	// Ended tasks are heard until the last run is recorded.
	var runWG sync.WaitGroup
	runWG.Go(func() {
		en.store.ListenPayload(en.runCtx, repository.TaskEndedChannel, func(payload string) {
			if id, err := strconv.ParseInt(payload, 10, 64); err == nil {
				en.dispatcher.TaskEnded(id)
			}
		}, en.dispatcher.NotificationsLost, en.logger)
	})
	return func() {
		stopClaims()
		wg.Wait()
		if n := en.dispatcher.Running(); n > 0 {
			en.logger.Info("waiting for running agents", "running", n, "grace", en.cfg.Spawner.ShutdownGrace.String())
		}
		done := make(chan struct{})
		go func() { en.dispatcher.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(en.cfg.Spawner.ShutdownGrace):
			en.logger.Warn("shutdown grace over: stopping running agents", "running", en.dispatcher.Running())
			en.killRuns()
			<-done
		}
		en.killRuns()
		runWG.Wait()
		stopBeat()
		beatWG.Wait()
	}
}

// beatRunner tells the database this process lives, every third of the
// lease TTL, and keeps dbUpSince. A clean stop removes the runner.
func (en *engine) beatRunner(ctx context.Context) {
	every := en.cfg.Dispatcher.LeaseTTL / 3
	for {
		beat, cancel := context.WithTimeout(ctx, every)
		err := en.store.BeatRunner(beat, en.owner)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			if en.dbUpSince.Swap(0) != 0 {
				en.logger.Warn("runner heartbeat failed: the database is out of reach", "error", err)
			}
		case err == nil && en.dbUpSince.Load() == 0:
			en.dbUpSince.Store(time.Now().UnixNano())
		}
		select {
		case <-ctx.Done():
			bye, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = en.store.RemoveRunner(bye, en.owner)
			cancel()
			return
		case <-time.After(every):
		}
	}
}

// databaseUpFor is how long this process has reached the database
// without interruption.
func (en *engine) databaseUpFor() time.Duration {
	since := en.dbUpSince.Load()
	if since == 0 {
		return 0
	}
	return time.Since(time.Unix(0, since))
}

// giteaRecovered makes the tasks held through a Gitea outage, and the
// comments it refused, due at once: they need not wait out their backoff
// once Gitea answers.
func (en *engine) giteaRecovered() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if n, err := en.store.WakeOutbox(ctx); err != nil {
		en.logger.Warn("comments queued through the Gitea outage not woken: they wait out their backoff", "error", err)
	} else if n > 0 && en.poster != nil {
		en.poster.Wake()
	}
	if n, err := en.store.WakeStatusComments(ctx); err != nil {
		en.logger.Warn("status comments refused through the Gitea outage not woken: they wait out their backoff", "error", err)
	} else if n > 0 {
		en.progress.Wake()
	}
	n, err := en.store.WakeHeld(ctx, task.HeldForGitea)
	if err != nil {
		en.logger.Warn("tasks held through the Gitea outage not woken: they wait out their hold", "error", err)
		return
	}
	if n > 0 {
		en.logger.Info("Gitea answers again: tasks held for it are due now", "tasks", n)
		if en.dispatcher != nil {
			en.dispatcher.Wake()
		}
	}
}

// leftoverEvery is how often run outcomes kept on disk (the database was
// away when their run ended) are retried.
const leftoverEvery = 30 * time.Second

// recordLeftovers records, at start and then now and then, the outcomes of
// runs that ended while the database was away and were kept on disk.
func (en *engine) recordLeftovers(ctx context.Context) {
	for {
		if n, err := en.spawner.RecordLeftovers(ctx); err != nil && ctx.Err() == nil {
			en.logger.Warn("runs kept on disk not recorded yet", "recorded", n, "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(leftoverEvery):
		}
	}
}

// sweepLoop sweeps the backend now and then: finished tasks' places
// after their delay and within the disk budget, and what runs of dead
// replicas left. Every replica sweeps its own.
func (en *engine) sweepLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(en.cfg.Workspace.SweepEvery):
		}
		en.sweepRuns(ctx)
	}
}

func (en *engine) sweepRuns(ctx context.Context) {
	res, err := en.backend.Sweep(ctx, taskEnds{en.store})
	if err != nil && ctx.Err() == nil {
		// One line per place that could not go (the sweep went on).
		for _, line := range strings.Split(err.Error(), "\n") {
			en.logger.Warn("sweep: not removed", "backend", en.backend.Name(), "error", line)
		}
	}
	if res.OverBudget {
		en.logger.Warn("worktrees use more than workspace.disk_budget, all of it by live tasks or ones that could not be removed",
			"bytes", res.Bytes, "budget", int64(en.cfg.Workspace.DiskBudget))
	}
}

// taskEnds tells a backend's sweep which tasks are over.
type taskEnds struct{ store *repository.Store }

func (t taskEnds) TaskEnds(ctx context.Context, ids []int64) (map[int64]backend.TaskEnd, error) {
	ends, err := t.store.TaskEnds(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]backend.TaskEnd, len(ends))
	for id, e := range ends {
		out[id] = backend.TaskEnd{Terminal: e.Status.Terminal(), FinishedAt: e.FinishedAt,
			RunningAttempt: e.RunningAttempt, LeaseOwner: e.LeaseOwner}
	}
	return out, nil
}

// stateSubdir is where runs and logs go: under the embedded cluster's state
// directory, or the configured data_dir.
func stateSubdir(e *env, cfg *config.Config, dataDirFlag string, logger *slog.Logger) (string, error) {
	dir, err := resolveStateDir(e, cfg, dataDirFlag, logger)
	if err != nil {
		return "", err
	}
	// The agents' user (mozi as root) must traverse it to the runs and
	// worktrees it is given; logs and the database stay private.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create data directory: %w", err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chmod(dir, 0o755); err != nil {
			return "", fmt.Errorf("open data directory to the agents' user: %w", err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o700); err != nil {
		return "", fmt.Errorf("create log directory: %w", err)
	}
	return dir, nil
}
