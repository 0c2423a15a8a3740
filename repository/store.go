package repository

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/moziplus/mozi/repository/task"
)

// Store is mozi's PostgreSQL-backed execution state. It is safe for
// concurrent use. Its Queries run on the connection pool, each statement on
// its own; InTx gives a Tx, whose Queries run in one transaction.
type Store struct {
	Queries
	pool         *pgxpool.Pool
	logger       *slog.Logger
	clock        Clock
	onTransition func(ev task.Event, to task.Status, n int)
}

// ObserveTransitions makes the store report every committed state
// transition to fn (metrics). Call it before the store is used.
func (s *Store) ObserveTransitions(fn func(ev task.Event, to task.Status, n int)) {
	s.onTransition = fn
}

func (s *Store) observe(ev task.Event, to task.Status, n int) {
	if s.onTransition != nil && n > 0 {
		s.onTransition(ev, to, n)
	}
}

// Options tune the connection pool.
type Options struct {
	// MaxConns caps the pool (default: pgxpool's, max(4, GOMAXPROCS)).
	MaxConns int32
	// Logger receives one line per notable database event (default: discard).
	Logger *slog.Logger
	// Clock stands in for PostgreSQL's now() in every statement (default:
	// nil, the database's own clock). For tests: see pgtest.Clock.
	Clock Clock
}

// Open connects to PostgreSQL and checks that it answers. It does not run
// migrations: call Migrator.Up (mozi serve does it at start).
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// The parse error may echo the URL, password included: do not wrap it.
		return nil, errors.New("parse database url: invalid connection string (check MOZI_DATABASE_URL or database.url)")
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "mozi"
	// mozi's statements are short and keyed; PostgreSQL compiles a
	// statement (JIT) when the planner's cost estimate passes
	// jit_above_cost, which statistics not yet refreshed after a large
	// change make it do for a statement that runs in a millisecond: 50 to
	// 700 ms of compiling (docs/performance.md). A URL that sets jit wins.
	if _, set := cfg.ConnConfig.RuntimeParams["jit"]; !set {
		cfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database %s: %w", redactedTarget(cfg), err)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{pool: pool, logger: logger, clock: opts.Clock}
	s.Queries = Queries{db: withClock(pool, opts.Clock), observe: s.observe}
	return s, nil
}

// redactedTarget names the server a config points at without its password.
func redactedTarget(cfg *pgxpool.Config) string {
	c := cfg.ConnConfig
	return fmt.Sprintf("%s@%s:%d/%s", c.User, c.Host, c.Port, c.Database)
}

// Close releases every connection.
func (s *Store) Close() { s.pool.Close() }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping database: %w", err)
	}
	return nil
}

// Migrator returns the schema migrator for this store's database.
func (s *Store) Migrator() (*Migrator, error) { return NewMigrator(s.pool) }

// ServerVersion names the PostgreSQL server ("PostgreSQL 15.18").
func (s *Store) ServerVersion(ctx context.Context) (string, error) {
	var v string
	if err := s.pool.QueryRow(ctx, `SHOW server_version`).Scan(&v); err != nil {
		return "", fmt.Errorf("read server version: %w", err)
	}
	return "PostgreSQL " + strings.Fields(v)[0], nil
}
