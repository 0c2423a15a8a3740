package notice

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/gitea"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/spawner/worker"
)

// Gitea is where the poster comments (gitea.Client).
type Gitea interface {
	PostComment(ctx context.Context, repo string, number int, body string) (int64, error)
	FetchComments(ctx context.Context, repo string, number, limit int) ([]task.Comment, error)
}

// Store is the outbox (repository.Store).
type Store interface {
	ClaimOutbox(ctx context.Context, limit int, lockFor time.Duration) ([]repository.OutboxItem, error)
	OutboxPosted(ctx context.Context, id, commentID int64) error
	OutboxRetry(ctx context.Context, id int64, next time.Time, why string) error
	OutboxPark(ctx context.Context, id int64, why string) error
}

// Defaults of PosterConfig.
const (
	DefaultBackoffBase = 2 * time.Second
	DefaultBackoffMax  = 5 * time.Minute
	DefaultPoll        = 5 * time.Second
	// lockFor is how long a claimed comment is this poster's: longer than
	// a post with its retries takes.
	lockFor = 2 * time.Minute
	// lookBack is how many of an issue's comments a retry reads to find
	// an earlier try that reached Gitea.
	lookBack = 500
)

// PosterConfig configures the poster; zero fields take defaults.
type PosterConfig struct {
	// BackoffBase and BackoffMax shape the waits between tries (defaults
	// DefaultBackoffBase and DefaultBackoffMax, 2s and 5m).
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// Poll is the safety net when no notification wakes it (default
	// DefaultPoll, 5s).
	Poll    time.Duration
	Logger  *slog.Logger
	Metrics *Metrics
}

// Poster posts the outbox's comments.
type Poster struct {
	cfg   PosterConfig
	store Store
	gitea Gitea
	loop  *worker.Loop
}

// NewPoster builds a poster.
func NewPoster(store Store, g Gitea, cfg PosterConfig) *Poster {
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = DefaultBackoffBase
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = DefaultBackoffMax
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	return &Poster{cfg: cfg, store: store, gitea: g, loop: worker.New()}
}

// Wake asks for a pass now (new work was written). It never blocks.
func (p *Poster) Wake() { p.loop.Wake() }

// Run posts queued comments until ctx ends.
func (p *Poster) Run(ctx context.Context) { p.loop.Run(ctx, p.cfg.Poll, p.pass) }

// pass posts what is due and reports whether more may be.
func (p *Poster) pass(ctx context.Context) bool {
	const batch = 16
	items, err := p.store.ClaimOutbox(ctx, batch, lockFor)
	if err != nil {
		if ctx.Err() == nil {
			p.cfg.Logger.Warn("outbox unavailable", "error", err)
		}
		return false
	}
	for _, it := range items {
		p.post(ctx, it)
	}
	return len(items) == batch
}

// Marker is the hidden line a queued comment carries in Gitea, by which a
// retry recognises an earlier try that reached Gitea.
func Marker(id int64) string { return fmt.Sprintf("<!-- mozi:outbox:%d -->", id) }

func (p *Poster) post(ctx context.Context, it repository.OutboxItem) {
	log := p.cfg.Logger.With("repo", it.Repo, "issue", it.Issue, "comment", it.Kind, "outbox_id", it.ID, "tries", it.Attempts)
	bg := context.WithoutCancel(ctx)
	marker := Marker(it.ID)
	if it.Attempts > 1 {
		// An earlier try may have reached Gitea though its answer did not
		// reach mozi (a timeout, a reset connection, a 5xx after the
		// write): look for it before posting again.
		found, err := p.find(ctx, it, marker)
		switch {
		case err != nil:
			p.retry(bg, log, it, fmt.Errorf("look for an earlier try: %w", err))
			return
		case found != 0:
			log.Info("queued comment was posted by an earlier try", "comment_id", found)
			p.posted(bg, log, it, found)
			return
		}
	}
	id, err := p.gitea.PostComment(ctx, it.Repo, it.Issue, it.Body+"\n\n"+marker)
	if err != nil {
		if gitea.Refused(err) {
			log.Error("Gitea refuses mozi's comment for good: given up", "error", err)
			p.cfg.Metrics.parked.Inc()
			if err := p.store.OutboxPark(bg, it.ID, err.Error()); err != nil {
				log.Error("outbox not updated", "error", err)
			}
			return
		}
		p.retry(bg, log, it, err)
		return
	}
	if it.Attempts > 1 {
		log.Info("queued comment posted after Gitea refused it before", "comment_id", id)
	}
	p.posted(bg, log, it, id)
}

func (p *Poster) find(ctx context.Context, it repository.OutboxItem, marker string) (int64, error) {
	comments, err := p.gitea.FetchComments(ctx, it.Repo, it.Issue, lookBack)
	if err != nil {
		return 0, err
	}
	for _, c := range comments {
		if strings.Contains(c.Body, marker) {
			return c.ID, nil
		}
	}
	return 0, nil
}

func (p *Poster) posted(ctx context.Context, log *slog.Logger, it repository.OutboxItem, commentID int64) {
	p.cfg.Metrics.posted.WithLabelValues(it.Kind).Inc()
	if err := p.store.OutboxPosted(ctx, it.ID, commentID); err != nil {
		// The lock runs out and the next try finds the comment by its
		// marker: nothing is posted twice.
		log.Error("posted comment not recorded yet", "comment_id", commentID, "error", err)
	}
}

func (p *Poster) retry(ctx context.Context, log *slog.Logger, it repository.OutboxItem, err error) {
	wait := task.Backoff(it.Attempts, p.cfg.BackoffBase, p.cfg.BackoffMax)
	if it.Attempts == 1 {
		log.Warn("mozi's comment not posted, will retry until Gitea takes it", "retry_in", wait.Round(time.Second).String(), "error", err)
	} else {
		log.Debug("mozi's comment still not posted", "retry_in", wait.Round(time.Second).String(), "error", err)
	}
	p.cfg.Metrics.retries.Inc()
	if err := p.store.OutboxRetry(ctx, it.ID, time.Now().Add(wait), err.Error()); err != nil {
		log.Error("outbox not updated", "error", err)
	}
}

// Metrics are the poster's collectors; the outbox's depth and age are
// gauges of repository's collector (NewOutboxCollector).
type Metrics struct {
	posted  *prometheus.CounterVec
	retries prometheus.Counter
	parked  prometheus.Counter
}

// NewMetrics creates the collectors on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		posted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mozi_outbox_posted_total",
			Help: "Comments mozi posted on Gitea from its outbox, by kind (task_fail, task_wait, breaker).",
		}, []string{"kind"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mozi_outbox_retries_total",
			Help: "Tries to post a queued comment that Gitea did not take (retried with backoff).",
		}),
		parked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mozi_outbox_parked_total",
			Help: "Queued comments given up because Gitea refused them for good (4xx).",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.posted, m.retries, m.parked)
	}
	return m
}
