package embedded

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// childStepEnv makes the test binary a mozi that dies at one step of Start:
// its value is "STEP STATE_DIR".
const childStepEnv = "MOZI_EMBEDDED_TEST_DIE_AT"

func TestMain(m *testing.M) {
	if spec := os.Getenv(childStepEnv); spec != "" {
		os.Exit(dieDuringStart(spec))
	}
	code := m.Run()
	if fixtures.root != "" {
		_ = os.RemoveAll(fixtures.root)
	}
	os.Exit(code)
}

// dieDuringStart starts a cluster and SIGKILLs its own process when Start
// reaches the step: a mozi killed there has no chance to clean anything up.
func dieDuringStart(spec string) int {
	step, dir, _ := strings.Cut(spec, " ")
	_, err := Start(context.Background(), Options{StateDir: dir, NoSync: true,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
		testHook: func(s string) {
			if s == step {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal is on its way
			}
		}})
	fmt.Fprintf(os.Stderr, "Start returned before step %s: %v\n", step, err)
	return 3
}

// startSteps are the points of a first start that a test interrupts.
var startSteps = []string{
	stepLocked, stepInitdbRunning, stepInitdbDone, stepInitialised,
	stepPostgresStarted, stepReady, stepDatabaseCreated,
}

func TestFirstStartInterruptedAtAnyStepRecovers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs initdb and postgres")
	}
	type interrupt struct {
		name string
		// first makes the first start stop at step.
		first func(t *testing.T, state, step string)
	}
	cancelAt := interrupt{"cancel", func(t *testing.T, state, step string) {
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
			return
		}
		require.ErrorIs(t, err, context.Canceled)
		require.NotContains(t, err.Error(), "\n", "one line")
		pid, _ := postmasterInfo(filepath.Join(state, "postgres", "data"))
		require.False(t, pid > 0 && processAlive(pid), "no postgres left running")
	}}
	killAt := interrupt{"kill", func(t *testing.T, state, step string) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childStepEnv+"="+step+" "+state)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, stderr.String())
		ws := exit.Sys().(syscall.WaitStatus)
		require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "child must die at %s: %s", step, stderr.String())
		// A supervisor restarts mozi once its processes are gone (systemd
		// waits for the whole cgroup); the parent-death signals end them.
		waitNoProcessUnder(t, state)
	}}

	for _, how := range []interrupt{cancelAt, killAt} {
		for _, step := range startSteps {
			t.Run(how.name+"/"+step, func(t *testing.T) {
				t.Parallel()
				state := reachableDir(t)
				how.first(t, state, step)

				logger, logs := testLogger()
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				c, err := Start(ctx, Options{StateDir: state, NoSync: true, Logger: logger})
				require.NoError(t, err, logs.String())
				defer func() { require.NoError(t, c.Stop()) }()
				requireQueryWorks(t, c.URL())
				// Only a killed initdb leaves something to clean up; anything
				// later left a complete cluster.
				wantHalfMade := 0
				if how.name == "kill" && (step == stepInitdbRunning || step == stepInitdbDone) {
					wantHalfMade = 1
					assert.Contains(t, logs.String(), "leftover initdb directory")
				}
				assert.Equal(t, wantHalfMade, strings.Count(logs.String(), "half-made"), logs.String())
				leftovers, _ := filepath.Glob(filepath.Join(state, "postgres", tempDataPrefix+"*"))
				assert.Empty(t, leftovers, "no initdb directory is left behind")
			})
		}
	}
}

