package gitea

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository/gitea/giteatest"
	"github.com/moziplus/mozi/repository/task"
)

// fastGitea is a client on the fake whose retries do not sleep.
func fastGitea(t *testing.T, srv *giteatest.Server, token string, logs *bytes.Buffer) (*Client, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	logger := slog.New(slog.DiscardHandler)
	if logs != nil {
		logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	g, err := New(Config{URL: srv.URL, Token: token, Timeout: 300 * time.Millisecond,
		Registerer: reg, Logger: logger, RatePerSecond: 1000, Burst: 1000})
	require.NoError(t, err)
	g.http.Transport.(*transport).sleep = func(context.Context, time.Duration) error { return nil }
	return g, reg
}

func TestGiteaReadsRecordedResponses(t *testing.T) {
	t.Parallel()
	srv := giteatest.New()
	defer srv.Close()
	g, _ := fastGitea(t, srv, giteatest.Token, nil)
	ctx := context.Background()

	issue, err := g.FetchIssue(ctx, "acme/widget", 3)
	require.NoError(t, err)
	assert.Equal(t, 3, issue.Number)
	assert.Equal(t, "lead", issue.Author)
	assert.NotEmpty(t, issue.Title)
	assert.False(t, issue.UpdatedAt.IsZero())

	_, err = g.FetchIssue(ctx, "acme/widget", 404)
	require.ErrorIs(t, err, task.ErrNotFound)

	comments, err := g.FetchComments(ctx, "acme/widget", 3, 100)
	require.NoError(t, err)
	require.Len(t, comments, 1)
	assert.True(t, strings.HasPrefix(comments[0].Body, "[Action Report]"))

	blocked, err := g.FetchBlockedBy(ctx, "acme/widget", 5)
	require.NoError(t, err)
	assert.Equal(t, []int{2}, blocked, "#5 is blocked by #2 through a Gitea dependency")

	id, err := g.PostComment(ctx, "acme/widget", 3, "hello")
	require.NoError(t, err)
	assert.NotZero(t, id)
	assert.Equal(t, []string{"hello"}, srv.Comments("acme/widget", 3))
}

// The catch-up's listings read Gitea's recorded answers: open issues (not
// the closed ones the recording also holds) updated since a time.
func TestGiteaListsWhatChanged(t *testing.T) {
	t.Parallel()
	srv := giteatest.New()
	defer srv.Close()
	g, _ := fastGitea(t, srv, giteatest.Token, nil)
	ctx := context.Background()
	issue1Updated := time.Date(2026, 11, 22, 23, 50, 4, 0, time.UTC) // issue-1.json
	tests := []struct {
		name  string
		since time.Time
		limit int
		want  []int
	}{
		{"everything open", time.Time{}, 10, []int{1}},
		{"updated at the mark", issue1Updated, 10, []int{1}},
		{"nothing since", issue1Updated.Add(time.Second), 10, nil},
		{"no room", time.Time{}, 0, nil},
	}
	for _, tt := range tests {
		issues, err := g.OpenIssuesSince(ctx, "acme/widget", tt.since, tt.limit)
		require.NoError(t, err, tt.name)
		var got []int
		for _, i := range issues {
			require.Equal(t, "open", i.State, tt.name)
			got = append(got, i.Number)
		}
		assert.Equal(t, tt.want, got, tt.name)
	}
	pulls, err := g.OpenPullRequestsSince(ctx, "acme/widget", time.Now().Add(-time.Hour), 10)
	require.NoError(t, err)
	assert.Empty(t, pulls, "the recording has no open pull request")
}

func TestGiteaWrongTokenIsAnError(t *testing.T) {
	t.Parallel()
	srv := giteatest.New()
	defer srv.Close()
	g, _ := fastGitea(t, srv, "wrong-token", nil)
	_, err := g.FetchIssue(context.Background(), "acme/widget", 3)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "wrong-token", "a token never appears in an error")
}

