package webhook

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moziplus/mozi/repository"
)

// inboxCollector reads the inbox's backlog from the database at scrape
// time, so the gauges are true across replicas and restarts.
type inboxCollector struct {
	store   *repository.Store
	logger  *slog.Logger
	waiting *prometheus.Desc
	retry   *prometheus.Desc
	parked  *prometheus.Desc
	oldest  *prometheus.Desc
}

// NewInboxCollector exports mozi_inbox_waiting, mozi_inbox_retrying,
// mozi_inbox_parked and mozi_inbox_oldest_age_seconds.
func NewInboxCollector(store *repository.Store, logger *slog.Logger) prometheus.Collector {
	return &inboxCollector{
		store:   store,
		logger:  logger,
		waiting: prometheus.NewDesc("mozi_inbox_waiting", "Webhook deliveries stored but not processed yet.", nil, nil),
		retry:   prometheus.NewDesc("mozi_inbox_retrying", "Waiting deliveries that failed at least once.", nil, nil),
		parked:  prometheus.NewDesc("mozi_inbox_parked", "Deliveries parked after failing too often (see mozi deliveries --failed).", nil, nil),
		oldest:  prometheus.NewDesc("mozi_inbox_oldest_age_seconds", "Age of the oldest waiting delivery (0 when none waits).", nil, nil),
	}
}

func (c *inboxCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.waiting
	ch <- c.retry
	ch <- c.parked
	ch <- c.oldest
}

func (c *inboxCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := c.store.InboxStats(ctx)
	if err != nil {
		c.logger.Warn("inbox metrics unavailable", "error", err)
		ch <- prometheus.NewInvalidMetric(c.waiting, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(st.Waiting))
	ch <- prometheus.MustNewConstMetric(c.retry, prometheus.GaugeValue, float64(st.Retrying))
	ch <- prometheus.MustNewConstMetric(c.parked, prometheus.GaugeValue, float64(st.Parked))
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, st.OldestAge.Seconds())
}
