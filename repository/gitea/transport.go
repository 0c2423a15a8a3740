package gitea

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/moziplus/mozi/repository/task"
)

// transport is the http.RoundTripper behind every Gitea API call: a
// client-side rate limit, a timeout per attempt, retries with backoff and
// jitter on timeouts, 5xx and 429 (honouring Retry-After), metrics per
// endpoint and status, and one log line per outage rather than per request.
type transport struct {
	next        http.RoundTripper
	limiter     *rate.Limiter
	timeout     time.Duration
	maxAttempts int
	backoffBase time.Duration
	backoffMax  time.Duration
	logger      *slog.Logger
	metrics     *metrics
	sleep       func(ctx context.Context, d time.Duration) error
	onRecovered func()

	mu        sync.Mutex
	downSince time.Time // zero while Gitea answers
}

type metrics struct {
	requests *prometheus.CounterVec
	seconds  *prometheus.HistogramVec
	retries  *prometheus.CounterVec
	up       prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mozi_gitea_requests_total",
			Help: "Gitea API requests (each attempt), by endpoint, method and status code (\"error\" when no answer).",
		}, []string{"endpoint", "method", "status"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mozi_gitea_request_seconds",
			Help:    "Latency of Gitea API attempts, by endpoint.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
		}, []string{"endpoint"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mozi_gitea_retries_total",
			Help: "Gitea API attempts retried, by endpoint and reason (timeout, status_5xx, rate_limited, network).",
		}, []string{"endpoint", "reason"}),
		up: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mozi_gitea_up",
			Help: "1 while the last Gitea API call got an answer, 0 during an outage.",
		}),
	}
	m.up.Set(1)
	if reg != nil {
		reg.MustRegister(m.requests, m.seconds, m.retries, m.up)
	}
	return m
}

var (
	numberSegmentRE = regexp.MustCompile(`/\d+(/|$)`)
	shaSegmentRE    = regexp.MustCompile(`/[0-9a-f]{40,64}(/|$)`)
)

// endpoint turns an API path into a bounded metric label:
// /api/v1/repos/acme/widget/issues/3/comments → /repos/{owner}/{repo}/issues/{n}/comments.
func endpoint(path string) string {
	p := strings.TrimPrefix(path, "/api/v1")
	if rest, ok := strings.CutPrefix(p, "/repos/"); ok {
		parts := strings.SplitN(rest, "/", 3)
		p = "/repos/{owner}/{repo}"
		if len(parts) == 3 {
			p += "/" + parts[2]
		}
	}
	if rest, ok := strings.CutPrefix(p, "/users/"); ok {
		_, tail, _ := strings.Cut(rest, "/")
		p = "/users/{user}"
		if tail != "" {
			p += "/" + tail
		}
	}
	if rest, ok := strings.CutPrefix(p, "/orgs/"); ok {
		_, tail, _ := strings.Cut(rest, "/")
		p = "/orgs/{org}"
		if tail != "" {
			p += "/" + tail
		}
	}
	p = shaSegmentRE.ReplaceAllString(p, "/{sha}$1")
	for numberSegmentRE.MatchString(p) {
		p = numberSegmentRE.ReplaceAllString(p, "/{n}$1")
	}
	if i := strings.Index(p, "/statuses/"); i >= 0 {
		p = p[:i] + "/statuses/{ref}"
	}
	if i := strings.Index(p, "/commits/"); i >= 0 {
		p = p[:i] + "/commits/{ref}" + p[strings.LastIndex(p, "/"):]
	}
	return p
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ep := endpoint(req.URL.Path)
	// A request that may have had its effect is not sent twice: POST and
	// PATCH are retried only when Gitea said it did not act (429) or the
	// connection was never made.
	idempotent := req.Method != http.MethodPost && req.Method != http.MethodPatch
	var lastErr error
	for attempt := 1; ; attempt++ {
		if err := t.limiter.Wait(req.Context()); err != nil {
			return nil, fmt.Errorf("gitea %s %s: rate limit wait: %w", req.Method, ep, err)
		}
		resp, err := t.attempt(req, ep)
		reason, retry := classify(resp, err, idempotent)
		if !retry || attempt >= t.maxAttempts || req.Context().Err() != nil {
			t.observeOutcome(resp, err, ep)
			if err != nil && lastErr != nil && errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("%w (after %d attempts; first: %v)", err, attempt, lastErr)
			}
			return resp, err
		}
		if lastErr == nil {
			lastErr = err
			if lastErr == nil {
				lastErr = fmt.Errorf("status %d", resp.StatusCode)
			}
		}
		delay := t.backoff(attempt)
		if resp != nil {
			if ra := retryAfter(resp); ra > 0 {
				delay = min(ra, t.backoffMax)
			}
			drain(resp)
		}
		t.metrics.retries.WithLabelValues(ep, reason).Inc()
		if req.GetBody != nil && req.Body != nil {
			body, gerr := req.GetBody()
			if gerr != nil {
				return nil, fmt.Errorf("gitea %s %s: rewind body: %w", req.Method, ep, gerr)
			}
			req = req.Clone(req.Context())
			req.Body = body
		} else if req.Body != nil && req.Body != http.NoBody {
			t.observeOutcome(resp, err, ep)
			return resp, err // cannot resend a body we cannot rewind
		}
		if err := t.sleep(req.Context(), delay); err != nil {
			return nil, fmt.Errorf("gitea %s %s: %w", req.Method, ep, err)
		}
	}
}

