package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/moziplus/mozi/cmd/mozi/internal/config"
	"github.com/moziplus/mozi/repository"
)

func runServe(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "serve")
	configPath := fs.String("config", "", "configuration file")
	dataDir := fs.String("data-dir", "", "state directory of the embedded database (default $XDG_STATE_HOME/mozi)")
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
	logger.Info("mozi starting", "version", version, "config", describeSource(cfg.Source), "agents", len(cfg.Agents))

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

	registry := prometheus.NewRegistry()
	registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	srv := &http.Server{
		Handler:           newRouter(db.store, registry, logger),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		WriteTimeout:      time.Minute,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(listener) }()
	logger.Info("mozi serving", "listen", listener.Addr().String())

	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err := <-serveErr:
		return fmt.Errorf("http server: %w", err)
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		logger.Warn("http shutdown", "error", err)
	}
	logger.Info("mozi stopped")
	return nil
}

func describeSource(source string) string {
	if source == "" {
		return "built-in defaults"
	}
	return source
}

// newRouter mounts mozi's HTTP endpoints.
func newRouter(store *repository.Store, registry *prometheus.Registry, logger *slog.Logger) http.Handler {
	r := chi.NewRouter()
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
