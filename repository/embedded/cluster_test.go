package embedded

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startSteps are the points of a first start that a test interrupts.
var startSteps = []string{
	stepLocked, stepInitdbRunning, stepInitialised, stepPostgresStarted, stepReady, stepDatabaseCreated,
}

func TestInterruptedStartReturnsAnErrorAndLeavesNothingRunning(t *testing.T) {
	if testing.Short() {
		t.Skip("runs initdb and postgres")
	}
	for _, step := range startSteps {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			state := reachableDir(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c, err := Start(ctx, Options{StateDir: state, NoSync: true, StartTimeout: time.Minute,
				testHook: func(s string) {
					if s == step {
						cancel()
					}
				}})
			if err == nil {
				// Past the last step that looks at the context the start is
				// complete; a caller that was interrupted stops it.
				require.Equal(t, stepDatabaseCreated, step, "only a complete start may succeed")
				require.NoError(t, c.Stop())
			} else {
				require.ErrorIs(t, err, context.Canceled)
				require.NotContains(t, err.Error(), "\n", "one line")
			}
			lock, err := lockStateDir(state)
			require.NoError(t, err, "the state lock is free")
			require.NoError(t, lock.Close())
			pid, _ := postmasterInfo(filepath.Join(state, "postgres", "data"))
			require.False(t, pid > 0 && processAlive(pid), "no postgres left running")
		})
	}
}

func TestPostgresGetsNoSecretsFromMozisEnvironment(t *testing.T) {
	if testing.Short() {
		t.Skip("runs initdb and postgres")
	}
	secrets := map[string]string{
		"MOZI_GITEA_TOKEN":    "gitea-token-6f1c",
		"MOZI_WEBHOOK_SECRET": "webhook-secret-9a2e",
		"MOZI_DATABASE_URL":   "postgres://u:database-password-77b0@h/d",
		"CODER2_GITEA_TOKEN":  "agent-token-31d4",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	// PG* variables must reach neither postgres (the allowed names below
	// leave them out) nor, through pgx's defaults, mozi's own connections.
	t.Setenv("PGDATA", "/nonexistent/pgdata")
	t.Setenv("PGPORT", "1")
	t.Setenv("TZ", "Europe/Berlin")
	c, err := Start(context.Background(), Options{StateDir: reachableDir(t), NoSync: true, Database: "postgres"})
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Stop()) }()

	pid, _ := postmasterInfo(c.DataDir())
	require.Positive(t, pid)
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	require.NoError(t, err)
	environ := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	for k, v := range secrets {
		assert.NotContains(t, string(raw), v, "postgres must not see %s", k)
	}
	var names []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		names = append(names, name)
		allowed := name == "PATH" || name == "HOME" || name == "TZ" || name == "LANG" || strings.HasPrefix(name, "LC_")
		assert.True(t, allowed, "unexpected variable %s in postgres's environment", name)
	}
	assert.Contains(t, names, "PATH")
	assert.Contains(t, environ, "TZ=Europe/Berlin")
}

func TestChildEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		environ []string
		home    string
		want    []string
	}{
		{"keeps locale, zone and path, drops the rest",
			[]string{"PATH=/opt/pg/bin:/usr/bin", "LANG=de_DE.UTF-8", "LC_MESSAGES=C", "LC_ALL=", "TZ=UTC",
				"HOME=/root", "MOZI_GITEA_TOKEN=x", "PGDATA=/d", "PGHOST=/s", "AWS_SECRET_ACCESS_KEY=y", "LCX=1"},
			"/var/lib/postgresql",
			[]string{"PATH=/opt/pg/bin:/usr/bin", "LANG=de_DE.UTF-8", "LC_MESSAGES=C", "LC_ALL=", "TZ=UTC", "HOME=/var/lib/postgresql"}},
		{"a default PATH when mozi has none", nil, "",
			[]string{"PATH=" + defaultPath}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.ElementsMatch(t, tt.want, childEnv(tt.environ, tt.home))
		})
	}
}
