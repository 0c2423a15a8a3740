//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// relay stands between Gitea's webhook and mozi: Gitea posts to it and it
// forwards each delivery to the mozi running now, so the hook survives
// mozi's restarts on new ports, and a test can hold or drop deliveries to
// set their timing. While no mozi runs, deliveries fail (502) and are
// lost, as they are when Gitea cannot reach mozi.
type relay struct {
	srv *httptest.Server

	mu     sync.Mutex
	target string // mozi's webhook URL; "" while mozi is down
	// before is called with each delivery's event type (X-Gitea-Event-Type:
	// pull_request_sync, status, issue_comment…) before it is forwarded
	// (nil: forward at once); it may block to delay the delivery.
	before func(event string, body []byte)
	// detach lists event types the relay answers Gitea for at once (202)
	// and forwards in the background, after before returns: Gitea sends
	// one hook's deliveries one at a time, so holding one would hold all
	// that follow.
	detach map[string]bool
	// failures are background forwards mozi did not accept.
	failures []string
	// after is called once a delivery was forwarded, with mozi's status.
	after func(event string, status int)
}

func newRelay(t *testing.T) *relay {
	r := &relay{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

// URL is where Gitea posts.
func (r *relay) URL() string { return r.srv.URL + "/webhooks/gitea" }

func (r *relay) setTarget(url string) {
	r.mu.Lock()
	r.target = url
	r.mu.Unlock()
}

// hooks sets the relay's before and after functions.
func (r *relay) hooks(before func(event string, body []byte), after func(event string, status int)) {
	r.mu.Lock()
	r.before, r.after = before, after
	r.mu.Unlock()
}

// detachEvents makes the relay answer Gitea at once for these event types
// and forward them in the background (see relay.detach).
func (r *relay) detachEvents(events ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.detach = map[string]bool{}
	for _, e := range events {
		r.detach[e] = true
	}
}

// backgroundFailures are the detached deliveries mozi did not accept.
func (r *relay) backgroundFailures() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.failures...)
}

func (r *relay) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// The event type tells a pull request's sync from its other actions.
	event := req.Header.Get("X-Gitea-Event-Type")
	r.mu.Lock()
	detached := r.detach[event]
	r.mu.Unlock()
	if !detached {
		status, answer := r.forward(event, req.Header, body)
		w.WriteHeader(status)
		_, _ = w.Write(answer)
		return
	}
	w.WriteHeader(http.StatusAccepted)
	header := req.Header.Clone()
	go func() {
		if status, answer := r.forward(event, header, body); status != http.StatusAccepted && status != http.StatusOK {
			r.mu.Lock()
			r.failures = append(r.failures, fmt.Sprintf("%s: %d %s", event, status, answer))
			r.mu.Unlock()
		}
	}()
}

// forward passes a delivery to mozi once before lets it, and returns mozi's
// answer.
func (r *relay) forward(event string, header http.Header, body []byte) (int, []byte) {
	r.mu.Lock()
	before := r.before
	r.mu.Unlock()
	if before != nil {
		before(event, body)
	}
	r.mu.Lock()
	target, after := r.target, r.after
	r.mu.Unlock()
	if target == "" {
		return http.StatusBadGateway, []byte("mozi is down")
	}
	out, err := http.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return http.StatusBadGateway, []byte(err.Error())
	}
	out.Header = header.Clone()
	resp, err := http.DefaultClient.Do(out)
	if err != nil {
		return http.StatusBadGateway, []byte(err.Error())
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if after != nil {
		after(event, resp.StatusCode)
	}
	return resp.StatusCode, answer
}