func TestHalfMadeClusterIsRecreated(t *testing.T) {
	if testing.Short() {
		t.Skip("runs initdb and postgres")
	}
	tests := []struct {
		name string
		// make builds what an interrupted first start of an older mozi, or of
		// this one, left in pgRoot (S/postgres).
		make  func(t *testing.T, pgRoot string)
		found string
	}{
		{"empty data directory", func(t *testing.T, pgRoot string) {
			require.NoError(t, os.MkdirAll(filepath.Join(pgRoot, "data"), 0o700))
		}, "no PG_VERSION"},
		{"initdb stopped before PG_VERSION", func(t *testing.T, pgRoot string) {
			for _, d := range []string{"global", "base", "pg_wal/archive_status", "pg_xact"} {
				require.NoError(t, os.MkdirAll(filepath.Join(pgRoot, "data", d), 0o700))
			}
		}, "no PG_VERSION"},
		{"initdb stopped during bootstrap", func(t *testing.T, pgRoot string) {
			copyCluster(t, fixture(t, fixtureComplete), filepath.Join(pgRoot, "data"))
			for _, f := range []string{"global/pg_control", "base/1/PG_VERSION"} {
				require.NoError(t, os.Remove(filepath.Join(pgRoot, "data", f)))
			}
			for _, d := range []string{"4", "5"} {
				require.NoError(t, os.RemoveAll(filepath.Join(pgRoot, "data", "base", d)))
			}
		}, "template1"},
		{"initdb stopped before creating the postgres database", func(t *testing.T, pgRoot string) {
			copyCluster(t, fixture(t, fixtureNoPostgres), filepath.Join(pgRoot, "data"))
		}, "none besides the templates"},
		{"leftover initdb directory", func(t *testing.T, pgRoot string) {
			copyCluster(t, fixture(t, fixtureComplete), filepath.Join(pgRoot, tempDataPrefix+"12345"))
		}, "leftover"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			state := reachableDir(t)
			pgRoot := filepath.Join(state, "postgres")
			require.NoError(t, os.MkdirAll(pgRoot, 0o700))
			tt.make(t, pgRoot)
			chownToRunUser(t, pgRoot)

			logger, logs := testLogger()
			began := time.Now()
			c, err := Start(context.Background(), Options{StateDir: state, NoSync: true, Logger: logger,
				StartTimeout: time.Minute})
			require.NoError(t, err, logs.String())
			defer func() { require.NoError(t, c.Stop()) }()
			require.Less(t, time.Since(began), 30*time.Second, "no waiting for the start timeout")
			requireQueryWorks(t, c.URL())

			var said []string
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, "half-made") {
					said = append(said, line)
				}
			}
			require.Len(t, said, 1, "one line says what was found: %s", logs)
			assert.Contains(t, said[0], tt.found)
			assert.Contains(t, said[0], "recreating")
			leftovers, _ := filepath.Glob(filepath.Join(pgRoot, tempDataPrefix+"*"))
			assert.Empty(t, leftovers)
		})
	}
}

func TestCompletedClusterIsNeverRecreated(t *testing.T) {
	if testing.Short() {
		t.Skip("runs initdb and postgres")
	}
	tests := []struct {
		name    string
		make    func(t *testing.T, data string)
		wantErr string
	}{
		{"mozi's database without the postgres database", func(t *testing.T, data string) {
			copyCluster(t, fixture(t, fixtureMoziNoPostgres), data)
		}, `has no "postgres" database but holds mozi`},
		{"files but no PG_VERSION", func(t *testing.T, data string) {
			require.NoError(t, os.MkdirAll(data, 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(data, "notes.txt"), []byte("mine"), 0o600))
		}, "no PG_VERSION but holds files"},
		{"databases but no template1", func(t *testing.T, data string) {
			copyCluster(t, fixture(t, fixtureComplete), data)
			require.NoError(t, os.Remove(filepath.Join(data, "base", "1", "PG_VERSION")))
		}, "base/1/PG_VERSION is missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			state := reachableDir(t)
			data := filepath.Join(state, "postgres", "data")
			require.NoError(t, os.MkdirAll(filepath.Dir(data), 0o700))
			tt.make(t, data)
			// A file of our own shows whether the directory survived.
			keep := filepath.Join(data, "keep-me")
			require.NoError(t, os.WriteFile(keep, []byte("x"), 0o600))
			chownToRunUser(t, filepath.Dir(data))

			began := time.Now()
			_, err := Start(context.Background(), Options{StateDir: state, NoSync: true, StartTimeout: time.Minute})
			require.Error(t, err)
			require.Less(t, time.Since(began), 30*time.Second, "fails fast, not at the start timeout")
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.NotContains(t, err.Error(), "\n", "one line")
			assert.FileExists(t, keep, "the cluster is left alone")
		})
	}
}

