package repository

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrator applies the schema migrations embedded in the binary. Replicas
// starting together serialise on a PostgreSQL advisory lock.
type Migrator struct {
	db       *sql.DB
	provider *goose.Provider
}

// MigrationState is one migration's version, name and whether it is applied.
type MigrationState struct {
	Version int64
	Name    string
	Applied bool
}

// NewMigrator builds a migrator on top of an existing pool.
func NewMigrator(pool *pgxpool.Pool) (*Migrator, error) {
	dir, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("open embedded migrations: %w", err)
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, fmt.Errorf("create migration lock: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	provider, err := goose.NewProvider(goose.DialectPostgres, db, dir,
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("create migration provider: %w", err)
	}
	return &Migrator{db: db, provider: provider}, nil
}

// Close releases the migrator's connection handle (not the pool).
func (m *Migrator) Close() error { return m.db.Close() }

// Up applies every pending migration and returns how many it applied.
func (m *Migrator) Up(ctx context.Context) (int, error) {
	results, err := m.provider.Up(ctx)
	if err != nil {
		return len(results), fmt.Errorf("apply migrations: %w", err)
	}
	return len(results), nil
}

// Down rolls back the newest applied migration. It reports false when there
// was nothing to roll back.
func (m *Migrator) Down(ctx context.Context) (bool, error) {
	_, err := m.provider.Down(ctx)
	if errors.Is(err, goose.ErrNoNextVersion) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("roll back migration: %w", err)
	}
	return true, nil
}

// DownTo rolls back every applied migration newer than version (0: all of
// them) and returns how many it rolled back.
func (m *Migrator) DownTo(ctx context.Context, version int64) (int, error) {
	results, err := m.provider.DownTo(ctx, version)
	if err != nil {
		return len(results), fmt.Errorf("roll back migrations to version %d: %w", version, err)
	}
	return len(results), nil
}

// Status lists every embedded migration and whether it is applied.
func (m *Migrator) Status(ctx context.Context) ([]MigrationState, error) {
	statuses, err := m.provider.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("read migration status: %w", err)
	}
	out := make([]MigrationState, 0, len(statuses))
	for _, st := range statuses {
		out = append(out, MigrationState{
			Version: st.Source.Version,
			Name:    st.Source.Path,
			Applied: st.State == goose.StateApplied,
		})
	}
	return out, nil
}

// Current reports whether every embedded migration is applied.
func (m *Migrator) Current(ctx context.Context) (bool, error) {
	pending, err := m.provider.HasPending(ctx)
	if err != nil {
		return false, fmt.Errorf("check pending migrations: %w", err)
	}
	return !pending, nil
}
