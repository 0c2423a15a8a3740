// Package giteatest is a fake Gitea API for tests: it serves the responses
// recorded from Gitea 1.25.4 in testdata/gitea-1.25/api, records the
// comments mozi and agents post, counts requests, and lets a test inject
// failures.
package giteatest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Token is mozi's own token on the fake; it acts as user "mozi".
const Token = "gitea-test-token"

// Server is a running fake Gitea.
type Server struct {
	*httptest.Server
	dir      string
	requests atomic.Int64

	mu       sync.Mutex
	comments map[string][]map[string]any // "owner/repo#N" → posted comments
	nextID   int64
	// Fail, when set, may answer a request instead of the fake (return
	// true when it wrote a response): inject 500s, timeouts, 429s.
	Fail func(w http.ResponseWriter, r *http.Request) bool
	// OnComment is called after a comment is posted, with its author.
	OnComment func(repo string, issue int, author, body string)
	// Users maps more tokens to the logins they act as (agents' tokens).
	Users map[string]string
	// Scopes, when set, are the only scopes tokens have (nil: all); a
	// call needing another is refused with Gitea's 403.
	Scopes []string
	// hooks are the webhooks, by "owner/name" or "org:NAME".
	hooks  map[string][]map[string]any
	hookID int64
}

// login is the user a request's token acts as ("" for an unknown token).
func (s *Server) login(r *http.Request) string {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "token ")
	if !ok {
		return ""
	}
	if token == Token {
		return "mozi"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Users[token]
}

// APIDir is the recorded API responses' directory in this repository.
func APIDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "testdata", "gitea-1.25", "api")
}

// New starts a fake serving the recorded responses.
func New() *Server {
	s := &Server{dir: APIDir(), comments: map[string][]map[string]any{}, nextID: 1000}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Client is an HTTP client that authenticates to the fake.
func (s *Server) Client() *http.Client {
	return &http.Client{Transport: tokenTransport{}}
}

type tokenTransport struct{}

func (tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "token "+Token)
	return http.DefaultTransport.RoundTrip(r)
}

// Requests is how many API requests the fake answered.
func (s *Server) Requests() int64 { return s.requests.Load() }

// AddUser lets token act as login.
func (s *Server) AddUser(token, login string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Users == nil {
		s.Users = map[string]string{}
	}
	s.Users[token] = login
}

// Comments returns the comments posted on an issue.
func (s *Server) Comments(repo string, issue int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, c := range s.comments[fmt.Sprintf("%s#%d", repo, issue)] {
		out = append(out, c["body"].(string))
	}
	return out
}

