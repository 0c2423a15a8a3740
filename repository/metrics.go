package repository

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moziplus/mozi/repository/task"
)

// CountTransitions registers mozi_task_transitions_total on reg and makes
// store count every committed transition in it, whoever made it (webhook
// mapping, dispatcher, spawner, ticker, operator).
func CountTransitions(store *Store, reg prometheus.Registerer) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mozi_task_transitions_total",
		Help: "Task state transitions committed, by event and resulting status.",
	}, []string{"event", "to"})
	reg.MustRegister(c)
	store.ObserveTransitions(func(ev task.Event, to task.Status, n int) {
		c.WithLabelValues(string(ev), string(to)).Add(float64(n))
	})
}

// taskCollector reads task counts and live runs from the database at
// scrape time: gauges that are true across replicas and restarts, unlike
// counters kept in one process.
type taskCollector struct {
	store   *Store
	agents  []string
	logger  *slog.Logger
	tasks   *prometheus.Desc
	oldest  *prometheus.Desc
	stalled *prometheus.Desc
	open    *prometheus.Desc
	running *prometheus.Desc
}

// NewTaskCollector exports mozi_tasks, mozi_task_oldest_age_seconds,
// mozi_task_stalled_oldest_age_seconds, mozi_circuit_breakers_open and
// mozi_agent_runs_active. Every status and action type, and every agent
// declared, is exported, with 0 when there is none: a panel or an alert
// should see a zero, not an absent series.
func NewTaskCollector(store *Store, agents []string, logger *slog.Logger) prometheus.Collector {
	return &taskCollector{
		store:  store,
		agents: agents,
		logger: logger,
		tasks: prometheus.NewDesc("mozi_tasks", "Tasks in the database, by status and action type.",
			[]string{"status", "action_type"}, nil),
		oldest: prometheus.NewDesc("mozi_task_oldest_age_seconds",
			"Live tasks (pending, claimed, working, review): time since the least recently updated one moved, by status.",
			[]string{"status"}, nil),
		stalled: prometheus.NewDesc("mozi_task_stalled_oldest_age_seconds",
			"Working tasks whose agent's run ended without what moves them on (a pull request, an [Action Report], a push, a review): time since the least recently moved one moved (0: none).",
			nil, nil),
		open: prometheus.NewDesc("mozi_circuit_breakers_open",
			"Repositories whose circuit breaker is open: new agent runs there are paused after a storm of agent comments.",
			nil, nil),
		running: prometheus.NewDesc("mozi_agent_runs_active",
			"Agent runs holding a live lease (claimed or running), across every mozi on the database, by agent.",
			[]string{"agent"}, nil),
	}
}

func (c *taskCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.tasks
	ch <- c.oldest
	ch <- c.stalled
	ch <- c.open
	ch <- c.running
}

func (c *taskCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	counts, err := c.store.TaskCounts(ctx)
	if err != nil {
		c.logger.Warn("task metrics unavailable", "error", err)
		ch <- prometheus.NewInvalidMetric(c.tasks, err)
		return
	}
	type key struct {
		st task.Status
		at task.ActionType
	}
	n := map[key]int{}
	oldest := map[task.Status]time.Duration{}
	for _, st := range task.LiveStatuses {
		oldest[st] = 0
	}
	for _, tc := range counts {
		n[key{tc.Status, tc.ActionType}] = tc.N
		if age, live := oldest[tc.Status]; live && tc.OldestAge > age {
			oldest[tc.Status] = tc.OldestAge
		}
	}
	for _, st := range task.Statuses {
		for _, at := range task.ActionTypes {
			ch <- prometheus.MustNewConstMetric(c.tasks, prometheus.GaugeValue, float64(n[key{st, at}]), string(st), string(at))
		}
	}
	for st, age := range oldest {
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age.Seconds(), string(st))
	}
	stalled, err := c.store.StalledOldest(ctx)
	if err != nil {
		c.logger.Warn("stalled task metric unavailable", "error", err)
		ch <- prometheus.NewInvalidMetric(c.stalled, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.stalled, prometheus.GaugeValue, stalled.Seconds())
	open, err := c.store.OpenBreakers(ctx)
	if err != nil {
		c.logger.Warn("circuit breaker metric unavailable", "error", err)
		ch <- prometheus.NewInvalidMetric(c.open, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, float64(open))
	running, err := c.store.RunningByAgent(ctx)
	if err != nil {
		c.logger.Warn("agent run metrics unavailable", "error", err)
		ch <- prometheus.NewInvalidMetric(c.running, err)
		return
	}
	for _, agent := range c.agents {
		if _, ok := running[agent]; !ok {
			running[agent] = 0
		}
	}
	for agent, n := range running {
		ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(n), agent)
	}
}
