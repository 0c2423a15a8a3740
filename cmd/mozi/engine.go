package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moziplus/mozi/cmd/mozi/internal/config"
	"github.com/moziplus/mozi/dispatcher"
	"github.com/moziplus/mozi/prompts"
	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/spawner"
	"github.com/moziplus/mozi/spawner/notice"
	"github.com/moziplus/mozi/templates"
	"github.com/moziplus/mozi/ticker"
)

// engine is the execution side of mozi serve: dispatcher, spawner and
// ticker, with the Gitea client and issue reader they share.
type engine struct {
	cfg        *config.Config
	logger     *slog.Logger
	store      *repository.Store
	gitea      *repository.Gitea // nil without gitea.url
	reader     *repository.IssueReader
	spawner    *spawner.Spawner
	dispatcher *dispatcher.Dispatcher
	ticker     *ticker.Ticker
	owner      string
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
	getenv func(string) string, logger *slog.Logger, reg prometheus.Registerer, wakeInbox func()) (*engine, error) {
	en := &engine{cfg: cfg, logger: logger, store: store, owner: runnerID()}
	if cfg.Gitea.URL != "" {
		g, err := newGiteaClient(cfg, logger, reg)
		if err != nil {
			return nil, err
		}
		en.gitea = g
	} else {
		logger.Warn("no gitea.url configured: mozi works from webhooks alone (no prompts of unseen issues, no reconcile, no status polling, no failure comments)")
	}
	en.reader = repository.NewIssueReader(store, en.gitea)

	profiles := map[string]prompts.Agent{}
	spawnAgents := map[string]spawner.Agent{}
	var dispAgents []dispatcher.Agent
	var enabled []string
	for _, a := range cfg.Agents {
		pa, err := promptAgent(a)
		if err != nil {
			return nil, err
		}
		argv, usage, err := spawner.AgentFromPreset(a.Preset, a.Command, a.Script)
		if err != nil {
			return nil, fmt.Errorf("agent %s: %w", a.Login, err)
		}
		profiles[a.Login] = pa
		spawnAgents[a.Login] = spawner.Agent{Login: a.Login, Argv: argv, Workdir: a.Workdir, Timeout: a.Timeout,
			TokenEnv: a.TokenEnv, Usage: usage, MaxCostUSD: a.MaxCostUSD, MaxTokens: a.MaxTokens,
			Env: a.Env, PassEnv: a.PassEnv}
		dispAgents = append(dispAgents, dispatcher.Agent{Login: a.Login, MaxConcurrency: a.MaxConcurrency, Enabled: !a.Disabled})
		if !a.Disabled {
			enabled = append(enabled, a.Login)
		}
	}
	builder := prompts.NewBuilder(set, nil, 0)
	lead := leadLogin(cfg)
	promptFor := func(ctx context.Context, t repository.Task) (string, error) {
		merged, err := en.reader.MergeTask(ctx, t)
		if err != nil {
			return "", err
		}
		t = merged.Task
		in, err := prompts.Gather(ctx, en.reader, t, profiles[t.Agent], cfg.Gitea.URL, lead)
		if err != nil {
			return "", err
		}
		if t.DispatchCount > 1 || t.RetryCount > 0 {
			in.Retry = retryContext(ctx, store, t)
		}
		p, err := builder.Build(in)
		if err != nil {
			return "", err
		}
		return p.Text, nil
	}
	var notifier *notice.Notifier
	if en.gitea != nil && *cfg.Spawner.FailureComment {
		notifier = notice.New(en.gitea, store, logger)
	}
	en.spawner = spawner.New(spawner.Config{
		Owner: en.owner, Agents: spawnAgents, StateDir: stateDir, GiteaURL: cfg.Gitea.URL,
		RetryBase: cfg.Spawner.RetryBase, RetryMax: cfg.Spawner.RetryMax,
		TailBytes: cfg.Spawner.OutputTailBytes, Getenv: getenv,
		Logger: logger, Metrics: spawner.NewMetrics(reg), Notifier: notifier,
	}, store, &spawner.ProcessRunner{KillGrace: cfg.Spawner.KillGrace, Logger: logger}, promptFor)
	en.dispatcher = dispatcher.New(dispatcher.Config{
		Owner: en.owner, MaxConcurrency: cfg.Dispatcher.MaxConcurrency, Agents: dispAgents,
		LeaseTTL: cfg.Dispatcher.LeaseTTL, PollInterval: cfg.Dispatcher.PollInterval,
		SpawnsPerIssuePerDay: cfg.Dispatcher.SpawnsPerIssuePerDay, SpawnsPerAgentPerDay: cfg.Dispatcher.SpawnsPerAgentPerDay,
		MaxHops: cfg.Webhook.MaxMentionHops, Logger: logger, Metrics: dispatcher.NewMetrics(reg),
	}, store, en.reader, en.spawner)
	var tg ticker.Gitea
	if en.gitea != nil {
		tg = en.gitea
	}
	en.ticker = ticker.New(ticker.Config{
		Owner: en.owner, Agents: enabled, Lead: lead, Declared: agentLogins(cfg),
		LeaderTTL: cfg.Ticker.LeaderTTL, RescueEvery: cfg.Ticker.SweepEvery, MentionsEvery: cfg.Ticker.SweepEvery,
		RoundsEvery: cfg.Ticker.SweepEvery, DiscussEvery: cfg.Ticker.SweepEvery, OrphansEvery: cfg.Ticker.SweepEvery,
		ReconcileEvery: cfg.Ticker.ReconcileEvery, StatusesEvery: cfg.Ticker.StatusPollEvery,
		Retention: cfg.Ticker.Retention, MaxRetries: repository.MaxRetriesSetting(*cfg.Dispatcher.MaxRetries),
		WakeInbox: wakeInbox, WakeDispatcher: en.dispatcher.Wake, Logger: logger, Metrics: ticker.NewMetrics(reg),
	}, store, tg)
	return en, nil
}

