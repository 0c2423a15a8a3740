package repository

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
)

// OutboxChannel is notified (by a trigger) when a comment is queued.
const OutboxChannel = "mozi_outbox"

// Comment is something mozi itself says on an issue, queued in the outbox
// in the transaction of the change that calls for it.
type Comment struct {
	Repo  string
	Issue int
	// Kind and Key name the comment: one (Kind, Key) is queued once
	// (task_fail with the task and its run, breaker with the trip).
	Kind string
	Key  string
	Body string
}

// QueueComment queues a comment (in the caller's transaction, when on a
// Tx); false when its (kind, key) was queued before.
func (q *Queries) QueueComment(ctx context.Context, c Comment) (bool, error) {
	if c.Body == "" || c.Issue <= 0 {
		return false, nil
	}
	tag, err := q.db.Exec(ctx, `INSERT INTO outbox (repo, issue_number, kind, dedupe_key, body)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (kind, dedupe_key) DO NOTHING`, c.Repo, c.Issue, c.Kind, c.Key, c.Body)
	if err != nil {
		return false, fmt.Errorf("queue %s comment on %s#%d: %w", c.Kind, c.Repo, c.Issue, err)
	}
	return tag.RowsAffected() == 1, nil
}

// OutboxItem is a queued comment taken for posting.
type OutboxItem struct {
	ID int64
	Comment
	// Attempts counts the tries, this one included: a retry looks for an
	// earlier try that reached Gitea before it posts again.
	Attempts  int
	CreatedAt time.Time
	LastError string
}

// ClaimOutbox takes up to limit due comments for lockFor: another worker
// (another replica) takes them again only after that.
func (s *Store) ClaimOutbox(ctx context.Context, limit int, lockFor time.Duration) ([]OutboxItem, error) {
	rows, err := s.db.Query(ctx, `UPDATE outbox o SET locked_until = now() + $2::interval, attempts = o.attempts + 1
		WHERE o.id IN (SELECT id FROM outbox
			WHERE posted_at IS NULL AND parked_at IS NULL AND next_at <= now()
			  AND (locked_until IS NULL OR locked_until < now())
			ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
		RETURNING o.id, o.repo, o.issue_number, o.kind, o.dedupe_key, o.body, o.attempts, o.created_at, o.last_error`,
		limit, interval(lockFor))
	if err != nil {
		return nil, fmt.Errorf("claim queued comments: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (OutboxItem, error) {
		var it OutboxItem
		err := row.Scan(&it.ID, &it.Repo, &it.Issue, &it.Kind, &it.Key, &it.Body, &it.Attempts, &it.CreatedAt, &it.LastError)
		return it, err
	})
}

// OutboxPosted records that Gitea took the comment.
func (q *Queries) OutboxPosted(ctx context.Context, id, commentID int64) error {
	_, err := q.db.Exec(ctx, `UPDATE outbox SET posted_at = now(), comment_id = $2, locked_until = NULL, last_error = ''
		WHERE id = $1`, id, commentID)
	if err != nil {
		return fmt.Errorf("record posted comment %d: %w", id, err)
	}
	return nil
}

// OutboxRetry puts a comment Gitea did not take back in the queue until
// next.
func (q *Queries) OutboxRetry(ctx context.Context, id int64, next time.Time, why string) error {
	_, err := q.db.Exec(ctx, `UPDATE outbox SET next_at = $2, last_error = $3, locked_until = NULL WHERE id = $1`,
		id, next, why)
	if err != nil {
		return fmt.Errorf("requeue comment %d: %w", id, err)
	}
	return nil
}

// OutboxPark gives a comment up: Gitea refused it for good (the issue is
// gone, mozi may not comment there).
func (q *Queries) OutboxPark(ctx context.Context, id int64, why string) error {
	_, err := q.db.Exec(ctx, `UPDATE outbox SET parked_at = now(), last_error = $2, locked_until = NULL WHERE id = $1`, id, why)
	if err != nil {
		return fmt.Errorf("park comment %d: %w", id, err)
	}
	return nil
}

