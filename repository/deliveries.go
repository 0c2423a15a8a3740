package repository

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/moziplus/mozi/repository/task"
)

// Delivery outcomes. A delivery with no outcome is waiting in the inbox.
const (
	OutcomeProcessed = "processed" // its effects were applied
	OutcomeDuplicate = "duplicate" // another delivery of the same event had the effect
	OutcomeIgnored   = "ignored"   // an event mozi does not act on
	OutcomeParked    = "parked"    // failed too often; waits for an operator
)

// Delivery is one webhook delivery in the durable inbox.
type Delivery struct {
	ID            string // X-Gitea-Delivery
	Seq           int64  // arrival order
	Event         string // X-Gitea-Event
	EventType     string // X-Gitea-Event-Type
	Action        string
	Repo          string
	Issue         int // the issue or pull request it is about, 0: none or not known
	Headers       map[string]string
	Body          []byte
	ReceivedAt    time.Time
	ProcessedAt   time.Time
	Outcome       string
	SemanticKey   string
	Attempts      int
	NextAttemptAt time.Time
	LastError     string

	// Parsed is what the intake made of the body (payload.Event.Encode),
	// nil when it stored none. Processing is given Parsed instead of Body
	// when there is one (DeliveryBody reads the body).
	Parsed []byte
}

// InsertDeliveries stores a batch of deliveries in one statement (one
// commit: the intake's group commit). inserted[i] is false when ds[i]'s
// delivery id was already stored (a redelivery). Deliveries given an
// outcome (ignored) are stored as already processed.
func (q *Queries) InsertDeliveries(ctx context.Context, ds []Delivery) (inserted []bool, err error) {
	n := len(ds)
	ids, events, types, actions, repos, headers, outcomes := make([]string, n), make([]string, n),
		make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	bodies, parsed, issues := make([][]byte, n), make([][]byte, n), make([]int32, n)
	for i, d := range ds {
		h, err := json.Marshal(d.Headers)
		if err != nil {
			return nil, fmt.Errorf("encode headers of delivery %s: %w", d.ID, err)
		}
		ids[i], events[i], types[i], actions[i], repos[i] = d.ID, d.Event, d.EventType, d.Action, d.Repo
		headers[i], bodies[i], outcomes[i], issues[i] = string(h), d.Body, d.Outcome, int32(d.Issue)
		parsed[i] = d.Parsed
	}
	// The bodies go last: the driver appends each parameter to one
	// buffer, and one appended after megabytes of bodies would copy them
	// into a bigger buffer.
	rows, err := q.db.Query(ctx, `
		INSERT INTO webhook_deliveries (delivery_id, event, event_type, action, repo, headers, body,
			outcome, processed_at, issue_number, parsed)
		SELECT id, ev, et, act, repo, h::jsonb, b, oc, CASE WHEN oc = '' THEN NULL ELSE now() END,
			NULLIF(num, 0), p
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
			$7::text[], $8::int4[], $9::bytea[], $10::bytea[])
			WITH ORDINALITY AS u(id, ev, et, act, repo, h, oc, num, p, b, ord)
		ORDER BY ord
		ON CONFLICT (delivery_id) DO NOTHING
		RETURNING delivery_id`,
		ids, events, types, actions, repos, headers, outcomes, issues, parsed, bodies)
	if err != nil {
		return nil, fmt.Errorf("store %d deliveries: %w", n, err)
	}
	fresh := make(map[string]bool, n)
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store deliveries: %w", err)
		}
		fresh[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store %d deliveries: %w", n, err)
	}
	inserted = make([]bool, n)
	for i, id := range ids {
		// The same id twice in one batch: only the first one is new.
		inserted[i] = fresh[id]
		delete(fresh, id)
	}
	return inserted, nil
}

// largeBatchBytes is the size of a batch's bodies from which
// Store.InsertDeliveries hands them to the driver as they are.
const largeBatchBytes = 1 << 20