// retryContext tells a retried agent what the last attempt left.
func retryContext(ctx context.Context, store *repository.Store, t repository.Task) *prompts.Retry {
	attempts, err := store.Attempts(ctx, t.ID)
	if err != nil || len(attempts) == 0 {
		return &prompts.Retry{Attempt: t.DispatchCount, Error: t.LastError}
	}
	last := attempts[len(attempts)-1]
	errText := last.Error
	if errText == "" {
		errText = t.LastError
	}
	return &prompts.Retry{Attempt: t.DispatchCount, Error: errText, OutputTail: last.OutputTail}
}

// start runs the dispatcher, the ticker and the notification listener.
// stop ends claiming at once, lets running agents finish within the
// shutdown grace, then kills them (their attempts are recorded as
// interrupted, and the tasks run again after a restart).
func (en *engine) start() (stop func()) {
	claimCtx, stopClaims := context.WithCancel(context.Background())
	runCtx, killRuns := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { en.recordLeftovers(claimCtx) })
	wg.Go(func() { en.dispatcher.Run(claimCtx, runCtx) })
	wg.Go(func() { en.ticker.Run(claimCtx) })
	wg.Go(func() { en.store.Listen(claimCtx, repository.PendingChannel, en.dispatcher.Wake, en.logger) })
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
			killRuns()
			<-done
		}
		killRuns()
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

// stateSubdir is where runs and logs go: under the embedded cluster's state
// directory, or the configured data_dir.
func stateSubdir(e *env, cfg *config.Config, dataDirFlag string, logger *slog.Logger) (string, error) {
	dir, err := resolveStateDir(e, cfg, dataDirFlag, logger)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o700); err != nil {
		return "", fmt.Errorf("create log directory: %w", err)
	}
	return dir, nil
}