func TestPostgresExitDuringStartupSaysWhyInOneLine(t *testing.T) {
	if testing.Short() {
		t.Skip("runs initdb and postgres")
	}
	t.Parallel()
	state := reachableDir(t)
	c, err := Start(context.Background(), Options{StateDir: state, NoSync: true, Database: "postgres"})
	require.NoError(t, err)
	require.NoError(t, c.Stop())
	logPath := filepath.Join(state, "postgres", "postgres.log")
	f, err := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("2020-01-01 00:00:00 UTC [1] FATAL:  an old failure\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())

	began := time.Now()
	_, err = Start(context.Background(), Options{StateDir: state, NoSync: true, StartTimeout: time.Minute,
		Settings: map[string]string{"shared_buffers": "lots"}})
	require.Error(t, err)
	require.Less(t, time.Since(began), 30*time.Second)
	msg := err.Error()
	assert.Contains(t, msg, "postgres exited during start-up")
	assert.Contains(t, msg, `invalid value for parameter "shared_buffers": "lots"`)
	assert.NotContains(t, msg, "an old failure", "only this start's lines")
	assert.NotContains(t, msg, "\n")
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

// Stopped clusters that the tests copy, made once per test binary.
const (
	// fixtureComplete finished initialisation.
	fixtureComplete = "complete"
	// fixtureNoPostgres lacks the postgres database and holds no other:
	// what initdb leaves when it is stopped before its last step.
	fixtureNoPostgres = "no-postgres"
	// fixtureMoziNoPostgres lacks the postgres database but holds mozi's,
	// with a table: a cluster that held data.
	fixtureMoziNoPostgres = "mozi-no-postgres"
)

var fixtures struct {
	sync.Mutex
	dirs map[string]string
	root string
}

// fixture returns the PGDATA of a fixture cluster; copy it, never change it.
func fixture(t *testing.T, name string) string {
	t.Helper()
	fixtures.Lock()
	defer fixtures.Unlock()
	if dir, ok := fixtures.dirs[name]; ok {
		return dir
	}
	if fixtures.root == "" {
		root, err := os.MkdirTemp("", "mozi-embedded-fixtures-")
		require.NoError(t, err)
		require.NoError(t, os.Chmod(root, 0o755))
		fixtures.root = root
		fixtures.dirs = map[string]string{}
	}
	state := filepath.Join(fixtures.root, name)
	ctx := context.Background()
	c, err := Start(ctx, Options{StateDir: state, NoSync: true, Database: "postgres"})
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Stop()) }()
	run := func(db, sql string) {
		conn, err := pgx.Connect(ctx, c.DatabaseURL(db))
		require.NoError(t, err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	switch name {
	case fixtureComplete:
	case fixtureNoPostgres:
		run("template1", "DROP DATABASE postgres")
	case fixtureMoziNoPostgres:
		run("template1", "CREATE DATABASE mozi")
		run("mozi", "CREATE TABLE kept (x int); INSERT INTO kept VALUES (1)")
		run("template1", "DROP DATABASE postgres")
	default:
		t.Fatalf("no fixture %s", name)
	}
	fixtures.dirs[name] = c.DataDir()
	return c.DataDir()
}

// copyCluster copies a stopped cluster's PGDATA, keeping owners and modes.
func copyCluster(t *testing.T, from, to string) {
	t.Helper()
	out, err := exec.Command("cp", "-a", from, to).CombinedOutput()
	require.NoError(t, err, string(out))
}

// chownToRunUser gives dir's tree to the user PostgreSQL runs as, as an
// earlier mozi would have.
func chownToRunUser(t *testing.T, dir string) {
	t.Helper()
	u, err := resolveRunUser("")
	require.NoError(t, err)
	if u == nil {
		return
	}
	require.NoError(t, filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, u.uid, u.gid)
	}))
}

func requireQueryWorks(t *testing.T, url string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE TABLE t (x int); INSERT INTO t VALUES (1)")
	require.NoError(t, err)
	var n int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n))
	require.Equal(t, 1, n)
}

// waitNoProcessUnder waits until no process works in dir (postgres and
// initdb's backends chdir into their data directory).
func waitNoProcessUnder(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		busy := ""
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
			if err == nil && strings.HasPrefix(cwd, dir) {
				busy = e.Name()
			}
		}
		if busy == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %s still works in %s", busy, dir)
		}
		time.Sleep(20 * time.Millisecond) // polling /proc; nothing to wait on
	}
}

type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func testLogger() (*slog.Logger, *logBuffer) {
	b := &logBuffer{}
	return slog.New(slog.NewTextHandler(b, nil)), b
}