// WakeOutbox makes every waiting comment due now (Gitea answers again).
func (q *Queries) WakeOutbox(ctx context.Context) (int, error) {
	tag, err := q.db.Exec(ctx, `UPDATE outbox SET next_at = now()
		WHERE posted_at IS NULL AND parked_at IS NULL AND next_at > now()`)
	if err != nil {
		return 0, fmt.Errorf("wake queued comments: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// OutboxStats are the outbox's gauges.
type OutboxStats struct {
	Waiting int           // queued, not posted yet
	Oldest  time.Duration // age of the oldest waiting comment (0: none)
	Parked  int           // given up
}

// OutboxStats counts what waits in the outbox.
func (q *Queries) OutboxStats(ctx context.Context) (OutboxStats, error) {
	var (
		st     OutboxStats
		oldest *time.Time
		now    time.Time
	)
	err := q.db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE parked_at IS NULL),
			min(created_at) FILTER (WHERE parked_at IS NULL), count(*) FILTER (WHERE parked_at IS NOT NULL), now()
		FROM outbox WHERE posted_at IS NULL`).Scan(&st.Waiting, &oldest, &st.Parked, &now)
	if err != nil {
		return OutboxStats{}, fmt.Errorf("outbox stats: %w", err)
	}
	if oldest != nil {
		st.Oldest = now.Sub(*oldest)
	}
	return st, nil
}

// QueuedComments lists an issue's queued comments, oldest first (what
// mozi said or will say there).
func (q *Queries) QueuedComments(ctx context.Context, repo string, issue int) ([]OutboxItem, error) {
	rows, err := q.db.Query(ctx, `SELECT id, repo, issue_number, kind, dedupe_key, body, attempts, created_at, last_error
		FROM outbox WHERE repo = $1 AND issue_number = $2 ORDER BY id`, repo, issue)
	if err != nil {
		return nil, fmt.Errorf("queued comments of %s#%d: %w", repo, issue, err)
	}
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (OutboxItem, error) {
		var it OutboxItem
		err := row.Scan(&it.ID, &it.Repo, &it.Issue, &it.Kind, &it.Key, &it.Body, &it.Attempts, &it.CreatedAt, &it.LastError)
		return it, err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return items, err
}

// outboxCollector reads the outbox's gauges at scrape time.
type outboxCollector struct {
	store   *Store
	logger  *slog.Logger
	waiting *prometheus.Desc
	oldest  *prometheus.Desc
	parked  *prometheus.Desc
}

// NewOutboxCollector exports mozi_outbox_waiting, mozi_outbox_oldest_age_seconds
// and mozi_outbox_parked: comments mozi queued for Gitea that it has not
// posted yet (Gitea refuses or does not answer), and those it gave up.
func NewOutboxCollector(store *Store, logger *slog.Logger) prometheus.Collector {
	return &outboxCollector{store: store, logger: logger,
		waiting: prometheus.NewDesc("mozi_outbox_waiting",
			"Comments mozi queued for Gitea (failures, circuit breakers) and has not posted yet.", nil, nil),
		oldest: prometheus.NewDesc("mozi_outbox_oldest_age_seconds",
			"Age of the oldest comment waiting in the outbox (0: none).", nil, nil),
		parked: prometheus.NewDesc("mozi_outbox_parked",
			"Queued comments given up: Gitea refused them for good (the issue is gone, no permission).", nil, nil),
	}
}

func (c *outboxCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.waiting
	ch <- c.oldest
	ch <- c.parked
}

func (c *outboxCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := c.store.OutboxStats(ctx)
	if err != nil {
		c.logger.Warn("outbox metrics unavailable", "error", err)
		ch <- prometheus.NewInvalidMetric(c.waiting, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(st.Waiting))
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, st.Oldest.Seconds())
	ch <- prometheus.MustNewConstMetric(c.parked, prometheus.GaugeValue, float64(st.Parked))
}
