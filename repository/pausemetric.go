package repository

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// pauseCollector exports mozi_agent_paused_until_seconds from agent_pauses
// at scrape time: true across replicas and restarts, whichever mozi
// recorded the pause.
type pauseCollector struct {
	store  *Store
	agents []string
	logger *slog.Logger
	until  *prometheus.Desc
}

// NewPauseCollector exports mozi_agent_paused_until_seconds for every agent
// declared: when it resumes from a usage limit, in unix seconds; 0 when it
// is not paused.
func NewPauseCollector(store *Store, agents []string, logger *slog.Logger) prometheus.Collector {
	return &pauseCollector{store: store, agents: agents, logger: logger,
		until: prometheus.NewDesc("mozi_agent_paused_until_seconds",
			"When an agent paused at its account's usage limit resumes, in unix seconds (0: not paused; year 9999: it waits for a person).",
			[]string{"agent"}, nil)}
}

func (c *pauseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.until }

func (c *pauseCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	pauses, err := c.store.AgentPauses(ctx)
	if err != nil {
		c.logger.Warn("agent pause metric unavailable", "error", err)
		ch <- prometheus.NewInvalidMetric(c.until, err)
		return
	}
	until := map[string]float64{}
	for _, a := range c.agents {
		until[a] = 0
	}
	for _, p := range pauses {
		until[p.Agent] = float64(p.Until.Unix())
	}
	for agent, u := range until {
		ch <- prometheus.MustNewConstMetric(c.until, prometheus.GaugeValue, u, agent)
	}
}
