package webhook

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the intake's Prometheus collectors. Label values are bounded:
// event names from a fixed set, outcomes, action types.
type Metrics struct {
	deliveries        *prometheus.CounterVec
	ackSeconds        prometheus.Histogram
	batchSize         prometheus.Histogram
	processed         *prometheus.CounterVec
	processSeconds    prometheus.Histogram
	tasksCreated      *prometheus.CounterVec
	budgetHits        *prometheus.CounterVec
	hopLimits         prometheus.Counter
	breakerTrips      prometheus.Counter
	anomalies         *prometheus.CounterVec
	incompleteReports *prometheus.CounterVec
}

// NewMetrics creates the collectors and registers them with reg (nil: not
// registered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mozi_webhook_deliveries_total",
			Help: "Webhook deliveries received, by event, action and outcome (accepted, duplicate, ignored, rejected_signature, rejected_size, rejected_content_type, malformed, error).",
		}, []string{"event", "action", "outcome"}),
		ackSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "mozi_webhook_ack_seconds",
			Help:    "Time from receiving a delivery to answering Gitea, including the durable commit.",
			Buckets: []float64{.001, .002, .005, .01, .02, .05, .1, .25, .5, 1, 2.5},
		}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "mozi_webhook_commit_batch_size",
			Help:    "Deliveries committed together by the intake's group commit.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		}),
		processed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mozi_inbox_processed_total",
			Help: "Inbox deliveries processed, by outcome (processed, duplicate, ignored, failed, parked).",
		}, []string{"outcome"}),
		processSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "mozi_inbox_process_seconds",
			Help:    "Time to map one delivery to task changes, in its transaction.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
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
		reg.MustRegister(m.deliveries, m.ackSeconds, m.batchSize, m.processed, m.processSeconds,
			m.tasksCreated, m.budgetHits, m.hopLimits, m.breakerTrips, m.anomalies, m.incompleteReports)
	}
	return m
}

// knownEvents bounds the event label: anything else is counted as "other".
var knownEvents = map[string]bool{
	"issues": true, "issue_comment": true, "pull_request": true, "pull_request_approved": true,
	"pull_request_rejected": true, "pull_request_comment": true, "status": true, "workflow_run": true,
	"push": true, "create": true, "delete": true, "release": true, "fork": true, "repository": true,
	"wiki": true, "workflow_job": true, "package": true,
}

// knownActions bounds the action label likewise.
var knownActions = map[string]bool{
	"": true, "opened": true, "edited": true, "closed": true, "reopened": true, "assigned": true,
	"unassigned": true, "label_updated": true, "label_cleared": true, "synchronized": true,
	"review_requested": true, "review_request_removed": true, "reviewed": true, "created": true,
	"deleted": true, "completed": true, "requested": true, "in_progress": true, "milestoned": true,
	"demilestoned": true, "published": true,
}

func eventLabel(event string) string {
	if knownEvents[event] {
		return event
	}
	return "other"
}

func actionLabel(action string) string {
	if knownActions[action] {
		return action
	}
	return "other"
}
