package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"runtime/debug"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/moziplus/mozi/cmd/internal/memory"
	"github.com/moziplus/mozi/cmd/mozi/internal/config"
	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/gitea"
	"github.com/moziplus/mozi/repository/gitea/payload"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/repository/task/build"
	"github.com/moziplus/mozi/templates"
	"github.com/moziplus/mozi/webhook"
	"github.com/moziplus/mozi/webhook/rules"
)

// newMapper builds the event mapping rules from the configuration.
func newMapper(cfg *config.Config, set *templates.Set, logger *slog.Logger, metrics *rules.Metrics, tasks *build.Builder) (*rules.Mapper, error) {
	deploy, err := regexp.Compile(cfg.Webhook.DeployContext)
	if err != nil {
		return nil, fmt.Errorf("webhook.deploy_context: %w", err)
	}
	infra, err := regexp.Compile(cfg.Webhook.InfraContext)
	if err != nil {
		return nil, fmt.Errorf("webhook.infra_context: %w", err)
	}
	return rules.New(rules.Config{
		BotUser:           cfg.Gitea.BotUser,
		Agents:            webhookAgents(cfg),
		TaskBudgetPerHour: cfg.Webhook.TaskBudgetPerHour,
		MaxRetries:        task.MaxRetriesSetting(*cfg.Dispatcher.MaxRetries),
		MaxMentionHops:    cfg.Webhook.MaxMentionHops,
		MaxRepairRounds:   cfg.CI.MaxRepairRounds,
		DiscussionGrace:   cfg.Webhook.DiscussionGrace,
		QuietPeriod:       cfg.Reviews.QuietPeriod,
		Breaker: repository.BreakerPolicy{Comments: cfg.Webhook.CircuitBreaker.Comments,
			Window: cfg.Webhook.CircuitBreaker.Window, Cooldown: cfg.Webhook.CircuitBreaker.Cooldown},
		DiscussLabel:  cfg.Webhook.DiscussLabel,
		DeployContext: deploy,
		InfraContext:  infra,
		Route:         templates.RouteBusinessType,
		ReportFields:  set.ReportFields,
		Comments:      cfg.Gitea.URL != "",
		Logger:        logger,
		Metrics:       metrics,
		Tasks:         tasks,
	}), nil
}

func secretValues(secrets []config.Secret) []string {
	out := make([]string, len(secrets))
	for i, s := range secrets {
		out[i] = s.Value()
	}
	return out
}

