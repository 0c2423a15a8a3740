package console_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/pgtest"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/webhook/console"
)

type fixture struct {
	store *repository.Store
	gitea *fakeGitea
	url   string
}

func newFixture(t *testing.T, anonymousRead bool) *fixture {
	t.Helper()
	f := &fixture{store: pgtest.Store(t), gitea: newFakeGitea(t)}
	srv, err := console.New(console.Config{Store: f.store, GiteaURL: f.gitea.URL, PublicURL: "http://console.test",
		ClientID: "mozi-console", ClientSecret: f.gitea.secret, AnonymousRead: anonymousRead,
		PollEvery: 5 * time.Millisecond})
	require.NoError(t, err)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	f.url = hs.URL
	return f
}

func (f *fixture) task(t *testing.T, repo string, issue int) task.Task {
	t.Helper()
	created, err := f.store.CreateTask(context.Background(), repository.NewTask{Repo: repo, IssueNumber: issue,
		ActionType: task.ActionIssueAssigned, Agent: "coder", Priority: task.DefaultPriority})
	require.NoError(t, err)
	return created
}

func (f *fixture) status(t *testing.T, id int64) task.Status {
	t.Helper()
	got, err := f.store.Task(context.Background(), id)
	require.NoError(t, err)
	return got.Status
}

// browser is one user's cookie jar; it does not follow redirects, so
// tests see where the console sends it.
type browser struct {
	*http.Client
	base string
	csrf string
}