func TestGiteaRetries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		fail     func(n int64, w http.ResponseWriter, r *http.Request) bool
		post     bool
		wantErr  bool
		wantHits int64
	}{
		{"500 twice then success", func(n int64, w http.ResponseWriter, _ *http.Request) bool {
			if n <= 2 {
				w.WriteHeader(http.StatusInternalServerError)
				return true
			}
			return false
		}, false, false, 3},
		{"429 with Retry-After", func(n int64, w http.ResponseWriter, _ *http.Request) bool {
			if n == 1 {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
				return true
			}
			return false
		}, false, false, 2},
		{"always 502: gives up after 4 attempts", func(_ int64, w http.ResponseWriter, _ *http.Request) bool {
			w.WriteHeader(http.StatusBadGateway)
			return true
		}, false, true, 4},
		{"timeout then success", func(n int64, _ http.ResponseWriter, _ *http.Request) bool {
			if n == 1 {
				time.Sleep(600 * time.Millisecond)
				return true
			}
			return false
		}, false, false, 2},
		{"a POST is not repeated after a 500", func(_ int64, w http.ResponseWriter, _ *http.Request) bool {
			w.WriteHeader(http.StatusInternalServerError)
			return true
		}, true, true, 1},
		{"404 is not retried", func(int64, http.ResponseWriter, *http.Request) bool { return false }, false, true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := giteatest.New()
			defer srv.Close()
			var hits atomic.Int64
			srv.Fail = func(w http.ResponseWriter, r *http.Request) bool { return tt.fail(hits.Add(1), w, r) }
			g, reg := fastGitea(t, srv, giteatest.Token, nil)
			var err error
			switch {
			case tt.post:
				_, err = g.PostComment(context.Background(), "acme/widget", 3, "x")
			case tt.name == "404 is not retried":
				_, err = g.FetchIssue(context.Background(), "acme/widget", 404)
			default:
				_, err = g.FetchIssue(context.Background(), "acme/widget", 3)
			}
			if tt.wantErr {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.wantHits, hits.Load())
			assert.Positive(t, testutil.CollectAndCount(reg, "mozi_gitea_requests_total"))
		})
	}
}

func TestGiteaOutageIsLoggedOnce(t *testing.T) {
	t.Parallel()
	srv := giteatest.New()
	defer srv.Close()
	var down atomic.Bool
	down.Store(true)
	srv.Fail = func(w http.ResponseWriter, _ *http.Request) bool {
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return true
		}
		return false
	}
	var logs bytes.Buffer
	g, reg := fastGitea(t, srv, giteatest.Token, &logs)
	for range 5 {
		_, err := g.FetchIssue(context.Background(), "acme/widget", 3)
		require.Error(t, err)
	}
	assert.Equal(t, 0.0, gaugeValue(t, reg, "mozi_gitea_up"))
	down.Store(false)
	_, err := g.FetchIssue(context.Background(), "acme/widget", 3)
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(logs.String(), "Gitea API unavailable"), logs.String())
	assert.Equal(t, 1, strings.Count(logs.String(), "Gitea API available again"))
}

func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func TestEndpointLabelsAreBounded(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]string{
		"/api/v1/repos/acme/widget/issues/3/comments":                                       "/repos/{owner}/{repo}/issues/{n}/comments",
		"/api/v1/repos/other/thing/issues/12345":                                            "/repos/{owner}/{repo}/issues/{n}",
		"/api/v1/repos/acme/widget/commits/3403c9d703782b8ccfc0497aa95bf7cf3b3b07a9/status": "/repos/{owner}/{repo}/commits/{ref}/status",
		"/api/v1/repos/acme/widget/statuses/main":                                           "/repos/{owner}/{repo}/statuses/{ref}",
		"/api/v1/users/coder1":                                                              "/users/{user}",
		"/api/v1/version":                                                                   "/version",
	} {
		assert.Equal(t, want, endpoint(path), path)
	}
}