var (
	issueRE    = regexp.MustCompile(`^/api/v1/repos/([^/]+/[^/]+)/issues/(\d+)$`)
	commentsRE = regexp.MustCompile(`^/api/v1/repos/([^/]+/[^/]+)/issues/(\d+)/comments$`)
	depsRE     = regexp.MustCompile(`^/api/v1/repos/([^/]+/[^/]+)/issues/(\d+)/dependencies$`)
	pullRE     = regexp.MustCompile(`^/api/v1/repos/([^/]+/[^/]+)/pulls/(\d+)$`)
	pullsRE    = regexp.MustCompile(`^/api/v1/repos/([^/]+/[^/]+)/pulls$`)
	issuesRE   = regexp.MustCompile(`^/api/v1/repos/([^/]+/[^/]+)/issues$`)
	combinedRE = regexp.MustCompile(`^/api/v1/repos/([^/]+/[^/]+)/commits/([^/]+)/status$`)
	statusesRE = regexp.MustCompile(`^/api/v1/repos/([^/]+/[^/]+)/(?:commits/([^/]+)/)?statuses(?:/([^/]+))?$`)
	repoRE     = regexp.MustCompile(`^/api/v1/repos/([^/]+/[^/]+)$`)
	hooksRE    = regexp.MustCompile(`^/api/v1/(repos|orgs)/([^/]+(?:/[^/]+)?)/hooks(?:/(\d+))?$`)
)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	if s.Fail != nil && s.Fail(w, r) {
		return
	}
	// As Gitea: a token it does not know is refused on every path, the
	// public ones included; only an anonymous request may read /version.
	if s.login(r) == "" && (r.URL.Path != "/api/v1/version" || r.Header.Get("Authorization") != "") {
		s.file(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	p := r.URL.Path
	switch {
	case p == "/api/v1/version":
		s.file(w, "version", http.StatusOK)
	case p == "/api/v1/user":
		s.user(w, s.login(r))
	case hooksRE.MatchString(p):
		m := hooksRE.FindStringSubmatch(p)
		key := m[2]
		if m[1] == "orgs" {
			key = "org:" + key
		}
		s.serveHooks(w, r, key, m[3])
	case r.Method == http.MethodPatch && issueRE.MatchString(p):
		if !s.scoped(w, "write:issue") {
			return
		}
		s.file(w, "issue-"+issueRE.FindStringSubmatch(p)[2], http.StatusOK)
	case r.Method == http.MethodPost && commentsRE.MatchString(p):
		if !s.scoped(w, "write:issue") {
			return
		}
		m := commentsRE.FindStringSubmatch(p)
		s.postComment(w, r, m[1], m[2], s.login(r))
	case commentsRE.MatchString(p):
		m := commentsRE.FindStringSubmatch(p)
		s.listComments(w, m[1], m[2])
	case depsRE.MatchString(p):
		s.fileOr(w, "issue-"+depsRE.FindStringSubmatch(p)[2]+"-dependencies", "[]")
	case issueRE.MatchString(p):
		s.file(w, "issue-"+issueRE.FindStringSubmatch(p)[2], http.StatusOK)
	case pullRE.MatchString(p):
		s.file(w, "pull-"+pullRE.FindStringSubmatch(p)[2], http.StatusOK)
	case pullsRE.MatchString(p):
		s.file(w, "pulls-open", http.StatusOK)
	case r.Method == http.MethodGet && issuesRE.MatchString(p):
		s.file(w, "issues-list", http.StatusOK)
	case combinedRE.MatchString(p):
		s.file(w, "commit-status-combined", http.StatusOK)
	case statusesRE.MatchString(p):
		s.file(w, "commit-statuses", http.StatusOK)
	case repoRE.MatchString(p):
		s.file(w, "repo", http.StatusOK)
	default:
		s.file(w, "issue-404", http.StatusNotFound)
	}
}

// file answers with a recorded body; a missing recording is a 404.
func (s *Server) file(w http.ResponseWriter, name string, status int) {
	data, err := os.ReadFile(filepath.Join(s.dir, name+".json"))
	if err != nil || name == "issue-404" {
		// issue-404.json is the recorded body of Gitea's 404.
		data, _ = os.ReadFile(filepath.Join(s.dir, "issue-404.json"))
		status = http.StatusNotFound
	}
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

func (s *Server) fileOr(w http.ResponseWriter, name, fallback string) {
	data, err := os.ReadFile(filepath.Join(s.dir, name+".json"))
	if err != nil {
		data = []byte(fallback)
	}
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	_, _ = w.Write(data)
}

func (s *Server) listComments(w http.ResponseWriter, repo, issue string) {
	var list []map[string]any
	if data, err := os.ReadFile(filepath.Join(s.dir, "issue-"+issue+"-comments.json")); err == nil {
		_ = json.Unmarshal(data, &list)
	}
	s.mu.Lock()
	list = append(list, s.comments[repo+"#"+issue]...)
	s.mu.Unlock()
	if list == nil {
		list = []map[string]any{}
	}
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	_ = json.NewEncoder(w).Encode(list)
}

func (s *Server) postComment(w http.ResponseWriter, r *http.Request, repo, issue, author string) {
	var in struct {
		Body string `json:"body"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == "" {
		http.Error(w, `{"message":"body is required"}`, http.StatusUnprocessableEntity)
		return
	}
	s.mu.Lock()
	s.nextID++
	c := map[string]any{"id": s.nextID, "body": in.Body, "user": map[string]any{"login": author, "username": author},
		"created_at": time.Now().UTC().Format(time.RFC3339), "updated_at": time.Now().UTC().Format(time.RFC3339)}
	s.comments[repo+"#"+issue] = append(s.comments[repo+"#"+issue], c)
	onComment := s.OnComment
	s.mu.Unlock()
	if onComment != nil {
		n, _ := strconv.Atoi(issue)
		onComment(repo, n, author, in.Body)
	}
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(c)
}

// scoped answers Gitea's 403 and returns false when tokens lack scope.
func (s *Server) scoped(w http.ResponseWriter, scope string) bool {
	s.mu.Lock()
	scopes := s.Scopes
	s.mu.Unlock()
	if scopes == nil || slices.Contains(scopes, scope) {
		return true
	}
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	w.WriteHeader(http.StatusForbidden)
	_ = json.NewEncoder(w).Encode(map[string]string{
		"message": fmt.Sprintf("token does not have at least one of required scope(s), required=[%s], token scope=%s",
			scope, strings.Join(scopes, ","))})
	return false
}

// user answers /user as the token's login.
func (s *Server) user(w http.ResponseWriter, login string) {
	data, err := os.ReadFile(filepath.Join(s.dir, "user-coder1.json"))
	var u map[string]any
	if err != nil || json.Unmarshal(data, &u) != nil {
		http.Error(w, `{"message":"fake: no user recording"}`, http.StatusInternalServerError)
		return
	}
	u["login"], u["username"] = login, login
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	_ = json.NewEncoder(w).Encode(u)
}

// hookEvents is what Gitea 1.25 keeps of the events a hook is created or
// edited with (routers/api/v1/utils/hook.go, updateHookEvents): the names
// it knows, "issues" and "pull_request" standing for every event of their
// group, reviews as the one event "pull_request_review"; anything else is
// dropped. No events means push only.
func hookEvents(raw any) []string {
	var in []string
	switch v := raw.(type) {
	case []string:
		in = v
	case []any:
		for _, e := range v {
			if s, ok := e.(string); ok {
				in = append(in, s)
			}
		}
	}
	if len(in) == 0 {
		return []string{"push"}
	}
	has := func(e string) bool { return slices.Contains(in, e) }
	var out []string
	for _, e := range []string{"create", "push", "delete", "fork", "repository", "wiki", "release", "package",
		"status", "workflow_run", "workflow_job"} {
		if has(e) {
			out = append(out, e)
		}
	}
	groups := []struct {
		all, only string
		members   []string
	}{
		{"issues", "issues_only", []string{"issue_assign", "issue_label", "issue_milestone", "issue_comment"}},
		{"pull_request", "pull_request_only", []string{"pull_request_assign", "pull_request_label", "pull_request_milestone",
			"pull_request_comment", "pull_request_review", "pull_request_review_request", "pull_request_sync"}},
	}
	for _, g := range groups {
		if has(g.all) || has(g.only) {
			out = append(out, g.all)
		}
		for _, m := range g.members {
			if has(g.all) || has(m) {
				out = append(out, m)
			}
		}
	}
	slices.Sort(out)
	return out
}

// AddHook installs a webhook as an operator would in Gitea's UI; key is
// "owner/name" or "org:NAME".
func (s *Server) AddHook(key, url, contentType string, events []string, active bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addHookLocked(key, map[string]any{"type": "gitea", "events": hookEvents(events), "active": active,
		"config": map[string]any{"url": url, "content_type": contentType}})
}

func (s *Server) addHookLocked(key string, h map[string]any) map[string]any {
	if s.hooks == nil {
		s.hooks = map[string][]map[string]any{}
	}
	s.hookID++
	h["id"] = s.hookID
	s.hooks[key] = append(s.hooks[key], h)
	return h
}

// Hooks returns the webhooks of key ("owner/name" or "org:NAME") with
// their secrets, which Gitea's API never shows.
func (s *Server) Hooks(key string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.hooks[key])
}

func (s *Server) serveHooks(w http.ResponseWriter, r *http.Request, key, id string) {
	need := "read:repository"
	if r.Method != http.MethodGet {
		need = "write:repository"
	}
	if strings.HasPrefix(key, "org:") {
		need = strings.Replace(need, "repository", "organization", 1)
	}
	if !s.scoped(w, need) {
		return
	}
	var in map[string]any
	if r.Method == http.MethodPost || r.Method == http.MethodPatch {
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, `{"message":"invalid JSON"}`, http.StatusUnprocessableEntity)
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	public := func(h map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range h {
			out[k] = v
		}
		cfg := map[string]any{}
		for k, v := range h["config"].(map[string]any) {
			if k != "secret" {
				cfg[k] = v
			}
		}
		out["config"] = cfg
		return out
	}
	switch {
	case r.Method == http.MethodGet && id == "":
		list := []map[string]any{}
		for _, h := range s.hooks[key] {
			list = append(list, public(h))
		}
		_ = json.NewEncoder(w).Encode(list)
	case r.Method == http.MethodPost && id == "":
		in["events"] = hookEvents(in["events"])
		h := s.addHookLocked(key, in)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(public(h))
	case r.Method == http.MethodPatch && id != "":
		for _, h := range s.hooks[key] {
			if fmt.Sprint(h["id"]) != id {
				continue
			}
			// As Gitea 1.25's editHook: url and content type change, the
			// secret does not; events are replaced.
			if cfg, ok := in["config"].(map[string]any); ok {
				for _, k := range []string{"url", "content_type"} {
					if v, ok := cfg[k]; ok {
						h["config"].(map[string]any)[k] = v
					}
				}
			}
			h["events"] = hookEvents(in["events"])
			if active, ok := in["active"]; ok {
				h["active"] = active
			}
			_ = json.NewEncoder(w).Encode(public(h))
			return
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"message":"hook not found"}`))
	case r.Method == http.MethodDelete && id != "":
		for i, h := range s.hooks[key] {
			if fmt.Sprint(h["id"]) == id {
				s.hooks[key] = slices.Delete(s.hooks[key], i, i+1)
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"message":"hook not found"}`))
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}
