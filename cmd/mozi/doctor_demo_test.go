package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/cmd/mozi/internal/config"
	"github.com/moziplus/mozi/repository/pgtest"
)

// The documented example configuration passes doctor as it is: its demo
// secret is only a warning while mozi listens on loopback with no Gitea,
// and its demo agents name no token they would never use.
func TestExampleConfigPassesDoctor(t *testing.T) {
	t.Parallel()
	example, err := filepath.Abs("../../deploy/mozi.example.yaml")
	require.NoError(t, err)
	env := map[string]string{"MOZI_DATABASE_URL": pgtest.URL(t), "MOZI_DATA_DIR": t.TempDir()}
	var out bytes.Buffer
	err = run(context.Background(), []string{"doctor", "--config", example}, func(k string) string { return env[k] }, &out, &out)
	require.NoError(t, err, out.String())
	assert.NotContains(t, out.String(), "FAIL", out.String())
	assert.Contains(t, out.String(), "secret 1 is the example configuration's: fine while mozi listens on loopback")
}

func TestLoopbackDemo(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  func(*config.Config)
		want bool
	}{
		{"loopback, no Gitea", func(*config.Config) {}, true},
		{"localhost", func(c *config.Config) { c.Listen = "localhost:8080" }, true},
		{"IPv6 loopback", func(c *config.Config) { c.Listen = "[::1]:8080" }, true},
		{"every address", func(c *config.Config) { c.Listen = "0.0.0.0:8080" }, false},
		{"no host", func(c *config.Config) { c.Listen = ":8080" }, false},
		{"a Gitea", func(c *config.Config) { c.Gitea.URL = "http://gitea:3000" }, false},
		{"a public URL", func(c *config.Config) { c.Webhook.PublicURL = "http://127.0.0.1:8080/webhooks/gitea" }, false},
		{"repositories", func(c *config.Config) { c.Gitea.Repos = []string{"acme/widget"} }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := &config.Config{Listen: "127.0.0.1:8080"}
			tt.cfg(cfg)
			assert.Equal(t, tt.want, loopbackDemo(cfg))
		})
	}
}