// TestGiteaRecoveryIsNoticedWithoutOtherCalls: during an outage the
// watcher asks Gitea until it answers, and says so once.
func TestGiteaRecoveryIsNoticedWithoutOtherCalls(t *testing.T) {
	t.Parallel()
	srv := giteatest.New()
	defer srv.Close()
	var down atomic.Bool
	down.Store(true)
	srv.Fail = func(w http.ResponseWriter, _ *http.Request) bool {
		if down.Load() {
			w.WriteHeader(http.StatusBadGateway)
			return true
		}
		return false
	}
	recovered := make(chan struct{}, 4)
	g, err := New(Config{URL: srv.URL, Token: giteatest.Token, Timeout: 300 * time.Millisecond,
		RatePerSecond: 1000, Burst: 1000, OnRecovered: func() { recovered <- struct{}{} }})
	require.NoError(t, err)
	g.http.Transport.(*transport).sleep = func(context.Context, time.Duration) error { return nil }
	_, err = g.FetchIssue(context.Background(), "acme/widget", 3)
	require.Error(t, err)
	require.True(t, g.Down())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go g.WatchOutages(ctx, 10*time.Millisecond)
	down.Store(false) // nobody but the watcher calls Gitea now
	select {
	case <-recovered:
	case <-time.After(10 * time.Second):
		t.Fatal("the recovery was not noticed")
	}
	assert.False(t, g.Down())
	select {
	case <-recovered:
		t.Fatal("one recovery reported twice")
	default:
	}
}

// Gitea 1.25 answers every page of an issue's comments with the whole
// list (the fake too): mozi reads each comment once, up to its limit.
func TestGiteaReadsUnpagedCommentsOnce(t *testing.T) {
	t.Parallel()
	srv := giteatest.New()
	defer srv.Close()
	g, _ := fastGitea(t, srv, giteatest.Token, nil)
	ctx := context.Background()
	for i := range 51 {
		_, err := g.PostComment(ctx, "acme/widget", 1, fmt.Sprintf("comment %d", i))
		require.NoError(t, err)
	}
	for limit, want := range map[int]int{10: 10, 51: 51, 100: 51} {
		comments, err := g.FetchComments(ctx, "acme/widget", 1, limit)
		require.NoError(t, err)
		require.Len(t, comments, want, "limit %d", limit)
		for i, c := range comments {
			assert.Equal(t, fmt.Sprintf("comment %d", i), c.Body, "limit %d", limit)
		}
	}
}

// A review request is pending until the reviewer answers; the pull
// request's requested_reviewers lists every reviewer's latest review.
func TestGiteaPendingReviewRequests(t *testing.T) {
	t.Parallel()
	srv := giteatest.New()
	defer srv.Close()
	for _, login := range []string{"coder1", "coder2", "reviewer1"} {
		srv.AddUser("token-"+login, login)
	}
	g, _ := fastGitea(t, srv, giteatest.Token, nil)
	ctx := context.Background()

	pending, err := g.PendingReviewRequests(ctx, "acme/widget", 4)
	require.NoError(t, err)
	assert.Empty(t, pending, "the recorded #4: reviewer1 was asked, then reviewed")
	pr, err := g.FetchPullRequest(ctx, "acme/widget", 4)
	require.NoError(t, err)
	assert.Equal(t, []string{"reviewer1"}, pr.RequestedReviewers, "yet Gitea lists reviewer1 as requested")

	post := func(login, path string, body any) {
		data, err := json.Marshal(body)
		require.NoError(t, err)
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/repos/acme/widget/pulls/6/"+path, bytes.NewReader(data))
		require.NoError(t, err)
		req.Header.Set("Authorization", "token token-"+login)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Less(t, resp.StatusCode, 300, path)
	}
	steps := []struct {
		name      string
		do        func()
		pending   []string
		requested []string
	}{
		{"two asked", func() {
			post("coder1", "requested_reviewers", map[string]any{"reviewers": []string{"coder2", "reviewer1"}})
		},
			[]string{"coder2", "reviewer1"}, []string{"coder2", "reviewer1"}},
		{"asked twice", func() { post("coder1", "requested_reviewers", map[string]any{"reviewers": []string{"coder2"}}) },
			[]string{"coder2", "reviewer1"}, []string{"coder2", "reviewer1"}},
		{"one approves", func() { post("reviewer1", "reviews", map[string]any{"event": "APPROVED"}) },
			[]string{"coder2"}, []string{"coder2", "reviewer1"}},
		{"a draft is no answer", func() { post("coder2", "reviews", map[string]any{"event": "PENDING"}) },
			[]string{"coder2"}, []string{"coder2", "reviewer1"}},
		{"the approver asked again", func() { post("coder1", "requested_reviewers", map[string]any{"reviewers": []string{"reviewer1"}}) },
			[]string{"coder2", "reviewer1"}, []string{"coder2", "reviewer1"}},
		{"both answer", func() {
			post("coder2", "reviews", map[string]any{"event": "COMMENT", "body": "ok"})
			post("reviewer1", "reviews", map[string]any{"event": "REQUEST_CHANGES", "body": "no"})
		}, nil, []string{"coder2", "reviewer1"}},
	}
	for _, step := range steps {
		step.do()
		pending, err := g.PendingReviewRequests(ctx, "acme/widget", 6)
		require.NoError(t, err, step.name)
		assert.Equal(t, step.pending, pending, step.name)
		pr, err := g.FetchPullRequest(ctx, "acme/widget", 6)
		require.NoError(t, err, step.name)
		slices.Sort(pr.RequestedReviewers)
		assert.Equal(t, step.requested, pr.RequestedReviewers, step.name)
	}
	_, err = g.PendingReviewRequests(ctx, "acme/widget", 999)
	require.ErrorIs(t, err, task.ErrNotFound)
}

