package webhook

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/task"
)

// Defaults of ProcessorConfig.
const (
	DefaultWorkers      = 2
	DefaultPollInterval = time.Second
	DefaultMaxAttempts  = repository.DefaultMaxDeliveryAttempts
	DefaultBackoffBase  = time.Second
	DefaultBackoffMax   = 10 * time.Minute
)

// ProcessorConfig configures the inbox processor.
type ProcessorConfig struct {
	// Workers process deliveries concurrently (default DefaultWorkers, 2);
	// work on one issue is serialised by the rules' lock.
	Workers int
	// PollInterval is the safety-net poll when nobody wakes the processor
	// (default DefaultPollInterval, 1s): retries come due, other replicas
	// accept deliveries.
	PollInterval time.Duration
	// MaxAttempts before a failing delivery is parked (default
	// DefaultMaxAttempts, 8).
	MaxAttempts int
	// BackoffBase and BackoffMax shape the retry delays (defaults
	// DefaultBackoffBase and DefaultBackoffMax, 1s and 10m).
	BackoffBase time.Duration
	BackoffMax  time.Duration
	Logger      *slog.Logger
	Metrics     *Metrics
	// OnProcessed is called after a delivery had effects (the dispatcher's
	// wake-up).
	OnProcessed func()
}

// Processor drains the inbox: each delivery is mapped to task changes in
// one transaction, retried with backoff when that fails, parked after too
// many failures.
type Processor struct {
	cfg    ProcessorConfig
	store  *repository.Store
	apply  repository.DeliveryFunc
	wake   chan struct{}
	policy repository.RetryPolicy
}

// NewProcessor builds a processor that applies each delivery with apply
// (rules.Mapper.Apply); zero config fields take defaults.
func NewProcessor(store *repository.Store, apply repository.DeliveryFunc, cfg ProcessorConfig) *Processor {
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = DefaultBackoffBase
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = DefaultBackoffMax
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.OnProcessed == nil {
		cfg.OnProcessed = func() {}
	}
	p := &Processor{cfg: cfg, store: store, apply: apply, wake: make(chan struct{}, cfg.Workers)}
	p.policy = repository.RetryPolicy{MaxAttempts: cfg.MaxAttempts, Backoff: p.backoff}
	return p
}

func (p *Processor) backoff(attempt int) time.Duration {
	return task.Backoff(attempt, p.cfg.BackoffBase, p.cfg.BackoffMax)
}

// Wake tells the processor a delivery is waiting. It never blocks.
func (p *Processor) Wake() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Run processes deliveries until ctx ends.
func (p *Processor) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range p.cfg.Workers {
		wg.Go(func() { p.work(ctx) })
	}
	wg.Wait()
}

func (p *Processor) work(ctx context.Context) {
	for ctx.Err() == nil {
		if p.ProcessOne(ctx) {
			continue
		}
		select {
		case <-ctx.Done():
		case <-p.wake:
		case <-time.After(p.cfg.PollInterval):
		}
	}
}

// ProcessOne processes the oldest waiting delivery, if any, and reports
// whether there may be more.
func (p *Processor) ProcessOne(ctx context.Context) bool {
	start := time.Now()
	d, res, err := p.store.ProcessNextDelivery(ctx, p.policy, p.apply)
	switch {
	case errors.Is(err, repository.ErrInboxEmpty), errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return false
	case err != nil && d.ID == "":
		p.cfg.Logger.Error("inbox unavailable", "error", err)
		return false
	case err != nil:
		outcome := "failed"
		if d.Attempts+1 >= p.cfg.MaxAttempts || errors.Is(err, repository.ErrPermanent) {
			outcome = repository.OutcomeParked
			p.cfg.Metrics.deliveries.WithLabelValues(eventLabel(d.Event), actionLabel(d.Action), "parked").Inc()
			p.cfg.Logger.Error("webhook delivery parked after failing", "delivery_id", d.ID, "event", d.Event,
				"attempts", d.Attempts+1, "error", err)
		} else {
			p.cfg.Logger.Warn("webhook delivery failed, will retry", "delivery_id", d.ID, "event", d.Event,
				"attempts", d.Attempts+1, "error", err)
		}
		p.cfg.Metrics.processed.WithLabelValues(outcome).Inc()
		return true
	}
	p.cfg.Metrics.processed.WithLabelValues(res.Outcome).Inc()
	p.cfg.Metrics.processSeconds.Observe(time.Since(start).Seconds())
	if res.Outcome == repository.OutcomeDuplicate {
		p.cfg.Logger.Info("webhook event already applied by another delivery", "delivery_id", d.ID,
			"event", d.Event, "action", d.Action)
	}
	if res.Outcome == repository.OutcomeProcessed {
		p.cfg.OnProcessed()
	}
	return true
}
