package repository

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// outcomeCollector exports the recorded pull request outcomes as counters
// and histograms read from the database at scrape time: they are true
// across replicas and restarts, and only grow because an outcome is
// written once and never changed, so rate() and increase() work on them.
// Labels are the repository and the agent that authored the pull request:
// the repositories mozi serves and the agents declared.
type outcomeCollector struct {
	store                                              *Store
	logger                                             *slog.Logger
	merged, autonomous, ciRounds, reviewRounds, tokens *prometheus.Desc
	cost, assignToPR, prToMerge                        *prometheus.Desc
}

// NewOutcomeCollector exports the mozi_pr_* outcome series
// (docs/loop/outcomes.md). A repository and agent without a merged pull
// request has no series.
func NewOutcomeCollector(store *Store, logger *slog.Logger) prometheus.Collector {
	labels := []string{"repo", "agent"}
	desc := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, labels, nil) }
	return &outcomeCollector{
		store:  store,
		logger: logger,
		merged: desc("mozi_pr_merged_total", "Pull requests authored by an agent and merged."),
		autonomous: desc("mozi_pr_merged_autonomous_total",
			"Merged agent pull requests whose branch no person pushed to."),
		ciRounds: desc("mozi_pr_ci_rounds_total",
			"Red CI rounds (head commits with a failing status) of merged agent pull requests."),
		reviewRounds: desc("mozi_pr_review_rounds_total",
			"\"Changes requested\" review rounds of merged agent pull requests."),
		tokens: desc("mozi_pr_tokens_total",
			"Tokens of every agent run on merged agent pull requests and the issues they close."),
		cost: desc("mozi_pr_cost_usd_total",
			"Cost in US dollars of every agent run on merged agent pull requests and the issues they close."),
		assignToPR: desc("mozi_pr_assign_to_pr_seconds",
			"From the author's assignment to the issue to the pull request opened, for merged agent pull requests."),
		prToMerge: desc("mozi_pr_to_merge_seconds",
			"From the pull request opened to its merge, for merged agent pull requests."),
	}
}

func (c *outcomeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.merged, c.autonomous, c.ciRounds, c.reviewRounds, c.tokens,
		c.cost, c.assignToPR, c.prToMerge} {
		ch <- d
	}
}

func (c *outcomeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	totals, err := c.store.OutcomeTotals(ctx)
	if err != nil {
		c.logger.Warn("outcome metrics unavailable", "error", err)
		ch <- prometheus.NewInvalidMetric(c.merged, err)
		return
	}
	for _, s := range totals {
		counter := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, s.Repo, s.Agent)
		}
		counter(c.merged, float64(s.Merged))
		counter(c.autonomous, float64(s.Autonomous))
		counter(c.ciRounds, float64(s.CIRounds))
		counter(c.reviewRounds, float64(s.ReviewRounds))
		counter(c.tokens, float64(s.Tokens))
		counter(c.cost, s.CostUSD)
		ch <- histogram(c.assignToPR, s.AssignToPR, s.Repo, s.Agent)
		ch <- histogram(c.prToMerge, s.PRToMerge, s.Repo, s.Agent)
	}
}

func histogram(d *prometheus.Desc, h Durations, labels ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.Bounds))
	for i, le := range h.Bounds {
		if i < len(h.Buckets) {
			buckets[le] = h.Buckets[i]
		}
	}
	return prometheus.MustNewConstHistogram(d, uint64(h.Count), h.SumSec, buckets, labels...)
}
