//go:build e2e

package console_test

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/gitea/realgitea"
	"github.com/moziplus/mozi/repository/pgtest"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/webhook/console"
)

// TestE2EConsoleSignInThroughGitea registers the console in a real Gitea
// with `mozi console register`'s call, signs two users in through Gitea's
// own sign-in and consent pages (as a browser without JavaScript would),
// and checks what each may see and do: the writer stops a task of the
// private repository, the outsider sees none of its tasks.
func TestE2EConsoleSignInThroughGitea(t *testing.T) {
	ctx := context.Background()
	g := realgitea.Shared(t)
	store := pgtest.Store(t)
	admin := realgitea.Token(g.AdminToken)

	writer, err := g.CreateUser(ctx, "console-writer", false)
	require.NoError(t, err)
	outsider, err := g.CreateUser(ctx, "console-outsider", false)
	require.NoError(t, err)
	private, err := g.CreateRepo(ctx, "", "console-private", nil)
	require.NoError(t, err)
	require.NoError(t, g.Call(ctx, admin, http.MethodPatch, "/repos/"+private, map[string]any{"private": true}, nil))
	require.NoError(t, g.AddCollaborator(ctx, private, writer.Login, "write"))
	public, err := g.CreateRepo(ctx, "", "console-public", nil)
	require.NoError(t, err)

	secretTask, err := store.CreateTask(ctx, repository.NewTask{Repo: private, IssueNumber: 1,
		ActionType: task.ActionIssueAssigned, Agent: "coder", Priority: task.DefaultPriority})
	require.NoError(t, err)
	publicTask, err := store.CreateTask(ctx, repository.NewTask{Repo: public, IssueNumber: 1,
		ActionType: task.ActionIssueAssigned, Agent: "coder", Priority: task.DefaultPriority})
	require.NoError(t, err)

	var handler http.Handler
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	defer hs.Close()
	app, err := console.Register(ctx, http.DefaultClient, g.URL, g.AdminToken, "mozi console e2e", hs.URL+"/auth/callback")
	require.NoError(t, err)
	srv, err := console.New(console.Config{Store: store, GiteaURL: g.URL, PublicURL: hs.URL,
		ClientID: app.ClientID, ClientSecret: app.ClientSecret})
	require.NoError(t, err)
	handler = srv.Handler()

	anonymous := newRealBrowser(t)
	resp, err := anonymous.Get(hs.URL + fmt.Sprintf("/tasks/%d", publicTask.ID))
	require.NoError(t, err)
	body := readBody(t, resp)
	assert.Contains(t, resp.Request.URL.String(), g.URL+"/user/login", "an anonymous user is sent to sign in with Gitea")
	assert.NotContains(t, body, "console-public#1")

	w := newRealBrowser(t)
	w.signIn(t, g, hs.URL, writer)
	list := w.page(t, hs.URL+"/")
	assert.True(t, listed(list, secretTask.ID), "the writer reads the private repository")
	assert.True(t, listed(list, publicTask.ID))
	taskPage := w.page(t, hs.URL+fmt.Sprintf("/tasks/%d", secretTask.ID))
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(taskPage)
	require.NotNil(t, csrf)
	require.Contains(t, taskPage, `id="stop"`)
	resp, err = w.PostForm(hs.URL+fmt.Sprintf("/tasks/%d/stop", secretTask.ID), url.Values{"csrf": {csrf[1]}})
	require.NoError(t, err)
	readBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, "stop, then back to the task page")
	got, err := store.Task(ctx, secretTask.ID)
	require.NoError(t, err)
	assert.Equal(t, task.StatusCancelled, got.Status)

	o := newRealBrowser(t)
	o.signIn(t, g, hs.URL, outsider)
	list = o.page(t, hs.URL+"/")
	assert.False(t, listed(list, secretTask.ID), "the outsider sees none of the private repository's tasks")
	assert.True(t, listed(list, publicTask.ID), "but the public repository's")
	resp, err = o.Get(hs.URL + fmt.Sprintf("/tasks/%d", secretTask.ID))
	require.NoError(t, err)
	readBody(t, resp)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	pubPage := o.page(t, hs.URL+fmt.Sprintf("/tasks/%d", publicTask.ID))
	assert.NotContains(t, pubPage, `id="stop"`, "reading a public repository is no write access")
}

type realBrowser struct{ *http.Client }

func newRealBrowser(t *testing.T) *realBrowser {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &realBrowser{&http.Client{Jar: jar}}
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func (b *realBrowser) page(t *testing.T, u string) string {
	t.Helper()
	resp, err := b.Get(u)
	require.NoError(t, err)
	body := readBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, "GET %s: %s", u, body)
	return body
}

var (
	formRe   = regexp.MustCompile(`(?s)<form[^>]*action="([^"]*)"[^>]*>(.*?)</form>`)
	hiddenRe = regexp.MustCompile(`<input[^>]*type="hidden"[^>]*>`)
	attrRe   = regexp.MustCompile(`(name|value)="([^"]*)"`)
)

// form finds the form whose action contains action and returns its
// absolute action URL and hidden fields.
func form(t *testing.T, base *url.URL, page, action string) (string, url.Values) {
	t.Helper()
	for _, m := range formRe.FindAllStringSubmatch(page, -1) {
		if !strings.Contains(m[1], action) {
			continue
		}
		v := url.Values{}
		for _, in := range hiddenRe.FindAllString(m[2], -1) {
			var name, value string
			for _, a := range attrRe.FindAllStringSubmatch(in, -1) {
				if a[1] == "name" {
					name = html.UnescapeString(a[2])
				} else {
					value = html.UnescapeString(a[2])
				}
			}
			if name != "" {
				v.Set(name, value)
			}
		}
		to, err := base.Parse(html.UnescapeString(m[1]))
		require.NoError(t, err)
		return to.String(), v
	}
	t.Fatalf("no form with action %q in:\n%s", action, page)
	return "", nil
}

// signIn opens the console, is sent to Gitea, signs in there with the
// user's password, grants the console access and comes back signed in.
func (b *realBrowser) signIn(t *testing.T, g *realgitea.Server, consoleURL string, u realgitea.User) {
	t.Helper()
	resp, err := b.Get(consoleURL + "/login")
	require.NoError(t, err)
	page := readBody(t, resp)
	require.Contains(t, resp.Request.URL.Path, "/user/login", "Gitea asks who signs in")
	action, fields := form(t, resp.Request.URL, page, "/user/login")
	fields.Set("user_name", u.Login)
	fields.Set("password", u.Password)
	resp, err = b.PostForm(action, fields)
	require.NoError(t, err)
	page = readBody(t, resp)
	if strings.Contains(resp.Request.URL.Path, "/login/oauth/authorize") {
		action, fields = form(t, resp.Request.URL, page, "/login/oauth/grant")
		fields.Set("granted", "true")
		resp, err = b.PostForm(action, fields)
		require.NoError(t, err)
		page = readBody(t, resp)
	}
	require.Equal(t, http.StatusOK, resp.StatusCode, "back at %s: %s", resp.Request.URL, page)
	require.True(t, strings.HasPrefix(resp.Request.URL.String(), consoleURL), "back at the console, not %s", resp.Request.URL)
	require.Contains(t, page, `<span id="who">`+u.Login+`</span>`)
}
