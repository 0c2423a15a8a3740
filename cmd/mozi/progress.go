package main

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moziplus/mozi/cmd/mozi/internal/config"
	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/gitea"
	"github.com/moziplus/mozi/spawner/progress"
)

// newProgressPoster builds the poster of the issues' status comments and
// reactions (progress: in the configuration).
func newProgressPoster(cfg *config.Config, store *repository.Store, g *gitea.Client, logger *slog.Logger, reg prometheus.Registerer) *progress.Poster {
	return progress.NewPoster(store, g, progress.Config{
		Enabled:         cfg.Progress.On,
		MinEditInterval: cfg.Progress.MinEditInterval,
		Logger:          logger,
		Metrics:         progress.NewMetrics(reg),
	})
}
