package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConsoleRegisterCreatesTheOAuthAppAndPrintsItsSecretOnce(t *testing.T) {
	t.Parallel()
	var got struct {
		Name         string   `json:"name"`
		RedirectURIs []string `json:"redirect_uris"`
		Confidential bool     `json:"confidential_client"`
	}
	var auth string
	gitea := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/api/v1/user/applications/oauth2" {
			http.NotFound(w, r)
			return
		}
		auth = r.Header.Get("Authorization")
		_ = json.NewDecoder(r.Body).Decode(&got)
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":7,"name":"mozi console","client_id":"cid-1","client_secret":"gto_secret"}`)
	}))
	defer gitea.Close()
	env := map[string]string{"MOZI_GITEA_URL": gitea.URL, "MOZI_GITEA_TOKEN": "tok"}
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"console", "register", "--redirect-url", "https://mozi.example.com/auth/callback"},
		func(k string) string { return env[k] }, &stdout, &stderr)
	require.NoError(t, err, stderr.String())
	assert.Equal(t, "token tok", auth)
	assert.Equal(t, []string{"https://mozi.example.com/auth/callback"}, got.RedirectURIs)
	assert.True(t, got.Confidential)
	assert.Contains(t, stdout.String(), "client_id: cid-1")
	assert.Equal(t, 1, strings.Count(stdout.String(), "gto_secret"), "the secret, once")
	assert.Contains(t, stdout.String(), "MOZI_CONSOLE_CLIENT_SECRET")
	assert.NotContains(t, stderr.String(), "gto_secret", "never in a log line")
}

func TestConsoleRegisterNeedsARedirect(t *testing.T) {
	t.Parallel()
	env := map[string]string{"MOZI_GITEA_URL": "http://127.0.0.1:1", "MOZI_GITEA_TOKEN": "tok"}
	err := run(context.Background(), []string{"console", "register"}, func(k string) string { return env[k] }, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--redirect-url")
}
