// Package console is mozi's web console: server-rendered pages of tasks,
// runs, deliveries and agents for users signed in with Gitea, a live view
// of a run's output, and the operator's actions (stop, retry, requeue)
// through the engine's own transitions. It lives beside the webhook intake
// because it is the other HTTP face of mozi; it reads and writes only
// through repository.Store.
package console

import (
	"cmp"
	"crypto/cipher"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/moziplus/mozi/repository"
)

// Config configures the console.
type Config struct {
	Store *repository.Store
	// GiteaURL is where mozi reaches Gitea's API and token endpoint.
	GiteaURL string
	// BrowserGiteaURL is where browsers reach Gitea (sign-in, links);
	// default GiteaURL.
	BrowserGiteaURL string
	// PublicURL is where browsers reach the console.
	PublicURL     string
	ClientID      string
	ClientSecret  string // never logged
	AnonymousRead bool
	SessionTTL    time.Duration // default 12h
	// AccessTTL is how long a user's permission on a repository, as Gitea
	// answered, is trusted (default 30s).
	AccessTTL time.Duration
	// PollEvery is how often a live run's log is read for new output
	// (default 300ms).
	PollEvery time.Duration
	// Agents are the configured agents' limits and SpawnsPerAgentPerDay
	// the dispatcher's per-agent spawn budget over 24 hours (0: none),
	// for the agents page.
	Agents               []AgentLimits
	SpawnsPerAgentPerDay int
	HTTPClient           *http.Client
	Logger               *slog.Logger
}

// Server serves the console.
type Server struct {
	cfg    Config
	store  *repository.Store
	log    *slog.Logger
	http   *http.Client
	access *accessCache
	pages  *pages
	secure bool
	// tokens seals users' Gitea tokens at rest (sealing.go).
	tokens cipher.AEAD
}

// New checks the configuration and parses the templates.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("console: no store")
	}
	if cfg.GiteaURL == "" || cfg.ClientID == "" {
		return nil, errors.New("console: the Gitea URL and the OAuth2 client id are needed to sign users in")
	}
	pub, err := url.Parse(cfg.PublicURL)
	if err != nil || pub.Host == "" {
		return nil, errors.New("console: public_url is not an absolute URL")
	}
	cfg.GiteaURL = strings.TrimSuffix(cfg.GiteaURL, "/")
	cfg.BrowserGiteaURL = strings.TrimSuffix(cmp.Or(cfg.BrowserGiteaURL, cfg.GiteaURL), "/")
	cfg.PublicURL = strings.TrimSuffix(cfg.PublicURL, "/")
	cfg.SessionTTL = cmp.Or(cfg.SessionTTL, 12*time.Hour)
	cfg.AccessTTL = cmp.Or(cfg.AccessTTL, 30*time.Second)
	cfg.PollEvery = cmp.Or(cfg.PollEvery, 300*time.Millisecond)
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 15 * time.Second}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p, err := parsePages()
	if err != nil {
		return nil, err
	}
	tokens, err := newSealer(cfg.ClientSecret)
	if err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, store: cfg.Store, log: cfg.Logger, http: cfg.HTTPClient,
		access: newAccessCache(cfg.AccessTTL), pages: p, secure: pub.Scheme == "https", tokens: tokens}, nil
}

// Handler routes the console's pages, stream and actions.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(securityHeaders)
	r.Get("/login", s.login)
	r.Get("/auth/callback", s.callback)
	r.Get("/static/console.js", serveScript)
	r.Group(func(r chi.Router) {
		r.Use(s.authenticate)
		r.Post("/logout", s.logout)
		r.Get("/", s.taskList)
		r.Get("/tasks/{id}", s.taskPage)
		r.Get("/tasks/{id}/runs/{n}", s.runPage)
		r.Get("/tasks/{id}/runs/{n}/stream", s.runStream)
		r.Get("/deliveries", s.deliveries)
		r.Get("/agents", s.agents)
		r.Post("/tasks/{id}/stop", s.stop)
		r.Post("/tasks/{id}/retry", s.retry)
		r.Post("/deliveries/{id}/requeue", s.requeue)
	})
	return r
}

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'")
		next.ServeHTTP(w, r)
	})
}