// attempt sends one try under its own timeout. The timeout covers reading
// the body too: the response body is buffered before returning.
func (t *transport) attempt(req *http.Request, ep string) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(req.Context(), t.timeout)
	start := time.Now()
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err == nil {
		body, rerr := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		resp.Body.Close()
		if rerr != nil {
			err, resp = rerr, nil
		} else {
			resp.Body = io.NopCloser(strings.NewReader(string(body)))
		}
	}
	cancel()
	status := "error"
	if resp != nil {
		status = strconv.Itoa(resp.StatusCode)
	}
	t.metrics.requests.WithLabelValues(ep, req.Method, status).Inc()
	t.metrics.seconds.WithLabelValues(ep).Observe(time.Since(start).Seconds())
	return resp, err
}

// classify decides whether an attempt is worth repeating, and why.
func classify(resp *http.Response, err error, idempotent bool) (string, bool) {
	if err != nil {
		var netErr net.Error
		switch {
		case errors.Is(err, context.Canceled):
			return "", false
		case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout():
			return "timeout", idempotent
		case isDialError(err):
			return "network", true
		default:
			return "network", idempotent
		}
	}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		return "rate_limited", true
	case resp.StatusCode >= 500:
		return "status_5xx", idempotent || resp.StatusCode == http.StatusServiceUnavailable && retryAfter(resp) > 0
	}
	return "", false
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// retryAfter reads Retry-After in seconds or as an HTTP date.
func retryAfter(resp *http.Response) time.Duration {
	v := resp.Header.Get("Retry-After")
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(v); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second
	}
	if at, err := http.ParseTime(v); err == nil {
		return time.Until(at)
	}
	return 0
}

func (t *transport) backoff(attempt int) time.Duration {
	return task.Backoff(attempt, t.backoffBase, t.backoffMax)
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// observeOutcome logs the start and the end of an outage, once each.
func (t *transport) observeOutcome(resp *http.Response, err error, ep string) {
	down := err != nil && !errors.Is(err, context.Canceled) || resp != nil && resp.StatusCode >= 500
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case down && t.downSince.IsZero():
		t.downSince = time.Now()
		t.metrics.up.Set(0)
		reason := "no answer"
		if err != nil {
			reason = err.Error()
		} else {
			reason = "status " + strconv.Itoa(resp.StatusCode)
		}
		t.logger.Error("Gitea API unavailable: work that needs it waits", "endpoint", ep, "reason", reason)
	case !down && !t.downSince.IsZero():
		t.logger.Info("Gitea API available again", "outage", time.Since(t.downSince).Round(time.Second).String())
		t.downSince = time.Time{}
		t.metrics.up.Set(1)
		if t.onRecovered != nil {
			go t.onRecovered()
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
