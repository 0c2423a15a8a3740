//go:build e2e

package e2e

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
)

// giteaProxy stands between mozi (its API calls, its git fetches, its
// agents' pushes) and Gitea, to inject faults: down, it drops every
// connection as a dead Gitea would; a fault function may answer a request
// itself instead of Gitea.
type giteaProxy struct {
	srv *httptest.Server
	rp  *httputil.ReverseProxy

	mu    sync.Mutex
	down  bool
	fault func(r *http.Request) int // a status to answer with (0: forward)
}

func newGiteaProxy(t *testing.T, giteaURL string) *giteaProxy {
	target, err := url.Parse(giteaURL)
	if err != nil {
		t.Fatal(err)
	}
	p := &giteaProxy{rp: httputil.NewSingleHostReverseProxy(target)}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

// URL is where mozi reaches Gitea.
func (p *giteaProxy) URL() string { return p.srv.URL }

func (p *giteaProxy) setDown(down bool) {
	p.mu.Lock()
	p.down = down
	p.mu.Unlock()
}

// setFault answers the requests fault returns a status for.
func (p *giteaProxy) setFault(fault func(r *http.Request) int) {
	p.mu.Lock()
	p.fault = fault
	p.mu.Unlock()
}

func (p *giteaProxy) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	down, fault := p.down, p.fault
	p.mu.Unlock()
	if down {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		http.Error(w, "gitea is down", http.StatusBadGateway)
		return
	}
	if fault != nil {
		if status := fault(r); status != 0 {
			http.Error(w, "injected fault", status)
			return
		}
	}
	p.rp.ServeHTTP(w, r)
}
