package webhook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"golang.org/x/sync/semaphore"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/gitea/payload"
)

// Path is where Gitea posts deliveries.
const Path = "/webhooks/gitea"

// Defaults of IntakeConfig.
const (
	DefaultMaxBodyBytes    = 10 << 20
	DefaultMaxPendingBytes = 64 << 20
	DefaultWriters         = 4
	DefaultMaxBatch        = 256
	DefaultMaxBatchBytes   = 4 << 20
)

// IntakeConfig configures the HTTP intake.
type IntakeConfig struct {
	// Secrets verify X-Gitea-Signature (or X-Forgejo-Signature, the same);
	// any one matching is enough.
	Secrets []string
	// InsecureNoSignature accepts unsigned deliveries (never in production).
	InsecureNoSignature bool
	// MaxBodyBytes rejects larger bodies with 413 (default
	// DefaultMaxBodyBytes, 10 MiB).
	MaxBodyBytes int64
	// MaxPendingBytes bounds the bodies being read and stored at once
	// (by Content-Length; MaxBodyBytes when a request has none): a
	// request that would exceed it waits before its body is read, so a
	// burst of huge deliveries cannot take mozi's memory (default
	// DefaultMaxPendingBytes, 64 MiB; at least MaxBodyBytes).
	MaxPendingBytes int64
	// Writers caps the commits running at once; MaxBatch and
	// MaxBatchBytes bound the deliveries and body bytes of one commit
	// (defaults DefaultWriters, DefaultMaxBatch and DefaultMaxBatchBytes:
	// 4, 256 and 4 MiB).
	Writers       int
	MaxBatch      int
	MaxBatchBytes int
	Logger        *slog.Logger
	Metrics       *Metrics
	// OnAccepted is called after a new delivery that needs processing is
	// committed (the inbox processor's wake-up).
	OnAccepted func()
	Now        func() time.Time
}

// Intake is the webhook endpoint.
type Intake struct {
	cfg       IntakeConfig
	secrets   [][]byte
	committer *committer
	pending   *semaphore.Weighted // body bytes being read or stored
}

