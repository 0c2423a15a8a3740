package spawner

import (
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moziplus/mozi/repository/task"
)

// Metrics are the spawner's collectors.
type Metrics struct {
	runs     *prometheus.CounterVec
	duration *prometheus.HistogramVec
	retries  *prometheus.CounterVec
	tokens   *prometheus.CounterVec
	cost     *prometheus.CounterVec
	latency  prometheus.Histogram
}

// runOutcomes are the outcomes a run of this process ends with: every
// attempt outcome but "rescued", which the ticker gives a dead runner's.
func runOutcomes() []string {
	return slices.DeleteFunc(slices.Clone(task.AttemptOutcomes), func(o string) bool { return o == task.AttemptRescued })
}

// NewMetrics creates the spawner's collectors on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mozi_agent_runs_total",
			Help: "Agent runs by agent and outcome (" + strings.Join(runOutcomes(), ", ") + ").",
		}, []string{"agent", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mozi_agent_run_seconds",
			Help:    "Duration of agent runs, by agent.",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600},
		}, []string{"agent"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mozi_task_retries_total",
			Help: "Failed runs retried, by agent.",
		}, []string{"agent"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mozi_agent_tokens_total",
			Help: "Tokens agents reported, by agent and direction (in, out).",
		}, []string{"agent", "direction"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mozi_agent_cost_usd_total",
			Help: "Cost agents reported, in US dollars, by agent.",
		}, []string{"agent"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "mozi_dispatch_latency_seconds",
			Help:    "Time from a task's creation to its agent's start.",
			Buckets: []float64{.005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900},
		}),
	}
	if reg != nil {
		reg.MustRegister(m.runs, m.duration, m.retries, m.tokens, m.cost, m.latency)
	}
	return m
}

func (m *Metrics) started(t task.Task) {
	if t.DispatchCount == 1 && !t.CreatedAt.IsZero() {
		m.latency.Observe(time.Since(t.CreatedAt).Seconds())
	}
}

func (m *Metrics) finished(t task.Task, r Result) {
	m.runs.WithLabelValues(t.Agent, r.Outcome).Inc()
	if r.Outcome != OutcomeSpawnError {
		m.duration.WithLabelValues(t.Agent).Observe(r.Duration.Seconds())
	}
	if r.TokensIn > 0 {
		m.tokens.WithLabelValues(t.Agent, "in").Add(float64(r.TokensIn))
	}
	if r.TokensOut > 0 {
		m.tokens.WithLabelValues(t.Agent, "out").Add(float64(r.TokensOut))
	}
	if r.CostUSD > 0 {
		m.cost.WithLabelValues(t.Agent).Add(r.CostUSD)
	}
}