func (f *fixture) anonymous(t *testing.T) *browser {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &browser{base: f.url, Client: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// signIn goes through the authorization-code flow as Gitea's consent
// page would send the user back.
func (f *fixture) signIn(t *testing.T, login string, perms map[string]perm) *browser {
	t.Helper()
	b := f.anonymous(t)
	code := f.gitea.user(login, perms)
	resp := b.get(t, "/login")
	require.Equal(t, http.StatusFound, resp.StatusCode)
	to, err := url.Parse(resp.Header.Get("Location"))
	require.NoError(t, err)
	require.Equal(t, f.gitea.URL+"/login/oauth/authorize", to.Scheme+"://"+to.Host+to.Path)
	assert.Equal(t, "mozi-console", to.Query().Get("client_id"))
	resp = b.get(t, "/auth/callback?"+url.Values{"code": {code}, "state": {to.Query().Get("state")}}.Encode())
	require.Equal(t, http.StatusFound, resp.StatusCode, "sign-in")
	page := b.page(t, "/", http.StatusOK)
	require.Contains(t, page, `<span id="who">`+login+`</span>`)
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	require.NotNil(t, m, "a page of a signed-in user carries the CSRF token")
	b.csrf = m[1]
	return b
}

func (b *browser) get(t *testing.T, path string) *http.Response {
	t.Helper()
	resp, err := b.Get(b.base + path)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func (b *browser) page(t *testing.T, path string, want int) string {
	t.Helper()
	resp := b.get(t, path)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, want, resp.StatusCode, "GET %s: %s", path, body)
	return string(body)
}

func (b *browser) post(t *testing.T, path, csrf string) int {
	t.Helper()
	resp, err := b.PostForm(b.base+path, url.Values{"csrf": {csrf}})
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func listed(page string, id int64) bool {
	return strings.Contains(page, fmt.Sprintf(`data-task="%d"`, id))
}

func TestConsoleRefusesAnAnonymousUser(t *testing.T) {
	f := newFixture(t, false)
	tk := f.task(t, "acme/app", 1)
	b := f.anonymous(t)
	for _, path := range []string{"/", "/tasks/" + fmt.Sprint(tk.ID), "/deliveries", "/agents"} {
		resp := b.get(t, path)
		assert.Equal(t, http.StatusFound, resp.StatusCode, path)
		assert.Equal(t, "/login", resp.Header.Get("Location"), path)
	}
	assert.Equal(t, http.StatusUnauthorized, b.get(t, fmt.Sprintf("/tasks/%d/runs/1/stream", tk.ID)).StatusCode)
	assert.Equal(t, http.StatusUnauthorized, b.post(t, fmt.Sprintf("/tasks/%d/stop", tk.ID), ""))
	assert.Equal(t, task.StatusPending, f.status(t, tk.ID))
}

func TestConsoleAnonymousReadIsReadOnly(t *testing.T) {
	f := newFixture(t, true)
	tk := f.task(t, "acme/app", 1)
	b := f.anonymous(t)
	assert.True(t, listed(b.page(t, "/", http.StatusOK), tk.ID))
	assert.Contains(t, b.page(t, fmt.Sprintf("/tasks/%d", tk.ID), http.StatusOK), "acme/app#1")
	assert.Equal(t, http.StatusUnauthorized, b.post(t, fmt.Sprintf("/tasks/%d/stop", tk.ID), ""))
	assert.Equal(t, task.StatusPending, f.status(t, tk.ID))
}

func TestConsoleSignInRefusesAForeignState(t *testing.T) {
	f := newFixture(t, false)
	code := f.gitea.user("mallory", nil)
	b := f.anonymous(t)
	b.get(t, "/login") // a state cookie of this browser's own
	resp := b.get(t, "/auth/callback?"+url.Values{"code": {code}, "state": {"someone-elses"}}.Encode())
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Equal(t, http.StatusFound, b.get(t, "/").StatusCode, "still signed out")
}

func TestConsoleShowsOnlyRepositoriesTheUserCanRead(t *testing.T) {
	f := newFixture(t, false)
	open := f.task(t, "acme/open", 1)
	secret := f.task(t, "acme/secret", 2)
	_, err := f.store.InsertDeliveries(context.Background(), []repository.Delivery{
		{ID: "open-delivery", Event: "issues", Repo: "acme/open", Headers: map[string]string{}, Body: []byte(`{}`)},
		{ID: "secret-delivery", Event: "issues", Repo: "acme/secret", Headers: map[string]string{}, Body: []byte(`{}`)}})
	require.NoError(t, err)
	bob := f.signIn(t, "bob", map[string]perm{"acme/open": {pull: true}})

	list := bob.page(t, "/", http.StatusOK)
	assert.True(t, listed(list, open.ID))
	assert.False(t, listed(list, secret.ID))
	assert.NotContains(t, list, "acme/secret", "not even in the repository filter")
	assert.False(t, listed(bob.page(t, "/?repo=acme/secret", http.StatusOK), secret.ID))
	bob.page(t, fmt.Sprintf("/tasks/%d", secret.ID), http.StatusNotFound)
	bob.page(t, fmt.Sprintf("/tasks/%d/runs/1", secret.ID), http.StatusNotFound)
	bob.page(t, fmt.Sprintf("/tasks/%d/runs/1/stream", secret.ID), http.StatusNotFound)
	deliveries := bob.page(t, "/deliveries", http.StatusOK)
	assert.Contains(t, deliveries, "open-delivery")
	assert.NotContains(t, deliveries, "secret-delivery")
	page := bob.page(t, fmt.Sprintf("/tasks/%d", open.ID), http.StatusOK)
	assert.NotContains(t, page, `id="stop"`, "no write access: no stop button")
}

func TestConsoleActionsNeedTheCSRFTokenAndWriteAccess(t *testing.T) {
	f := newFixture(t, false)
	tk := f.task(t, "acme/app", 1)
	alice := f.signIn(t, "alice", map[string]perm{"acme/app": {pull: true, push: true}})
	bob := f.signIn(t, "bob", map[string]perm{"acme/app": {pull: true}})
	stop := fmt.Sprintf("/tasks/%d/stop", tk.ID)

	assert.Equal(t, http.StatusForbidden, alice.post(t, stop, ""), "no CSRF token")
	assert.Equal(t, http.StatusForbidden, alice.post(t, stop, bob.csrf), "another session's token")
	assert.Equal(t, http.StatusForbidden, bob.post(t, stop, bob.csrf), "read access only")
	assert.Equal(t, task.StatusPending, f.status(t, tk.ID), "nothing refused took effect")

	assert.Contains(t, alice.page(t, fmt.Sprintf("/tasks/%d", tk.ID), http.StatusOK), `id="stop"`)
	assert.Equal(t, http.StatusSeeOther, alice.post(t, stop, alice.csrf))
	assert.Equal(t, task.StatusCancelled, f.status(t, tk.ID))
	assert.Equal(t, http.StatusConflict, alice.post(t, stop, alice.csrf), "stopped already")

	retry := fmt.Sprintf("/tasks/%d/retry", tk.ID)
	assert.Equal(t, http.StatusForbidden, bob.post(t, retry, bob.csrf))
	assert.Equal(t, http.StatusSeeOther, alice.post(t, retry, alice.csrf))
	assert.Equal(t, task.StatusPending, f.status(t, tk.ID))

	events, err := f.store.TaskEvents(context.Background(), tk.ID)
	require.NoError(t, err)
	require.Len(t, events, 3)
	assert.Equal(t, "console:alice", events[1].Actor)
	assert.Equal(t, "stopped from the console by alice", events[1].LastError)
	assert.Equal(t, "console:alice", events[2].Actor)
	history := alice.page(t, fmt.Sprintf("/tasks/%d", tk.ID), http.StatusOK)
	assert.Contains(t, history, "pending → cancelled")
	assert.Contains(t, history, "console:alice")
}

func TestConsoleRequeuesAParkedDelivery(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false)
	_, err := f.store.InsertDeliveries(ctx, []repository.Delivery{
		{ID: "d-parked", Event: "issues", Repo: "acme/app", Headers: map[string]string{}, Body: []byte(`{}`)}})
	require.NoError(t, err)
	_, _, err = f.store.ProcessNextDelivery(ctx, repository.RetryPolicy{}, func(context.Context, *repository.Tx, repository.Delivery) (repository.DeliveryResult, error) {
		return repository.DeliveryResult{}, fmt.Errorf("a payload no rule understands: %w", repository.ErrPermanent)
	})
	require.Error(t, err)
	alice := f.signIn(t, "alice", map[string]perm{"acme/app": {pull: true, push: true}})
	page := alice.page(t, "/deliveries?failed=1", http.StatusOK)
	assert.Contains(t, page, "d-parked")
	assert.Contains(t, page, "a payload no rule understands")

	assert.Equal(t, http.StatusForbidden, alice.post(t, "/deliveries/d-parked/requeue", ""))
	assert.Equal(t, http.StatusSeeOther, alice.post(t, "/deliveries/d-parked/requeue", alice.csrf))
	d, err := f.store.Delivery(ctx, "d-parked")
	require.NoError(t, err)
	assert.Equal(t, "", d.Outcome, "waiting in the inbox again")
}

// The run page's stream sends each line the agent writes as it writes
// it, and ends with the outcome once the run is recorded as over.
func TestConsoleStreamsARunsOutputLive(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false)
	tk := f.task(t, "acme/app", 1)
	res, err := f.store.Apply(ctx, tk.ID, task.EventClaim, repository.Change{LeaseOwner: "r1"})
	require.NoError(t, err)
	require.True(t, res.Applied)
	claimed, err := f.store.Task(ctx, tk.ID)
	require.NoError(t, err)
	logPath := filepath.Join(t.TempDir(), "run.log")
	require.NoError(t, os.WriteFile(logPath, []byte("before the page\n"), 0o600))
	a, started, err := f.store.StartRun(ctx, claimed, "r1", logPath)
	require.NoError(t, err)
	require.True(t, started)

	alice := f.signIn(t, "alice", map[string]perm{"acme/app": {pull: true}})
	run := alice.page(t, fmt.Sprintf("/tasks/%d/runs/%d", tk.ID, a.Attempt), http.StatusOK)
	assert.Contains(t, run, "before the page")
	assert.Contains(t, run, fmt.Sprintf("/stream?from=%d", len("before the page\n")), "the stream goes on where the page ends")

	resp := alice.get(t, fmt.Sprintf("/tasks/%d/runs/%d/stream?from=%d", tk.ID, a.Attempt, len("before the page\n")))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	events := sseEvents(resp.Body)

	logFile, err := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	defer logFile.Close()
	_, err = logFile.WriteString("first line\nsecond ")
	require.NoError(t, err)
	assert.Equal(t, sse{"line", "first line"}, <-events)
	_, err = logFile.WriteString("line\n")
	require.NoError(t, err)
	assert.Equal(t, sse{"line", "second line"}, <-events, "a line is sent once it is whole")

	exit := 0
	a.Outcome, a.ExitCode = "succeeded", &exit
	require.NoError(t, f.store.FinishAttempt(ctx, a))
	assert.Equal(t, sse{"end", "succeeded"}, <-events)
	_, open := <-events
	assert.False(t, open, "the stream ends with the run")
}

type sse struct{ event, data string }

// sseEvents reads server-sent events until the body ends (then closes
// the channel).
func sseEvents(body io.Reader) <-chan sse {
	out := make(chan sse, 16)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(body)
		var ev sse
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				out <- ev
				ev = sse{}
			case strings.HasPrefix(line, "event: "):
				ev.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return out
}

// A token Gitea no longer accepts (revoked, or expired before the
// session) sends the user to sign in again instead of failing.
func TestConsoleSendsAUserWhoseTokenGiteaRefusesToSignIn(t *testing.T) {
	f := newFixture(t, false)
	alice := f.signIn(t, "alice", map[string]perm{"acme/app": {pull: true, push: true}})
	f.gitea.revoke("alice")
	// A repository the console has not asked Gitea about for this session
	// (answers are cached for 30 s).
	tk := f.task(t, "acme/app", 1)
	resp := alice.get(t, fmt.Sprintf("/tasks/%d", tk.ID))
	assert.Equal(t, http.StatusFound, resp.StatusCode)
	assert.Equal(t, "/login", resp.Header.Get("Location"))
	assert.Equal(t, http.StatusUnauthorized, alice.post(t, fmt.Sprintf("/tasks/%d/stop", tk.ID), alice.csrf))
	assert.Equal(t, task.StatusPending, f.status(t, tk.ID))
}

// TestConsoleAsksGiteaAboutManyRepositoriesAtOnce: a user's first page
// over many repositories asks Gitea about them concurrently, and still
// shows exactly the readable ones.
func TestConsoleAsksGiteaAboutManyRepositoriesAtOnce(t *testing.T) {
	f := newFixture(t, false)
	perms := map[string]perm{}
	var readable, hidden []task.Task
	for i := range 12 {
		repo := fmt.Sprintf("acme/many%d", i)
		tk := f.task(t, repo, 1)
		if i%2 == 0 {
			perms[repo] = perm{pull: true}
			readable = append(readable, tk)
		} else {
			hidden = append(hidden, tk)
		}
	}
	f.gitea.mu.Lock()
	f.gitea.overlap = 2 * time.Second
	f.gitea.mu.Unlock()
	bob := f.signIn(t, "bob", perms) // its first page asks about the 12

	f.gitea.mu.Lock()
	most := f.gitea.maxInFlight
	f.gitea.mu.Unlock()
	assert.Greater(t, most, 1, "the permission questions overlap")
	list := bob.page(t, "/", http.StatusOK)
	for _, tk := range readable {
		assert.True(t, listed(list, tk.ID), "%s", tk.Repo)
	}
	for _, tk := range hidden {
		assert.False(t, listed(list, tk.ID), "%s", tk.Repo)
	}
}
