package rules

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/task"
)

// Metrics are the mapping rules' Prometheus collectors. Label values
// are bounded: action types and state machine events.
type Metrics struct {
	tasksCreated      *prometheus.CounterVec
	budgetHits        *prometheus.CounterVec
	hopLimits         prometheus.Counter
	breakerTrips      prometheus.Counter
	anomalies         *prometheus.CounterVec
	incompleteReports *prometheus.CounterVec
}

// NewMetrics creates the collectors and registers them with reg
// (nil: not registered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		tasksCreated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mozi_tasks_created_total",
			Help: "Tasks created, by action type.",
		}, []string{"action_type"}),
		budgetHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mozi_task_budget_hits_total",
			Help: "Tasks not created because the issue's hourly task budget was spent, by action type.",
		}, []string{"action_type"}),
		breakerTrips: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mozi_circuit_breaker_trips_total",
			Help: "Repositories whose circuit breaker tripped: a storm of agent comments paused new agent runs there.",
		}),
		hopLimits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mozi_mention_hop_limit_total",
			Help: "Mentions not turned into tasks because the agent-to-agent chain was too long.",
		}),
		anomalies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mozi_task_anomalies_total",
			Help: "Terminal events for tasks that never ran, by event.",
		}, []string{"event"}),
		incompleteReports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mozi_action_reports_incomplete_total",
			Help: "[Action Report] comments missing a field their output template asks for, by action type.",
		}, []string{"action_type"}),
	}
	if reg != nil {
		reg.MustRegister(m.tasksCreated, m.budgetHits, m.hopLimits, m.breakerTrips, m.anomalies, m.incompleteReports)
	}
	return m
}

// TaskCreated counts a task created outside the rules (the ticker's round
// reviews, discussions and late mentions) with the rules' own.
func (m *Metrics) TaskCreated(action task.ActionType) {
	m.tasksCreated.WithLabelValues(string(action)).Inc()
}

// TaskRefused counts a task refused outside the rules: a spent budget is a
// budget hit like the rules'; other refusals are not counted.
func (m *Metrics) TaskRefused(action task.ActionType, why repository.Refusal) {
	if why == repository.RefusedBudget {
		m.budgetHits.WithLabelValues(string(action)).Inc()
	}
}
