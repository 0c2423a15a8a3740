// Package pgtest gives tests a real, empty PostgreSQL database each: a
// private cluster started once per test binary (the same embedded-cluster
// code that mozi serve uses, so it works as root too), or the server named
// by MOZI_TEST_DATABASE_URL. A migrated template database is built once and
// cloned per test, which takes milliseconds.
//
// Use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
package pgtest

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/embedded"
)

// EnvURL names a PostgreSQL server to use instead of a private cluster. Its
// role must be allowed to create databases.
const EnvURL = "MOZI_TEST_DATABASE_URL"

var (
	mu       sync.Mutex // serialises CREATE DATABASE … TEMPLATE
	admin    *pgxpool.Pool
	baseURL  *url.URL
	template string
	counter  atomic.Int64
	prefix   string
)

// Main runs the tests and tears down what they started. The server and
// the migrated template are set up by the first test that asks for a
// database (a run whose -run selects none starts nothing), or before the
// tests when fuzzing, so the fuzzer's workers share the coordinator's
// server. Pass its result to os.Exit.
func Main(m *testing.M) int {
	if !flag.Parsed() {
		flag.Parse()
	}
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		if err := start(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
			return 1
		}
	}
	code := m.Run()
	if stopServer != nil {
		stopServer()
	}
	return code
}

var (
	startOnce  sync.Once
	startErr   error
	stopServer func()
)

// start sets the server and the template up, once.
func start() error {
	startOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		stopServer, startErr = setup(ctx)
	})
	return startErr
}

func setup(ctx context.Context) (stop func(), err error) {
	prefix = fmt.Sprintf("mozitest_%d_%d", os.Getpid(), time.Now().UnixNano()%1_000_000)
	var (
		adminURL string
		cleanup  []func()
	)
	stop = func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()

	if env := os.Getenv(EnvURL); env != "" {
		adminURL = env
	} else {
		dir, err := os.MkdirTemp("", "mozi-pgtest-")
		if err != nil {
			return stop, fmt.Errorf("create cluster dir: %w", err)
		}
		cleanup = append(cleanup, func() { _ = os.RemoveAll(dir) })
		// As root, PostgreSQL runs as an unprivileged user that must be able
		// to traverse this directory (MkdirTemp makes it 0700).
		if err := os.Chmod(dir, 0o755); err != nil {
			return stop, fmt.Errorf("open up cluster dir: %w", err)
		}
		cluster, err := embedded.Start(ctx, embedded.Options{
			StateDir: dir,
			Database: "postgres",
			NoSync:   true,
			Settings: map[string]string{
				"fsync":              "off",
				"synchronous_commit": "off",
				"full_page_writes":   "off",
				"max_connections":    "300",
			},
			Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			return stop, err
		}
		cleanup = append(cleanup, func() { _ = cluster.Stop() })
		adminURL = cluster.URL()
		// The processes this test binary starts (the fuzzer's workers) use
		// this cluster instead of each starting its own.
		if err := os.Setenv(EnvURL, adminURL); err != nil {
			return stop, fmt.Errorf("share the cluster: %w", err)
		}
		cleanup = append(cleanup, func() { _ = os.Unsetenv(EnvURL) })
	}
	if baseURL, err = url.Parse(adminURL); err != nil {
		return stop, fmt.Errorf("parse %s: invalid URL", EnvURL)
	}
	if admin, err = pgxpool.New(ctx, adminURL); err != nil {
		return stop, fmt.Errorf("connect admin pool: %w", err)
	}
	cleanup = append(cleanup, admin.Close)

	template = prefix + "_template"
	if err := createDatabase(ctx, template, ""); err != nil {
		return stop, err
	}
	cleanup = append(cleanup, func() { dropDatabase(template) })
	pool, err := pgxpool.New(ctx, databaseURL(template))
	if err != nil {
		return stop, fmt.Errorf("connect template: %w", err)
	}
	defer pool.Close()
	migrator, err := repository.NewMigrator(pool)
	if err != nil {
		return stop, err
	}
	defer migrator.Close()
	if _, err := migrator.Up(ctx); err != nil {
		return stop, err
	}
	return stop, nil
}

// URL creates a fresh database with every migration applied and returns its
// connection string; the database is dropped when the test ends.
func URL(t testing.TB) string {
	t.Helper()
	return newDatabase(t, true)
}

// EmptyURL creates a fresh database with no migrations applied.
func EmptyURL(t testing.TB) string {
	t.Helper()
	return newDatabase(t, false)
}

// Store opens a repository.Store on a fresh migrated database.
func Store(t testing.TB) *repository.Store {
	t.Helper()
	store, err := repository.Open(context.Background(), URL(t), repository.Options{MaxConns: 8})
	if err != nil {
		t.Fatalf("pgtest: open store: %v", err)
	}
	t.Cleanup(store.Close)
	return store
}

func newDatabase(t testing.TB, migrated bool) string {
	t.Helper()
	if err := start(); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if admin == nil {
		t.Fatal("pgtest: no server: call pgtest.Main from TestMain")
	}
	from := ""
	if migrated {
		from = template
	}
	name := fmt.Sprintf("%s_%d", prefix, counter.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := createDatabase(ctx, name, from); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { dropDatabase(name) })
	return databaseURL(name)
}

func createDatabase(ctx context.Context, name, from string) error {
	sql := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if from != "" {
		sql += " TEMPLATE " + pgx.Identifier{from}.Sanitize()
	}
	mu.Lock()
	defer mu.Unlock()
	if _, err := admin.Exec(ctx, sql); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

func dropDatabase(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
}

func databaseURL(name string) string {
	u := *baseURL
	u.Path = "/" + name
	return u.String()
}
