package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/moziplus/mozi/cmd/mozi/internal/config"
	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/embedded"
)

// database is an open store and, without a configured URL, the embedded
// cluster behind it.
type database struct {
	store   *repository.Store
	cluster *embedded.Cluster
	logger  *slog.Logger
}

// attachMode says what to do when another mozi owns the embedded cluster.
type attachMode int

const (
	// ownCluster is for mozi serve: the state directory must be free.
	ownCluster attachMode = iota
	// shareCluster is for short commands that may set a database up
	// (migrate, doctor): use the running cluster if any, else start it.
	shareCluster
	// attachOnly is for commands that look at what mozi serve does (tasks,
	// deliveries, prompt render): they never create or start a database.
	attachOnly
)

// openDatabase connects to the configured database, or starts (or, for
// short commands, attaches to) the embedded cluster.
func openDatabase(ctx context.Context, e *env, cfg *config.Config, dataDirFlag string, logger *slog.Logger, mode attachMode) (*database, error) {
	db := &database{logger: logger}
	url := cfg.Database.URL.Value()
	if url == "" {
		stateDir, err := resolveStateDir(e, cfg, dataDirFlag, logger)
		if err != nil {
			return nil, err
		}
		if mode == attachOnly {
			if db.cluster, err = embedded.Attach(stateDir); err != nil {
				return nil, fmt.Errorf("no running mozi database in %s (looked there for the embedded one; this command does not start it): start mozi serve with this data dir, or pass --data-dir or set database.url", stateDir)
			}
		} else {
			db.cluster, err = embedded.Start(ctx, embedded.Options{StateDir: stateDir, Logger: logger})
			if errors.Is(err, embedded.ErrInUse) && mode == shareCluster {
				db.cluster, err = embedded.Attach(stateDir)
			}
			if err != nil {
				return nil, err
			}
		}
		url = db.cluster.URL()
	}
	store, err := repository.Open(ctx, url, repository.Options{MaxConns: cfg.Database.MaxConns, Logger: logger})
	if err != nil {
		db.Close()
		return nil, err
	}
	db.store = store
	return db, nil
}

func resolveStateDir(e *env, cfg *config.Config, dataDirFlag string, logger *slog.Logger) (string, error) {
	explicit := dataDirFlag
	if explicit == "" {
		explicit = cfg.DataDir
	}
	dir, note, err := embedded.StateDir(explicit, e.getenv, "")
	if err != nil {
		return "", fmt.Errorf("choose data dir: %w", err)
	}
	if note != "" {
		logger.Info("running as root: state directory moved", "reason", note, "data_dir", dir)
	}
	return dir, nil
}

// Close closes the store, then stops an owned embedded cluster.
func (db *database) Close() {
	if db.store != nil {
		db.store.Close()
	}
	if db.cluster != nil {
		if err := db.cluster.Stop(); err != nil {
			db.logger.Error("stop embedded postgres", "error", err)
		}
	}
}

// requireSchema refuses a database without mozi's tables, so that a
// command run before mozi serve ever ran says what to do instead of failing
// on a missing table. A schema behind this binary is let through: after a
// deliberate migrate down, the operator may still want to look around.
func (db *database) requireSchema(ctx context.Context) error {
	m, err := db.store.Migrator()
	if err != nil {
		return err
	}
	defer m.Close()
	states, err := m.Status(ctx)
	if err != nil {
		return err
	}
	applied := 0
	for _, st := range states {
		if st.Applied {
			applied++
		}
	}
	if applied == 0 && len(states) > 0 {
		return fmt.Errorf("the database has no mozi tables yet (0 of %d migrations applied): start mozi serve once, or run mozi migrate up", len(states))
	}
	return nil
}

// migrate applies pending migrations and reports how many it applied.
func (db *database) migrate(ctx context.Context) (int, error) {
	m, err := db.store.Migrator()
	if err != nil {
		return 0, err
	}
	defer m.Close()
	return m.Up(ctx)
}
