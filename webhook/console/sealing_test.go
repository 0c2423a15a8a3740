package console_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/webhook/console"
)

// sessionIDHash is the stored key of the browser's console session.
func (b *browser) sessionIDHash(t *testing.T) []byte {
	t.Helper()
	h := sha256.Sum256([]byte(sessionCookieOf(t, b)))
	return h[:]
}

// browserWithSession is a browser that presents id as its session
// cookie to the console at base.
func browserWithSession(t *testing.T, f *fixture, base, id string) *browser {
	t.Helper()
	b := f.anonymous(t)
	b.base = base
	u, err := url.Parse(base)
	require.NoError(t, err)
	b.Jar.SetCookies(u, []*http.Cookie{{Name: "mozi_console", Value: id}})
	return b
}

// sessionCookieOf is the browser's session id.
func sessionCookieOf(t *testing.T, b *browser) string {
	t.Helper()
	u, err := url.Parse(b.base)
	require.NoError(t, err)
	for _, c := range b.Jar.Cookies(u) {
		if c.Name == "mozi_console" {
			return c.Value
		}
	}
	t.Fatal("no session cookie")
	return ""
}

// A dump of console_sessions gives out no user's Gitea token: it is
// sealed under a key from the client secret and bound to its session.
func TestConsoleKeepsTheUsersTokenSealed(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false)
	alice := f.signIn(t, "alice", map[string]perm{"acme/app": {pull: true}})
	row, err := f.store.ConsoleSession(ctx, alice.sessionIDHash(t))
	require.NoError(t, err)
	assert.NotContains(t, row.Token, "token-of-alice")
	assert.Regexp(t, `^v1:[A-Za-z0-9+/]+$`, row.Token)
	tk := f.task(t, "acme/app", 1)
	alice.page(t, fmt.Sprintf("/tasks/%d", tk.ID), http.StatusOK) // the sealed token opens: Gitea is asked with it

	t.Run("copied to another session it does not open", func(t *testing.T) {
		forged := sha256.Sum256([]byte("forged-id"))
		require.NoError(t, f.store.CreateConsoleSession(ctx, forged[:], repository.ConsoleSession{Login: "alice",
			Token: row.Token, CSRF: "c", ExpiresAt: row.ExpiresAt}))
		resp := browserWithSession(t, f, f.url, "forged-id").get(t, "/")
		assert.Equal(t, http.StatusFound, resp.StatusCode)
		assert.Equal(t, "/login", resp.Header.Get("Location"))
	})

	t.Run("a rotated client secret signs the user out", func(t *testing.T) {
		srv, err := console.New(console.Config{Store: f.store, GiteaURL: f.gitea.URL, PublicURL: "http://console.test",
			ClientID: "mozi-console", ClientSecret: "rotated-secret"})
		require.NoError(t, err)
		hs := httptest.NewServer(srv.Handler())
		t.Cleanup(hs.Close)
		resp := browserWithSession(t, f, hs.URL, sessionCookieOf(t, alice)).get(t, "/")
		assert.Equal(t, http.StatusFound, resp.StatusCode)
		assert.Equal(t, "/login", resp.Header.Get("Location"))
		_, err = f.store.ConsoleSession(ctx, alice.sessionIDHash(t))
		assert.ErrorIs(t, err, task.ErrNotFound, "the session that cannot be opened is gone")
	})
}