// NewIntake builds the endpoint; Start must run before it serves.
func NewIntake(store DeliveryInserter, cfg IntakeConfig) (*Intake, error) {
	if len(cfg.Secrets) == 0 && !cfg.InsecureNoSignature {
		return nil, errors.New("webhook intake: no secret configured (set webhook.secrets or MOZI_WEBHOOK_SECRET, or start with --insecure-no-signature)")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxPendingBytes <= 0 {
		cfg.MaxPendingBytes = DefaultMaxPendingBytes
	}
	// A body the limit could never admit would wait for ever.
	cfg.MaxPendingBytes = max(cfg.MaxPendingBytes, cfg.MaxBodyBytes)
	if cfg.Writers <= 0 {
		cfg.Writers = DefaultWriters
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if cfg.MaxBatchBytes <= 0 {
		cfg.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.OnAccepted == nil {
		cfg.OnAccepted = func() {}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	in := &Intake{cfg: cfg, committer: newCommitter(store, cfg.Writers, cfg.MaxBatch, cfg.MaxBatchBytes, cfg.Metrics),
		pending: semaphore.NewWeighted(cfg.MaxPendingBytes)}
	for _, s := range cfg.Secrets {
		if s == "" {
			return nil, errors.New("webhook intake: empty secret")
		}
		in.secrets = append(in.secrets, []byte(s))
	}
	return in, nil
}

// Start accepts deliveries until ctx ends; stop the HTTP server first so no
// request is refused during a graceful shutdown.
func (in *Intake) Start(ctx context.Context) { in.committer.start(ctx) }

// Wait blocks until ctx has ended and no commit runs.
func (in *Intake) Wait() { in.committer.wait() }

// Routes returns the chi router to mount at the server root.
func (in *Intake) Routes() chi.Router {
	r := chi.NewRouter()
	r.Post(Path, in.ServeHTTP)
	return r
}

// rejection is a delivery refused with an HTTP status.
type rejection struct {
	status  int
	outcome string // metric outcome
	reason  string
}

func (r *rejection) Error() string { return r.reason }

// ServeHTTP stores one delivery durably, then answers: 202 accepted, 200
// for a delivery id seen before, 4xx for bad input, 503 when the database
// cannot take it (Gitea does not resend it: docs/runbook.md, "Lost
// deliveries"; the ticker's catch-up finds most of what it carried).
func (in *Intake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := in.cfg.Now()
	h := payload.ReadHeaders(r.Header)
	// The body's bytes are held until its commit is answered.
	weight := in.cfg.MaxBodyBytes
	if r.ContentLength >= 0 {
		weight = min(r.ContentLength, weight)
	}
	if weight > 0 {
		if err := in.pending.Acquire(r.Context(), weight); err != nil {
			in.cfg.Logger.Warn("webhook delivery abandoned while waiting for earlier bodies to be stored",
				"delivery_id", h.Delivery, "event", h.Event, "bytes", r.ContentLength, "error", err)
			in.cfg.Metrics.deliveries.WithLabelValues(eventLabel(h.Event), actionLabel(""), "error").Inc()
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "error", "error": "busy, retry later"})
			return
		}
		defer in.pending.Release(weight)
	}
	d, rej := in.read(w, r, h)
	event, action := eventLabel(h.Event), actionLabel(d.Action)
	if rej != nil {
		in.cfg.Logger.Warn("webhook delivery rejected", "delivery_id", h.Delivery, "event", h.Event,
			"status", rej.status, "reason", rej.reason, "remote", r.RemoteAddr)
		in.cfg.Metrics.deliveries.WithLabelValues(event, action, rej.outcome).Inc()
		writeJSON(w, rej.status, map[string]string{"status": "rejected", "error": rej.reason})
		return
	}
	inserted, err := in.committer.submit(r.Context(), d)
	if err != nil {
		in.cfg.Logger.Error("webhook delivery not stored", "delivery_id", d.ID, "event", h.Event, "error", err)
		in.cfg.Metrics.deliveries.WithLabelValues(event, action, "error").Inc()
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "error", "error": "delivery not stored, retry later"})
		return
	}
	in.cfg.Metrics.ackSeconds.Observe(in.cfg.Now().Sub(start).Seconds())
	switch {
	case !inserted:
		in.cfg.Logger.Info("webhook redelivery ignored", "delivery_id", d.ID, "event", h.Event)
		in.cfg.Metrics.deliveries.WithLabelValues(event, action, "duplicate").Inc()
		writeStatus(w, http.StatusOK, "duplicate", d.ID)
	case d.Outcome == repository.OutcomeIgnored:
		in.cfg.Logger.Debug("webhook event ignored", "delivery_id", d.ID, "event", h.Event, "event_type", h.EventType)
		in.cfg.Metrics.deliveries.WithLabelValues(event, action, "ignored").Inc()
		writeStatus(w, http.StatusAccepted, "ignored", d.ID)
	default:
		in.cfg.Logger.Debug("webhook delivery accepted", "delivery_id", d.ID, "event", h.Event, "action", d.Action, "repo", d.Repo)
		in.cfg.Metrics.deliveries.WithLabelValues(event, action, "accepted").Inc()
		in.cfg.OnAccepted()
		writeStatus(w, http.StatusAccepted, "accepted", d.ID)
	}
}

