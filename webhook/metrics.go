package webhook

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the intake's and the inbox processor's Prometheus collectors. Label values are bounded:
// event names from a fixed set, outcomes, action types.
type Metrics struct {
	deliveries     *prometheus.CounterVec
	ackSeconds     prometheus.Histogram
	batchSize      prometheus.Histogram
	processed      *prometheus.CounterVec
	processSeconds prometheus.Histogram
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
	}
	if reg != nil {
		reg.MustRegister(m.deliveries, m.ackSeconds, m.batchSize, m.processed, m.processSeconds)
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
