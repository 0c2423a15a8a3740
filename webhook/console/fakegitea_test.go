package console_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeGitea answers the few endpoints the console asks Gitea: the OAuth2
// token exchange, the signed-in user, and a repository's permissions for
// the user whose token asks.
type fakeGitea struct {
	*httptest.Server
	mu      sync.Mutex
	codes   map[string]string          // authorization code → login
	perms   map[string]map[string]perm // login → repository → permission
	secret  string
	asked   int // repository permission requests
	revoked map[string]bool
	// overlap, when set, holds each permission request until another is
	// in flight (or it times out), to see whether the console asks at once.
	overlap     time.Duration
	inFlight    int
	maxInFlight int
	arrived     chan struct{}
}

type perm struct{ pull, push bool }

func newFakeGitea(t *testing.T) *fakeGitea {
	g := &fakeGitea{codes: map[string]string{}, perms: map[string]map[string]perm{}, secret: "s3cret",
		revoked: map[string]bool{}, arrived: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /login/oauth/access_token", func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		login, ok := g.codes[r.PostFormValue("code")]
		g.mu.Unlock()
		if !ok || r.PostFormValue("client_secret") != g.secret || r.PostFormValue("grant_type") != "authorization_code" {
			http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
			return
		}
		writeJSON(w, map[string]any{"access_token": "token-of-" + login, "token_type": "bearer"})
	})
	mux.HandleFunc("GET /api/v1/user", func(w http.ResponseWriter, r *http.Request) {
		login, ok := g.login(r)
		if !ok {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		writeJSON(w, map[string]any{"login": login})
	})
	mux.HandleFunc("GET /api/v1/repos/{owner}/{name}", func(w http.ResponseWriter, r *http.Request) {
		login, ok := g.login(r)
		if !ok {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		g.mu.Lock()
		g.asked++
		p, ok := g.perms[login][r.PathValue("owner")+"/"+r.PathValue("name")]
		g.inFlight++
		g.maxInFlight = max(g.maxInFlight, g.inFlight)
		overlap, arrived := g.overlap, g.arrived
		g.mu.Unlock()
		if overlap > 0 {
			select {
			case arrived <- struct{}{}: // tell one waiting request another came
			default:
			}
			select {
			case <-arrived:
			case <-time.After(overlap):
			}
		}
		g.mu.Lock()
		g.inFlight--
		g.mu.Unlock()
		if !ok {
			http.NotFound(w, r) // Gitea hides what the user cannot read
			return
		}
		writeJSON(w, map[string]any{"permissions": map[string]bool{"pull": p.pull, "push": p.push, "admin": false}})
	})
	g.Server = httptest.NewServer(mux)
	t.Cleanup(g.Close)
	return g
}

func (g *fakeGitea) login(r *http.Request) (string, bool) {
	login, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer token-of-")
	g.mu.Lock()
	defer g.mu.Unlock()
	return login, ok && !g.revoked[login]
}

// revoke makes Gitea refuse the user's token from now on.
func (g *fakeGitea) revoke(login string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.revoked[login] = true
}

func (g *fakeGitea) user(login string, perms map[string]perm) (code string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.codes["code-of-"+login] = login
	g.perms[login] = perms
	return "code-of-" + login
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