func runServe(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "serve")
	configPath := fs.String("config", "", "configuration file")
	dataDir := fs.String("data-dir", "", "state directory of the embedded database (default $XDG_STATE_HOME/mozi)")
	insecure := fs.Bool("insecure-no-signature", false, "accept webhook deliveries without a valid signature (testing only, never in production)")
	if err := parseFlags(e, fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("serve takes no arguments, got %q", fs.Args())
	}
	cfg, err := config.Load(*configPath, e.getenv)
	if err != nil {
		return err
	}
	logger := newLogger(cfg.Log, e.stderr)
	gc := memory.Tune(e.getenv, int64(cfg.MemoryLimit))
	logger.Info("mozi starting", "version", version, "config", describeSource(cfg.Source), "agents", len(cfg.Agents),
		"runtime", gc)
	if len(cfg.Webhook.Secrets) == 0 && !*insecure {
		return errors.New("no webhook secret configured: set webhook.secrets, MOZI_WEBHOOK_SECRET or MOZI_WEBHOOK_SECRET_FILE (the same secret as in Gitea's webhook), or start with --insecure-no-signature for a local test")
	}
	if *insecure {
		logger.Error("INSECURE: --insecure-no-signature is set: anyone who can reach this port can create tasks and spawn agents")
	}

	// Listen before anything slow so a busy port fails at once.
	listener, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	defer listener.Close()

	db, err := openDatabase(ctx, e, cfg, *dataDir, logger, ownCluster)
	if err != nil {
		return err
	}
	defer db.Close()
	applied, err := db.migrate(ctx)
	if err != nil {
		return err
	}
	logger.Info("database ready", "migrations_applied", applied, "embedded", db.cluster != nil)

	set, err := templates.Load(cfg.Templates.Locale, cfg.Templates.Override)
	if err != nil {
		return err
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		webhook.NewInboxCollector(db.store, logger),
		repository.NewTaskCollector(db.store, agentLogins(cfg), logger),
		repository.NewPauseCollector(db.store, agentLogins(cfg), logger),
		repository.NewOutboxCollector(db.store, logger),
		repository.NewOutcomeCollector(db.store, logger),
	)
	repository.CountTransitions(db.store, registry)
	metrics := webhook.NewMetrics(registry)
	ruleMetrics := rules.NewMetrics(registry)
	// One builder, one guard configuration and one observer for every task
	// mozi creates: the rules' and the ticker's.
	tasks := build.New(build.Config{MaxRetries: task.MaxRetriesSetting(*cfg.Dispatcher.MaxRetries),
		BudgetPerHour: cfg.Webhook.TaskBudgetPerHour, Observer: ruleMetrics})
	mapper, err := newMapper(cfg, set, logger, ruleMetrics, tasks)
	if err != nil {
		return err
	}
	var wakeDispatcher func()
	processor := webhook.NewProcessor(db.store, mapper.Apply, webhook.ProcessorConfig{
		MaxAttempts: cfg.Webhook.MaxAttempts, Logger: logger, Metrics: metrics,
		OnProcessed: func() { wakeDispatcher() },
	})
	stateDir, err := stateSubdir(e, cfg, *dataDir, logger)
	if err != nil {
		return err
	}
	en, err := newEngine(cfg, set, db.store, stateDir, e.getenv, logger, registry, processor.Wake, tasks)
	if err != nil {
		return err
	}
	wakeDispatcher = en.dispatcher.Wake
	intake, err := webhook.NewIntake(db.store, webhook.IntakeConfig{
		Secrets: secretValues(cfg.Webhook.Secrets), InsecureNoSignature: *insecure,
		MaxBodyBytes: cfg.Webhook.MaxBodyBytes, MaxPendingBytes: int64(cfg.Webhook.MaxPendingBytes),
		Logger: logger, Metrics: metrics,
		OnAccepted: processor.Wake,
	})
	if err != nil {
		return err
	}
	// Background work outlives ctx (the signal) until the HTTP server has
	// drained, so accepted requests still get their commit.
	bgCtx, stopBackground := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBackground()
	intake.Start(bgCtx)
	processorDone := make(chan struct{})
	go func() {
		processor.Run(bgCtx)
		close(processorDone)
	}()

	stopConsole, err := startConsole(e, cfg, db.store, logger)
	if err != nil {
		return err
	}
	stopEngine := en.start()
	router := newRouter(db.store, registry, logger)
	router.Post(webhook.Path, intake.ServeHTTP)
	srv := &http.Server{
		Handler:           router,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		WriteTimeout:      time.Minute,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(listener) }()
	logger.Info("mozi serving", "listen", listener.Addr().String(), "runner", en.owner)

	var runErr error
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err := <-serveErr:
		runErr = fmt.Errorf("http server: %w", err)
	}
	// Intake first, so what arrives now is refused rather than half taken
	// (Gitea shows it failed, for a Redeliver; the catch-up finds most of
	// it); then claims; then running agents get their grace period.
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		logger.Warn("http shutdown", "error", err)
	}
	stopConsole(shutdownCtx)
	stopEngine()
	stopBackground()
	intake.Wait()
	<-processorDone
	logger.Info("mozi stopped")
	return runErr
}

func describeSource(source string) string {
	if source == "" {
		return "built-in defaults"
	}
	return source
}

// newRouter mounts mozi's HTTP endpoints but the webhook.
func newRouter(store *repository.Store, registry *prometheus.Registry, logger *slog.Logger) chi.Router {
	r := chi.NewRouter()
	r.Use(recoverer(logger))
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/readyz", readyHandler(store, logger))
	r.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{Registry: registry}))
	return r
}

// readyHandler answers 200 when the database answers and every migration
// is applied, else 503 with the reason.
func readyHandler(store *repository.Store, logger *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		if err := checkReady(ctx, store); err != nil {
			logger.Warn("not ready", "reason", err)
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "reason": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	}
}

func checkReady(ctx context.Context, store *repository.Store) error {
	if err := store.Ping(ctx); err != nil {
		return err
	}
	m, err := store.Migrator()
	if err != nil {
		return err
	}
	defer m.Close()
	current, err := m.Current(ctx)
	if err != nil {
		return err
	}
	if !current {
		return errors.New("database migrations are not current")
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// recoverer is the last resort: a handler panic is a bug, logged in one
// line with its request, answered 500, and the server goes on.
func recoverer(logger *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				if v := recover(); v != nil {
					if v == http.ErrAbortHandler {
						panic(v)
					}
					logger.Error("BUG: HTTP handler panicked", "method", r.Method, "path", r.URL.Path,
						"delivery_id", payload.ReadHeaders(r.Header).Delivery, "panic", fmt.Sprint(v),
						"stack", string(debug.Stack()))
					writeJSON(w, http.StatusInternalServerError, map[string]string{"status": "error", "error": "internal error"})
				}
			}()
			next.ServeHTTP(w, r)
		})
	}
}

// newGiteaClient builds mozi's Gitea API client from the configuration.
// onRecovered (may be nil) is called when Gitea answers again after an
// outage.
func newGiteaClient(cfg *config.Config, logger *slog.Logger, reg prometheus.Registerer, onRecovered func()) (*gitea.Client, error) {
	return gitea.New(gitea.Config{
		URL: cfg.Gitea.URL, Token: cfg.Gitea.Token.Value(), Timeout: cfg.Gitea.Timeout,
		RatePerSecond: cfg.Gitea.RatePerSecond, Burst: cfg.Gitea.Burst, Logger: logger, Registerer: reg,
		OnRecovered: onRecovered,
	})
}
