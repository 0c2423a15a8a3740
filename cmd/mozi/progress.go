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
// reactions (progress: in the configuration). Without Gitea (no
// gitea.url) it still runs, saying nothing: it folds the marks task
// changes leave, which would otherwise pile up.
func newProgressPoster(cfg *config.Config, store *repository.Store, g *gitea.Client, logger *slog.Logger, reg prometheus.Registerer) *progress.Poster {
	enabled := cfg.Progress.On
	var pg progress.Gitea
	if g == nil {
		enabled = func(string) bool { return false }
	} else {
		pg = g
	}
	return progress.NewPoster(store, pg, progress.Config{
		Enabled:         enabled,
		MinEditInterval: cfg.Progress.MinEditInterval,
		MaxRepairRounds: cfg.CI.MaxRepairRounds,
		Logger:          logger,
		Metrics:         progress.NewMetrics(reg),
	})
}