// A Forgejo is told by its version (…+gitea-1.22.0) or, when that does
// not say, by its own version API; its hooks need no status event.
func TestDetectForge(t *testing.T) {
	t.Parallel()
	plain := func(version string, forgejoAPI bool) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.URL.Path == "/api/v1/version", forgejoAPI && r.URL.Path == "/api/forgejo/v1/version":
				_, _ = fmt.Fprintf(w, `{"version":%q}`, version)
			default:
				http.NotFound(w, r)
			}
		}))
	}
	tests := []struct {
		name string
		srv  func() *httptest.Server
		want Forge
	}{
		{"recorded Gitea 1.25.4", func() *httptest.Server { return giteatest.New().Server }, Forge{Version: "1.25.4"}},
		{"recorded Forgejo 10", func() *httptest.Server {
			return giteatest.NewFrom(giteatest.RecordingDir("forgejo-10.0.0-dev")).Server
		}, Forge{Version: "10.0.0-dev-456d05998231+gitea-1.22.0", Forgejo: true}},
		{"a Forgejo whose version does not say", func() *httptest.Server { return plain("12.0.0", true) }, Forge{Version: "12.0.0", Forgejo: true}},
		{"a Gitea 1.27.3", func() *httptest.Server { return plain("1.27.3", false) }, Forge{Version: "1.27.3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := tt.srv()
			defer srv.Close()
			g, err := New(Config{URL: srv.URL, Token: giteatest.Token, MaxAttempts: 1})
			require.NoError(t, err)
			got, err := g.DetectForge(context.Background())
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, !tt.want.Forgejo, slices.Contains(got.HookEvents(), "status"))
		})
	}
}

func TestRefused(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"not found", &statusError{status: http.StatusNotFound, err: errors.New("404")}, true},
		{"forbidden", &statusError{status: http.StatusForbidden, err: errors.New("403")}, true},
		{"refused token: an operator fixes it", fmt.Errorf("post: %w", ErrUnauthorized), false},
		{"request timeout", &statusError{status: http.StatusRequestTimeout, err: errors.New("408")}, false},
		{"rate limited", &statusError{status: http.StatusTooManyRequests, err: errors.New("429")}, false},
		{"server error", &statusError{status: http.StatusBadGateway, err: errors.New("502")}, false},
		{"no answer", errors.New("connection refused"), false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Refused(tt.err), tt.name)
	}
}