// InsertDeliveries is Queries.InsertDeliveries, but for a batch of large
// bodies, which it stores in one transaction, a statement each, handing
// each body to the driver as it is. Through pgx's query builder every body
// is copied into one buffer that the connection keeps reachable after the
// statement (pgx 5.12 truncates its list of parameter values without
// clearing it): megabytes per idle connection, until one runs a statement
// with as many parameters.
func (s *Store) InsertDeliveries(ctx context.Context, ds []Delivery) ([]bool, error) {
	size := 0
	for _, d := range ds {
		size += len(d.Body)
	}
	if size < largeBatchBytes {
		return s.Queries.InsertDeliveries(ctx, ds)
	}
	inserted := make([]bool, len(ds))
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		pg := tx.Conn().PgConn()
		for i, d := range ds {
			h, err := json.Marshal(d.Headers)
			if err != nil {
				return fmt.Errorf("encode headers of delivery %s: %w", d.ID, err)
			}
			rr := pg.ExecParams(ctx, insertDeliverySQL, [][]byte{[]byte(d.ID), []byte(d.Event),
				[]byte(d.EventType), []byte(d.Action), []byte(d.Repo), h, []byte(d.Outcome),
				strconv.AppendInt(nil, int64(d.Issue), 10), d.Parsed, d.Body},
				insertDeliveryOIDs, insertDeliveryFormats, nil)
			for rr.NextRow() {
				inserted[i] = true
			}
			if _, err := rr.Close(); err != nil {
				return fmt.Errorf("store delivery %s: %w", d.ID, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store %d deliveries: %w", len(ds), err)
	}
	return inserted, nil
}

// insertDeliverySQL stores one delivery from raw parameters: text but
// for parsed and body, given as bytes (binary bytea).
const insertDeliverySQL = `INSERT INTO webhook_deliveries (delivery_id, event, event_type, action,
		repo, headers, outcome, processed_at, issue_number, parsed, body)
	VALUES ($1, $2, $3, $4, $5, $6, $7, CASE WHEN $7 = '' THEN NULL ELSE now() END, NULLIF($8, 0), $9, $10)
	ON CONFLICT (delivery_id) DO NOTHING
	RETURNING delivery_id`

var (
	insertDeliveryOIDs = []uint32{pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.TextOID,
		pgtype.TextOID, pgtype.JSONBOID, pgtype.TextOID, pgtype.Int4OID, pgtype.ByteaOID, pgtype.ByteaOID}
	insertDeliveryFormats = []int16{pgtype.TextFormatCode, pgtype.TextFormatCode, pgtype.TextFormatCode,
		pgtype.TextFormatCode, pgtype.TextFormatCode, pgtype.TextFormatCode, pgtype.TextFormatCode,
		pgtype.TextFormatCode, pgtype.BinaryFormatCode, pgtype.BinaryFormatCode}
)

// InsertDelivery stores one delivery with a single-row INSERT. The intake
// batches instead; this is the baseline `mozi-bench intake` measures it
// against, and a convenience for tools.
func (q *Queries) InsertDelivery(ctx context.Context, d Delivery) (bool, error) {
	h, err := json.Marshal(d.Headers)
	if err != nil {
		return false, fmt.Errorf("encode headers of delivery %s: %w", d.ID, err)
	}
	tag, err := q.db.Exec(ctx, `INSERT INTO webhook_deliveries (delivery_id, event, event_type,
			action, repo, headers, body) VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (delivery_id) DO NOTHING`,
		d.ID, d.Event, d.EventType, d.Action, d.Repo, string(h), d.Body)
	if err != nil {
		return false, fmt.Errorf("store delivery %s: %w", d.ID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// deliveryColumns lists a delivery's columns for scanDelivery, with body
// and parsed read as the given expressions: a body is megabytes at worst,
// and only what needs it reads it.
func deliveryColumns(body, parsed string) string {
	return `delivery_id, seq, event, event_type, action, repo, headers, ` + body + `, ` + parsed + `,
	received_at, processed_at, outcome, COALESCE(semantic_key, ''), attempts, next_attempt_at, last_error`
}

var (
	allDeliveryColumns = deliveryColumns("body", "parsed")
	// Listing shows neither.
	listedDeliveryColumns = deliveryColumns("NULL::bytea", "NULL::bytea")
	// Processing reads what the intake parsed, else the body.
	processedDeliveryColumns = deliveryColumns("CASE WHEN parsed IS NULL THEN body END", "parsed")
)

func scanDelivery(row pgx.Row) (Delivery, error) {
	var (
		d         Delivery
		headers   []byte
		processed *time.Time
	)
	if err := row.Scan(&d.ID, &d.Seq, &d.Event, &d.EventType, &d.Action, &d.Repo, &headers, &d.Body,
		&d.Parsed, &d.ReceivedAt, &processed, &d.Outcome, &d.SemanticKey, &d.Attempts, &d.NextAttemptAt,
		&d.LastError); err != nil {
		return Delivery{}, err
	}
	d.ProcessedAt = derefTime(processed)
	if err := json.Unmarshal(headers, &d.Headers); err != nil {
		return Delivery{}, fmt.Errorf("decode headers of delivery %s: %w", d.ID, err)
	}
	return d, nil
}

// Delivery returns one stored delivery (task.ErrNotFound: none).
func (q *Queries) Delivery(ctx context.Context, id string) (Delivery, error) {
	d, err := scanDelivery(q.db.QueryRow(ctx, `SELECT `+allDeliveryColumns+`
		FROM webhook_deliveries WHERE delivery_id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Delivery{}, fmt.Errorf("delivery %s: %w", id, task.ErrNotFound)
	}
	if err != nil {
		return Delivery{}, fmt.Errorf("read delivery %s: %w", id, err)
	}
	return d, nil
}

// DeliveryBody returns the body of one stored delivery (task.ErrNotFound:
// none).
func (q *Queries) DeliveryBody(ctx context.Context, id string) ([]byte, error) {
	var body []byte
	err := q.db.QueryRow(ctx, `SELECT body FROM webhook_deliveries WHERE delivery_id = $1`, id).Scan(&body)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("delivery %s: %w", id, task.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read the body of delivery %s: %w", id, err)
	}
	return body, nil
}

// DeliveryFilter selects deliveries to list.
type DeliveryFilter struct {
	// Failed lists parked deliveries and waiting ones that failed at least once.
	Failed bool
	Limit  int // 0: 50
}

// ListDeliveries returns deliveries, newest first: latest received first,
// and in the order they arrived among those received together (a group
// commit gives its deliveries one received_at). The order is read from
// the index on received_at. Their Body and Parsed are left out.
func (q *Queries) ListDeliveries(ctx context.Context, f DeliveryFilter) ([]Delivery, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 50
	}
	// Failed ones are parked, or waiting after a failed attempt (only
	// waiting deliveries have no outcome): each set has a partial index.
	where := ``
	if f.Failed {
		where = `WHERE outcome = 'parked' OR (processed_at IS NULL AND outcome = '' AND attempts > 0)`
	}
	rows, err := q.db.Query(ctx, `SELECT `+listedDeliveryColumns+` FROM webhook_deliveries `+where+`
		ORDER BY received_at DESC, seq DESC LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	defer rows.Close()
	var out []Delivery
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, fmt.Errorf("scan delivery: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// InboxStats summarises the inbox for metrics.
type InboxStats struct {
	Waiting   int           // not processed yet (including retrying)
	Retrying  int           // waiting after at least one failed attempt
	Parked    int           // given up on
	OldestAge time.Duration // age of the oldest waiting delivery
}

// InboxStats counts waiting, retrying and parked deliveries.
func (q *Queries) InboxStats(ctx context.Context) (InboxStats, error) {
	var (
		st     InboxStats
		oldest *float64
	)
	// Waiting and parked deliveries are each read through their partial
	// index: processed ones, however many, are not.
	err := q.db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE attempts > 0),
			(SELECT count(*) FROM webhook_deliveries WHERE outcome = 'parked' AND processed_at IS NULL),
			extract(epoch FROM now() - min(received_at))
		FROM webhook_deliveries WHERE processed_at IS NULL AND outcome = ''`).Scan(&st.Waiting, &st.Retrying, &st.Parked, &oldest)
	if err != nil {
		return InboxStats{}, fmt.Errorf("inbox stats: %w", err)
	}
	if oldest != nil {
		st.OldestAge = time.Duration(*oldest * float64(time.Second))
	}
	return st, nil
}

// DeliveryResult is what processing a delivery decided.
type DeliveryResult struct {
	Outcome     string // OutcomeProcessed, OutcomeDuplicate or OutcomeIgnored
	SemanticKey string
}

// DeliveryFunc applies one delivery's effects inside tx.
type DeliveryFunc func(ctx context.Context, tx *Tx, d Delivery) (DeliveryResult, error)

// DefaultMaxDeliveryAttempts is how often a delivery may fail before it
// is parked.
const DefaultMaxDeliveryAttempts = 8

// RetryPolicy says when a failed delivery is tried again, and when it is
// parked instead.
type RetryPolicy struct {
	MaxAttempts int                             // parked after this many failures (default DefaultMaxDeliveryAttempts)
	Backoff     func(attempt int) time.Duration // delay after the attempt-th failure
}

// ErrPermanent marks a processing failure that no retry can fix (a payload
// that does not parse): the delivery is parked at once.
var ErrPermanent = errors.New("permanent failure")

// ErrInboxEmpty means no delivery is waiting.
var ErrInboxEmpty = errors.New("inbox empty")

// ProcessNextDelivery claims the oldest waiting delivery (SKIP LOCKED, so
// replicas share the inbox) and runs fn on it in one transaction with the
// bookkeeping, so a delivery's effects happen exactly once even when mozi
// is killed midway. When fn fails, the transaction rolls back and the
// failure is recorded for a retry, or the delivery is parked.
func (s *Store) ProcessNextDelivery(ctx context.Context, policy RetryPolicy, fn DeliveryFunc) (Delivery, DeliveryResult, error) {
	var (
		d     Delivery
		res   DeliveryResult
		fnErr error
	)
	err := s.InTx(ctx, func(tx *Tx) error {
		var err error
		d, err = scanDelivery(tx.db.QueryRow(ctx, `SELECT `+processedDeliveryColumns+` FROM webhook_deliveries
			WHERE processed_at IS NULL AND outcome = '' AND next_attempt_at <= now()
			ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED`))
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrInboxEmpty
		}
		if err != nil {
			return fmt.Errorf("claim delivery: %w", err)
		}
		// The task history (task_events) names the delivery behind each
		// change this transaction makes.
		if _, err := tx.db.Exec(ctx, `SELECT set_config('mozi.delivery', $1, true)`, d.ID); err != nil {
			return fmt.Errorf("delivery %s: name it for the task history: %w", d.ID, err)
		}
		// A savepoint keeps the claim when fn fails, so the failure can be
		// recorded in the same transaction.
		sp, err := tx.tx.Begin(ctx)
		if err != nil {
			return fmt.Errorf("delivery %s: savepoint: %w", d.ID, err)
		}
		inner := newTx(sp, tx.clock) // the savepoint is in the same transaction: same now()
		res, fnErr = fn(ctx, inner, d)
		if fnErr != nil {
			if rbErr := sp.Rollback(ctx); rbErr != nil {
				return fmt.Errorf("delivery %s: roll back: %w", d.ID, rbErr)
			}
			return recordDeliveryFailure(ctx, tx, d, policy, fnErr)
		}
		if err := sp.Commit(ctx); err != nil {
			return fmt.Errorf("delivery %s: release savepoint: %w", d.ID, err)
		}
		// The savepoint's transitions are the delivery's effects: counted
		// (mozi_task_transitions_total) when the outer transaction commits.
		tx.applied = append(tx.applied, inner.applied...)
		_, err = tx.db.Exec(ctx, `UPDATE webhook_deliveries SET processed_at = now(), outcome = $2,
				semantic_key = NULLIF($3, ''), attempts = attempts + 1, last_error = ''
			WHERE delivery_id = $1`, d.ID, res.Outcome, res.SemanticKey)
		if err != nil {
			return fmt.Errorf("mark delivery %s processed: %w", d.ID, err)
		}
		return nil
	})
	if err != nil {
		return d, res, err
	}
	if fnErr != nil {
		return d, res, fmt.Errorf("process delivery %s: %w", d.ID, fnErr)
	}
	return d, res, nil
}

func recordDeliveryFailure(ctx context.Context, tx *Tx, d Delivery, policy RetryPolicy, cause error) error {
	maxAttempts := policy.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = DefaultMaxDeliveryAttempts
	}
	attempt := d.Attempts + 1
	outcome := ""
	if attempt >= maxAttempts || errors.Is(cause, ErrPermanent) {
		outcome = OutcomeParked
	}
	delay := time.Duration(0)
	if policy.Backoff != nil {
		delay = policy.Backoff(attempt)
	}
	_, err := tx.db.Exec(ctx, `UPDATE webhook_deliveries SET attempts = $2, last_error = $3,
			outcome = $4, next_attempt_at = now() + make_interval(secs => $5)
		WHERE delivery_id = $1`, d.ID, attempt, cause.Error(), outcome, delay.Seconds())
	if err != nil {
		return fmt.Errorf("record failure of delivery %s: %w", d.ID, err)
	}
	return nil
}

// RequeueDelivery puts a parked or failing delivery back in the inbox for
// an immediate attempt (operator action).
func (q *Queries) RequeueDelivery(ctx context.Context, id string) (bool, error) {
	tag, err := q.db.Exec(ctx, `UPDATE webhook_deliveries SET outcome = '', attempts = 0,
			next_attempt_at = now(), processed_at = NULL
		WHERE delivery_id = $1 AND (outcome = 'parked' OR processed_at IS NULL)`, id)
	if err != nil {
		return false, fmt.Errorf("requeue delivery %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// ClaimEffect records that the event identified by key had its effect,
// through delivery. It returns false when another delivery already did.
func (q *Queries) ClaimEffect(ctx context.Context, key, deliveryID string) (bool, error) {
	tag, err := q.db.Exec(ctx, `INSERT INTO webhook_effects (semantic_key, delivery_id)
		VALUES ($1, $2) ON CONFLICT (semantic_key) DO NOTHING`, key, deliveryID)
	if err != nil {
		return false, fmt.Errorf("claim effect %s: %w", key, err)
	}
	return tag.RowsAffected() == 1, nil
}

// EffectApplied reports whether an event with this semantic key has been
// applied (by any delivery).
func (q *Queries) EffectApplied(ctx context.Context, key string) (bool, error) {
	var applied bool
	err := q.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM webhook_effects WHERE semantic_key = $1)`, key).Scan(&applied)
	if err != nil {
		return false, fmt.Errorf("look up effect %s: %w", key, err)
	}
	return applied, nil
}
