// Package giteatest is a fake Gitea API for tests: it serves the responses
// recorded from Gitea 1.25.4 in testdata/gitea-1.25/api (or another
// recorded server's, such as Forgejo's), records the comments mozi and
// agents post, keeps review requests and reviews, counts requests, and
// lets a test inject failures.
//
// It answers mozi's calls as the real Gitea does, which the contract test
// (contract_test.go, build tag e2e) checks against a real Gitea set up
// like the recordings: one public repository (the recordings'), reads
// open to anyone and writes to tokens, a refused token refused everywhere,
// token scopes by category, 404 for what the recordings do not hold, an
// issue's comments not paged (Gitea 1.25 returns them all on every page),
// a missing issue's comments a 500 (as Gitea 1.25's), issue listings
// filtered by state, type and since, and a pull request's
// requested_reviewers made of each reviewer's latest review.
//
// Where it deliberately differs: it accepts a comment on an issue it has
// no recording of (tests make issues up; Gitea would answer 500), it does
// not refuse a review or a review request on a closed pull request, and it
// knows of no repository, organization or user beyond the recordings'.
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
	// repo is the recorded repository (owner/name), the only one there is.
	repo string
	// forgejo: the recordings are a Forgejo's.
	forgejo bool

	mu       sync.Mutex
	comments map[string][]map[string]any // "owner/repo#N" → posted comments
	nextID   int64
	// reviews are the pull requests' reviews, by number: the recorded ones
	// when first needed, then what tests add.
	reviews map[int][]map[string]any
	// issues are the issues tests add beside the recorded ones.
	issues map[int]map[string]any
	// Fail, when set, may answer a request instead of the fake (return
	// true when it wrote a response): inject 500s, timeouts, 429s.
	Fail func(w http.ResponseWriter, r *http.Request) bool
	// OnComment is called after a comment is posted, with its author.
	OnComment func(repo string, issue int, author, body string)
	// Users maps more tokens to the logins they act as (agents' tokens).
	Users map[string]string
	// Scopes, when set, are the only scopes tokens have (nil: all); a
	// call needing another is refused with Gitea's 403. write:X includes
	// read:X.
	Scopes []string
	// hooks are the webhooks, by "owner/name" or "org:NAME".
	hooks  map[string][]map[string]any
	hookID int64
}

// APIDir is the recorded Gitea 1.25.4 API responses' directory in this
// repository.
func APIDir() string { return RecordingDir("gitea-1.25") }

// RecordingDir is the recorded API responses of testdata/<name>/api in
// this repository (gitea-1.25, gitea-1.27.3, forgejo-10.0.0-dev).
func RecordingDir(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "testdata", name, "api")
}

// New starts a fake serving the recorded Gitea 1.25.4 responses.
func New() *Server { return NewFrom(APIDir()) }