// read checks one request and turns it into a delivery to store.
func (in *Intake) read(w http.ResponseWriter, r *http.Request, h payload.Headers) (repository.Delivery, *rejection) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return repository.Delivery{}, &rejection{http.StatusUnsupportedMediaType, "rejected_content_type",
			fmt.Sprintf("content type %q is not application/json: set the Gitea webhook's content type to application/json",
				r.Header.Get("Content-Type"))}
	}
	if r.ContentLength > in.cfg.MaxBodyBytes {
		return repository.Delivery{}, tooLarge(r.ContentLength, in.cfg.MaxBodyBytes)
	}
	body, err := readBody(http.MaxBytesReader(w, r.Body, in.cfg.MaxBodyBytes), r.ContentLength)
	var maxErr *http.MaxBytesError
	if errors.As(err, &maxErr) {
		return repository.Delivery{}, tooLarge(-1, in.cfg.MaxBodyBytes)
	}
	if err != nil {
		return repository.Delivery{}, &rejection{http.StatusBadRequest, "malformed", "reading body: " + err.Error()}
	}
	if !in.cfg.InsecureNoSignature {
		if err := verifySignature(body, h.Signature, in.secrets); err != nil {
			return repository.Delivery{}, &rejection{http.StatusUnauthorized, "rejected_signature", err.Error()}
		}
	}
	if h.Event == "" {
		return repository.Delivery{}, &rejection{http.StatusBadRequest, "malformed", "missing X-Gitea-Event (or X-Forgejo-Event) header"}
	}
	d := repository.Delivery{
		ID: h.Delivery, Event: h.Event, EventType: h.EventType,
		Headers: storedHeaders(r.Header), Body: body,
	}
	if d.ID == "" {
		// Without Gitea's id, the body itself identifies a redelivery.
		sum := sha256.Sum256(body)
		d.ID = "sha256:" + hex.EncodeToString(sum[:16])
	}
	if len(d.ID) > 200 {
		return repository.Delivery{}, &rejection{http.StatusBadRequest, "malformed", "the delivery id (X-Gitea-Delivery) is longer than 200 characters"}
	}
	kind := payload.Classify(h.Event, h.EventType)
	if kind == payload.KindIgnored {
		env, err := payload.Peek(body)
		if err != nil {
			return repository.Delivery{}, &rejection{http.StatusBadRequest, "malformed", err.Error()}
		}
		d.Action, d.Repo, d.Outcome = env.Action, env.Repo, repository.OutcomeIgnored
		return d, nil
	}
	// Parse it now (once: it is the intake's main cost) so a broken payload
	// is refused to its sender, not discovered by the processor later.
	ev, err := payload.Parse(kind, body)
	if err != nil {
		return repository.Delivery{}, &rejection{http.StatusBadRequest, "malformed", err.Error()}
	}
	d.Action, d.Repo, d.Issue = ev.Action, ev.Repo, ev.Number()
	// Stored beside the body, so processing reads neither the body nor
	// parses it again; a body the parser keeps whole (a pull request's, a
	// comment's) past maxParsedBytes is parsed again rather than stored
	// twice.
	enc, err := ev.Encode()
	switch {
	case err != nil:
		in.cfg.Logger.Warn("webhook delivery stored unparsed: processing parses it again", "delivery_id", d.ID,
			"event", h.Event, "error", err)
	case len(enc) <= maxParsedBytes:
		d.Parsed = enc
	}
	return d, nil
}

// maxParsedBytes bounds the parsed event stored with a delivery.
const maxParsedBytes = 256 << 10

// readBody reads a request body into a buffer sized by Content-Length when
// the client sent one (Gitea does), instead of growing it step by step.
func readBody(r io.Reader, contentLength int64) ([]byte, error) {
	if contentLength <= 0 {
		return io.ReadAll(r)
	}
	buf := make([]byte, contentLength+1) // +1 to see a body longer than announced
	n, err := io.ReadFull(r, buf)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return buf[:n], nil
	case err != nil:
		return nil, err
	}
	rest, err := io.ReadAll(r)
	return append(buf[:n], rest...), err
}

func tooLarge(size, limit int64) *rejection {
	msg := fmt.Sprintf("body is larger than the %d-byte limit (webhook.max_body_bytes)", limit)
	if size > 0 {
		msg = fmt.Sprintf("body of %d bytes is larger than the %d-byte limit (webhook.max_body_bytes)", size, limit)
	}
	return &rejection{http.StatusRequestEntityTooLarge, "rejected_size", msg}
}

// storedHeaders keeps the Gitea headers of a delivery (for mozi deliveries
// and replays), never credentials.
func storedHeaders(h http.Header) map[string]string {
	out := map[string]string{}
	for name, values := range h {
		lower := strings.ToLower(name)
		if strings.HasPrefix(lower, "x-gitea-") || strings.HasPrefix(lower, "x-forgejo-") || strings.HasPrefix(lower, "x-gogs-") ||
			strings.HasPrefix(lower, "x-github-") || strings.HasPrefix(lower, "x-hub-") ||
			lower == "content-type" || lower == "user-agent" {
			out[payload.Clean(name)] = payload.Clean(strings.Join(values, ", "))
		}
	}
	return out
}

// writeStatus answers {"status":…,"delivery":…} without the cost of a
// general encoder: it is on every delivery's path.
func writeStatus(w http.ResponseWriter, code int, status, delivery string) {
	id, _ := json.Marshal(delivery)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(append([]byte(`{"status":"`+status+`","delivery":`), id...), "}\n"...))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
