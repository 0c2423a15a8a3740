//go:build e2e

package realgitea_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository/gitea/realgitea"
)

func TestMain(m *testing.M) {
	realgitea.Prepare()
	code := m.Run()
	realgitea.StopShared()
	os.Exit(code)
}

type delivery struct {
	event, signature string
	body             []byte
}

// TestE2ERealGitea starts a Gitea, creates a user, a repository with
// files and a webhook, and sees Gitea deliver a signed issue event to
// loopback.
func TestE2ERealGitea(t *testing.T) {
	g := realgitea.Shared(t)
	ctx := context.Background()

	var version struct{ Version string }
	require.NoError(t, g.Call(ctx, realgitea.Token(g.AdminToken), http.MethodGet, "/version", nil, &version))
	in, err := realgitea.Installed()
	require.NoError(t, err)
	if in.Version != "" {
		assert.Equal(t, in.Version, version.Version)
	}

	coder, err := g.CreateUser(ctx, "rg-coder", false)
	require.NoError(t, err)
	var me struct{ Login string }
	require.NoError(t, g.Call(ctx, coder.Credentials(), http.MethodGet, "/user", nil, &me))
	assert.Equal(t, "rg-coder", me.Login)

	repo, err := g.CreateRepo(ctx, "", "rg-widget", map[string]string{"main.go": "package main\n"})
	require.NoError(t, err)
	require.NoError(t, g.AddCollaborator(ctx, repo, coder.Login, "write"))
	var file struct{ Name string }
	require.NoError(t, g.Call(ctx, coder.Credentials(), http.MethodGet, "/repos/"+repo+"/contents/main.go?ref=main", nil, &file))
	assert.Equal(t, "main.go", file.Name)

	got := make(chan delivery, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- delivery{event: r.Header.Get("X-Gitea-Event"), signature: r.Header.Get("X-Gitea-Signature"), body: body}
	}))
	defer hook.Close()
	const secret = "rg-secret"
	_, err = g.AddHook(ctx, repo, hook.URL, secret)
	require.NoError(t, err)

	require.NoError(t, g.Call(ctx, coder.Credentials(), http.MethodPost, "/repos/"+repo+"/issues",
		map[string]any{"title": "Hello", "body": "from the test", "assignees": []string{"rg-coder"}}, nil))
	select {
	case d := <-got:
		assert.Equal(t, "issues", d.event)
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(d.body)
		assert.Equal(t, hex.EncodeToString(mac.Sum(nil)), d.signature)
	case <-time.After(30 * time.Second):
		t.Fatal("Gitea delivered no webhook within 30 s")
	}
}

// TestE2ERealGiteaStopResume stops a Gitea and starts it again on the
// same port with its data.
func TestE2ERealGiteaStopResume(t *testing.T) {
	g := realgitea.Own(t, realgitea.Options{})
	ctx := context.Background()
	u, err := g.CreateUser(ctx, "rg-keeper", false)
	require.NoError(t, err)
	g.Stop()
	require.Error(t, g.Call(ctx, u.Credentials(), http.MethodGet, "/user", nil, nil))
	start := time.Now()
	require.NoError(t, g.Resume(ctx))
	t.Logf("resumed in %s", time.Since(start).Round(time.Millisecond))
	require.NoError(t, g.Call(ctx, u.Credentials(), http.MethodGet, "/user", nil, nil))
}