// NewFrom starts a fake serving the recorded responses in dir (a
// RecordingDir). Recordings of a Forgejo make it a Forgejo: it answers
// Forgejo's version API and, as Forgejo, keeps no "status" event in a
// webhook.
func NewFrom(dir string) *Server {
	s := &Server{dir: dir, comments: map[string][]map[string]any{}, nextID: 1000, reviews: map[int][]map[string]any{},
		issues: map[int]map[string]any{}}
	var repo struct {
		FullName string `json:"full_name"`
	}
	if data, err := os.ReadFile(filepath.Join(dir, "repo.json")); err == nil {
		_ = json.Unmarshal(data, &repo)
	}
	s.repo = repo.FullName
	var version struct{ Version string }
	if data, err := os.ReadFile(filepath.Join(dir, "version.json")); err == nil {
		_ = json.Unmarshal(data, &version)
	}
	// Forgejo says which Gitea it is compatible with: 10.0.0+gitea-1.22.0.
	s.forgejo = strings.Contains(version.Version, "+gitea-")
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Repo is the recorded repository, owner/name.
func (s *Server) Repo() string { return s.repo }

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

// AddIssue makes an open issue of the recorded repository that the
// recordings do not hold (a test's made-up issue), by lead, updated now.
func (s *Server) AddIssue(number int, title, body string, assignees ...string) {
	var issue map[string]any
	if !s.load("issue-1", &issue) {
		issue = map[string]any{}
	}
	users := []any{}
	for _, a := range assignees {
		users = append(users, map[string]any{"login": a, "username": a})
	}
	now := time.Now().UTC().Format(time.RFC3339)
	issue["number"], issue["title"], issue["body"], issue["state"] = number, title, body, "open"
	issue["assignees"], issue["labels"], issue["comments"] = users, []any{}, 0
	issue["created_at"], issue["updated_at"], issue["closed_at"], issue["pull_request"] = now, now, nil, nil
	s.mu.Lock()
	defer s.mu.Unlock()
	s.issues[number] = issue
}

// caller is who a request comes from: a login, anonymous (no token), or
// refused (a token the fake does not know).
type caller struct {
	login     string
	anonymous bool
}

func (s *Server) caller(r *http.Request) (caller, bool) {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return caller{anonymous: true}, true
	}
	token, ok := strings.CutPrefix(auth, "token ")
	if !ok {
		return caller{}, false
	}
	if token == Token {
		return caller{login: "mozi"}, true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	login, ok := s.Users[token]
	return caller{login: login}, ok
}

var (
	repoPathRE = regexp.MustCompile(`^/api/v1/repos/([^/]+/[^/]+)(/.*)?$`)
	orgHooksRE = regexp.MustCompile(`^/api/v1/orgs/([^/]+)/hooks(?:/(\d+))?$`)

	// Paths below /api/v1/repos/{owner}/{name}.
	issueRE      = regexp.MustCompile(`^/issues/(\d+)$`)
	commentsRE   = regexp.MustCompile(`^/issues/(\d+)/comments$`)
	depsRE       = regexp.MustCompile(`^/issues/(\d+)/dependencies$`)
	pullRE       = regexp.MustCompile(`^/pulls/(\d+)$`)
	reviewsRE    = regexp.MustCompile(`^/pulls/(\d+)/reviews$`)
	requestedRE  = regexp.MustCompile(`^/pulls/(\d+)/requested_reviewers$`)
	combinedRE   = regexp.MustCompile(`^/commits/([^/]+)/status$`)
	statusesRE   = regexp.MustCompile(`^/(?:commits/([^/]+)/)?statuses(?:/([^/]+))?$`)
	repoHooksRE  = regexp.MustCompile(`^/hooks(?:/(\d+))?$`)
	numberInPath = func(re *regexp.Regexp, p string) int {
		n, _ := strconv.Atoi(re.FindStringSubmatch(p)[1])
		return n
	}
)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	if s.Fail != nil && s.Fail(w, r) {
		return
	}
	who, ok := s.caller(r)
	// As Gitea: a token it does not know is refused on every path, the
	// public ones included.
	if !ok {
		s.file(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	p := r.URL.Path
	if p == "/api/v1/version" || s.forgejo && p == "/api/forgejo/v1/version" {
		s.file(w, "version", http.StatusOK)
		return
	}
	// Anyone may read a public repository; everything else needs a token.
	publicRead := r.Method == http.MethodGet && repoPathRE.MatchString(p) && !strings.Contains(p, "/hooks")
	if who.anonymous && !publicRead {
		s.message(w, http.StatusUnauthorized, "token is required", nil)
		return
	}
	if !who.anonymous && !s.scoped(w, requiredScope(r.Method, p)) {
		return
	}
	switch {
	case p == "/api/v1/user":
		s.user(w, who.login)
	case orgHooksRE.MatchString(p):
		m := orgHooksRE.FindStringSubmatch(p)
		if owner, _, _ := strings.Cut(s.repo, "/"); m[1] != owner {
			s.notFound(w)
			return
		}
		s.serveHooks(w, r, "org:"+m[1], m[2])
	case repoPathRE.MatchString(p):
		m := repoPathRE.FindStringSubmatch(p)
		if m[1] != s.repo {
			s.notFound(w)
			return
		}
		s.serveRepo(w, r, who, m[1], m[2])
	default:
		s.notFound(w)
	}
}

// serveRepo answers below /repos/{owner}/{name}: rest is the path after
// it ("" for the repository itself).
func (s *Server) serveRepo(w http.ResponseWriter, r *http.Request, who caller, repo, rest string) {
	get := r.Method == http.MethodGet
	switch {
	case rest == "":
		s.repository(w, who)
	case repoHooksRE.MatchString(rest):
		s.serveHooks(w, r, repo, repoHooksRE.FindStringSubmatch(rest)[1])
	case r.Method == http.MethodPatch && issueRE.MatchString(rest):
		s.file(w, "issue-"+issueRE.FindStringSubmatch(rest)[1], http.StatusOK)
	case r.Method == http.MethodPost && commentsRE.MatchString(rest):
		s.postComment(w, r, repo, numberInPath(commentsRE, rest), who.login)
	case get && commentsRE.MatchString(rest):
		s.listComments(w, repo, numberInPath(commentsRE, rest))
	case get && depsRE.MatchString(rest):
		n := numberInPath(depsRE, rest)
		if _, ok := s.issue(n); !ok {
			s.notFound(w)
			return
		}
		s.fileOr(w, fmt.Sprintf("issue-%d-dependencies", n), "[]")
	case get && issueRE.MatchString(rest):
		issue, ok := s.issue(numberInPath(issueRE, rest))
		if !ok {
			s.notFound(w)
			return
		}
		s.json(w, http.StatusOK, issue)
	case get && rest == "/issues":
		s.listIssues(w, r)
	case get && pullRE.MatchString(rest):
		s.pull(w, numberInPath(pullRE, rest))
	case get && rest == "/pulls":
		s.listPulls(w, r)
	case get && reviewCommentsRE.MatchString(rest):
		s.serveReviewComments(w, rest)
	case reviewsRE.MatchString(rest):
		s.serveReviews(w, r, numberInPath(reviewsRE, rest), who.login)
	case requestedRE.MatchString(rest):
		s.serveReviewRequests(w, r, numberInPath(requestedRE, rest))
	case get && combinedRE.MatchString(rest):
		s.combinedStatus(w, combinedRE.FindStringSubmatch(rest)[1])
	case get && statusesRE.MatchString(rest):
		s.file(w, "commit-statuses", http.StatusOK)
	default:
		s.notFound(w)
	}
}

// requiredScope is the token scope Gitea asks of a call: its category by
// path, read for GET and write otherwise ("" when none is needed).
func requiredScope(method, p string) string {
	var category string
	switch {
	case p == "/api/v1/user" || strings.HasPrefix(p, "/api/v1/user/"):
		category = "user"
	case strings.HasPrefix(p, "/api/v1/orgs/"):
		category = "organization"
	case repoPathRE.MatchString(p):
		category = "repository"
		if rest := repoPathRE.FindStringSubmatch(p)[2]; rest == "/issues" || strings.HasPrefix(rest, "/issues/") {
			category = "issue"
		}
	default:
		return ""
	}
	if method == http.MethodGet || method == http.MethodHead {
		return "read:" + category
	}
	return "write:" + category
}

// scoped answers Gitea's 403 and returns false when tokens lack scope.
func (s *Server) scoped(w http.ResponseWriter, scope string) bool {
	s.mu.Lock()
	scopes := s.Scopes
	s.mu.Unlock()
	if scope == "" || scopes == nil || slices.Contains(scopes, "all") || slices.Contains(scopes, scope) {
		return true
	}
	if category, ok := strings.CutPrefix(scope, "read:"); ok && slices.Contains(scopes, "write:"+category) {
		return true
	}
	s.message(w, http.StatusForbidden, fmt.Sprintf("token does not have at least one of required scope(s), required=[%s], token scope=%s",
		scope, strings.Join(scopes, ",")), nil)
	return false
}

// message answers with Gitea's error shape.
func (s *Server) message(w http.ResponseWriter, status int, msg string, errs []string) {
	body := map[string]any{"message": msg, "url": s.URL + "/api/swagger"}
	if errs != nil {
		body["errors"] = errs
	}
	s.json(w, status, body)
}

func (s *Server) json(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// notFound is Gitea's 404, as recorded.
func (s *Server) notFound(w http.ResponseWriter) { s.file(w, "issue-404", http.StatusNotFound) }

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

// load decodes a recording (false when there is none).
func (s *Server) load(name string, v any) bool {
	data, err := os.ReadFile(filepath.Join(s.dir, name+".json"))
	return err == nil && json.Unmarshal(data, v) == nil
}

// repository answers the repository; an anonymous caller has read access
// only (the recording is of its administrator's view).
func (s *Server) repository(w http.ResponseWriter, who caller) {
	var repo map[string]any
	if !s.load("repo", &repo) {
		s.notFound(w)
		return
	}
	if who.anonymous {
		repo["permissions"] = map[string]bool{"admin": false, "push": false, "pull": true}
	}
	s.json(w, http.StatusOK, repo)
}

// issue is an issue as Gitea's issue API shows it: its own recording, its
// entry in the recorded issue listing, or a recorded pull request's issue
// side.
func (s *Server) issue(n int) (map[string]any, bool) {
	s.mu.Lock()
	added, ok := s.issues[n]
	s.mu.Unlock()
	if ok {
		return added, true
	}
	var issue map[string]any
	// issue-404.json is the recording of Gitea's 404, not of an issue.
	if n != 404 && s.load(fmt.Sprintf("issue-%d", n), &issue) {
		return issue, true
	}
	var list []map[string]any
	s.load("issues-list", &list)
	for _, i := range list {
		if number(i) == n {
			return i, true
		}
	}
	var pr map[string]any
	if !s.load(fmt.Sprintf("pull-%d", n), &pr) {
		return nil, false
	}
	issue = map[string]any{"pull_request": map[string]any{"merged": pr["merged"], "merged_at": pr["merged_at"],
		"draft": pr["draft"], "html_url": pr["html_url"]}}
	for _, k := range []string{"id", "number", "title", "body", "user", "labels", "milestone", "assignee", "assignees",
		"state", "is_locked", "comments", "created_at", "updated_at", "closed_at", "due_date", "pin_order", "html_url"} {
		issue[k] = pr[k]
	}
	return issue, true
}

func number(v map[string]any) int {
	n, _ := v["number"].(float64)
	return int(n)
}

// page is the part of list a request's page and limit ask for (Gitea's
// defaults: page 1, 30 per page, at most 50).
func page[T any](r *http.Request, list []T) []T {
	p, _ := strconv.Atoi(r.URL.Query().Get("page"))
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	p = max(p, 1)
	if limit <= 0 {
		limit = 30
	}
	limit = min(limit, 50)
	start := min((p-1)*limit, len(list))
	return list[start:min(start+limit, len(list))]
}

// listIssues filters the recorded issue listing as Gitea does: state
// (default open), type, since (updated at or after); newest first, as
// recorded.
func (s *Server) listIssues(w http.ResponseWriter, r *http.Request) {
	var list []map[string]any
	s.load("issues-list", &list)
	s.mu.Lock()
	for _, i := range s.issues {
		list = append(list, i)
	}
	s.mu.Unlock()
	// Newest first, as Gitea lists them (the recording is in that order).
	slices.SortStableFunc(list, func(a, b map[string]any) int { return number(b) - number(a) })
	q := r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	var since time.Time
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			s.message(w, http.StatusUnprocessableEntity, "since: "+err.Error(), nil)
			return
		}
		since = t
	}
	out := []map[string]any{}
	for _, i := range list {
		isPull := i["pull_request"] != nil
		updated, _ := time.Parse(time.RFC3339, fmt.Sprint(i["updated_at"]))
		switch {
		case state != "all" && i["state"] != state,
			q.Get("type") == "issues" && isPull, q.Get("type") == "pulls" && !isPull,
			!since.IsZero() && updated.Before(since):
			continue
		}
		out = append(out, i)
	}
	s.json(w, http.StatusOK, page(r, out))
}

// listPulls serves the recorded listing of open pull requests.
func (s *Server) listPulls(w http.ResponseWriter, r *http.Request) {
	var list []map[string]any
	s.load("pulls-open", &list)
	if state := r.URL.Query().Get("state"); state != "" && state != "open" && state != "all" {
		list = nil // the recordings hold open pull requests only
	}
	s.json(w, http.StatusOK, page(r, append([]map[string]any{}, list...)))
}

// listComments answers an issue's recorded and posted comments, all of
// them whatever page is asked: Gitea 1.25 does not page this list.
func (s *Server) listComments(w http.ResponseWriter, repo string, issue int) {
	var list []map[string]any
	s.load(fmt.Sprintf("issue-%d-comments", issue), &list)
	s.mu.Lock()
	posted := s.comments[fmt.Sprintf("%s#%d", repo, issue)]
	list = append(list, posted...)
	s.mu.Unlock()
	if _, ok := s.issue(issue); !ok && posted == nil {
		// Gitea 1.25's answer for the comments of an issue that does not
		// exist (routers/api/v1/repo/issue_comment.go).
		s.message(w, http.StatusInternalServerError, "", nil)
		return
	}
	if list == nil {
		list = []map[string]any{}
	}
	s.json(w, http.StatusOK, list)
}

func (s *Server) postComment(w http.ResponseWriter, r *http.Request, repo string, issue int, author string) {
	var in struct {
		Body string `json:"body"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == "" {
		s.message(w, http.StatusUnprocessableEntity, "body is required", nil)
		return
	}
	s.mu.Lock()
	s.nextID++
	now := time.Now().UTC().Format(time.RFC3339)
	c := map[string]any{"id": s.nextID, "body": in.Body, "user": map[string]any{"login": author, "username": author},
		"created_at": now, "updated_at": now}
	key := fmt.Sprintf("%s#%d", repo, issue)
	s.comments[key] = append(s.comments[key], c)
	onComment := s.OnComment
	s.mu.Unlock()
	if onComment != nil {
		onComment(repo, issue, author, in.Body)
	}
	s.json(w, http.StatusCreated, c)
}

// combinedStatus answers the recorded combined status for its commit
// (the full hash or a prefix of at least 7), 404 for any other.
func (s *Server) combinedStatus(w http.ResponseWriter, ref string) {
	var combined struct {
		SHA string `json:"sha"`
	}
	if !s.load("commit-status-combined", &combined) || len(ref) < 7 || !strings.HasPrefix(combined.SHA, ref) {
		s.message(w, http.StatusNotFound, "not found", []string{fmt.Sprintf("object does not exist [id: %s, rel_path: ]", ref)})
		return
	}
	s.file(w, "commit-status-combined", http.StatusOK)
}

// user answers /user as the token's login.
func (s *Server) user(w http.ResponseWriter, login string) {
	var u map[string]any
	if !s.load("user-coder1", &u) {
		s.message(w, http.StatusInternalServerError, "fake: no user recording", nil)
		return
	}
	u["login"], u["username"] = login, login
	s.json(w, http.StatusOK, u)
}
