package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/moziplus/mozi/cmd/mozi/internal/config"
	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/task"
)

// migrateArgs are the flags of mozi migrate its verbs read.
type migrateArgs struct {
	to     string
	force  bool
	asJSON bool
}

// migrateVerb is one verb of mozi migrate, run on an open database.
type migrateVerb func(ctx context.Context, e *env, db *database, m *repository.Migrator, a migrateArgs) error

var migrateVerbs = map[string]migrateVerb{
	"up":     migrateUp,
	"down":   migrateDown,
	"status": migrateStatus,
}

func runMigrate(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "migrate")
	configPath := fs.String("config", "", "configuration file")
	dataDir := fs.String("data-dir", "", "state directory of the embedded database")
	to := fs.String("to", "", "down: roll back to this version (0: everything) instead of one step")
	force := fs.Bool("force", false, "down: roll back even though a mozi serve is running against the database")
	asJSON := fs.Bool("json", false, "status: print JSON lines, one migration a line")
	if err := parseFlags(e, fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("migrate needs exactly one of up, down, status")
	}
	action := fs.Arg(0)
	verb, ok := migrateVerbs[action]
	if !ok {
		return usagef("migrate: unknown action %q (want up, down or status)", action)
	}
	cfg, err := config.Load(*configPath, e.getenv)
	if err != nil {
		return err
	}
	logger := newCLILogger(cfg.Log, e.stderr)
	db, err := openDatabase(ctx, e, cfg, *dataDir, logger, shareCluster)
	if err != nil {
		return err
	}
	defer db.Close()
	m, err := db.store.Migrator()
	if err != nil {
		return err
	}
	defer m.Close()
	return verb(ctx, e, db, m, migrateArgs{to: *to, force: *force, asJSON: *asJSON})
}

func migrateUp(ctx context.Context, e *env, _ *database, m *repository.Migrator, _ migrateArgs) error {
	n, err := m.Up(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "applied %d migration(s)\n", n)
	return nil
}

func migrateDown(ctx context.Context, e *env, db *database, m *repository.Migrator, a migrateArgs) error {
	if live, who, err := liveServer(ctx, db); err != nil {
		return err
	} else if live && !a.force {
		return fmt.Errorf("a mozi serve is running against this database (%s): rolling its schema back under it "+
			"breaks it; stop it first, or pass --force", who)
	}
	if a.to != "" {
		version, err := strconv.ParseInt(a.to, 10, 64)
		if err != nil || version < 0 {
			return usagef("migrate down --to: %q is not a version number", a.to)
		}
		n, err := m.DownTo(ctx, version)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "rolled back %d migration(s)\n", n)
		return nil
	}
	done, err := m.Down(ctx)
	if err != nil {
		return err
	}
	if !done {
		fmt.Fprintln(e.stdout, "nothing to roll back")
		return nil
	}
	fmt.Fprintln(e.stdout, "rolled back 1 migration")
	return nil
}

func migrateStatus(ctx context.Context, e *env, _ *database, m *repository.Migrator, a migrateArgs) error {
	states, err := m.Status(ctx)
	if err != nil {
		return err
	}
	if a.asJSON {
		// JSON lines, one migration a line, like every other list command.
		enc := json.NewEncoder(e.stdout)
		for _, st := range states {
			if err := enc.Encode(map[string]any{"version": st.Version, "name": st.Name, "applied": st.Applied}); err != nil {
				return err
			}
		}
		return nil
	}
	for _, st := range states {
		state := "pending"
		if st.Applied {
			state = "applied"
		}
		fmt.Fprintf(e.stdout, "%05d  %-8s %s\n", st.Version, state, st.Name)
	}
	return nil
}

// liveServer reports whether a mozi serve uses the database: it owns the
// embedded cluster this command attached to, or leads the ticker (its
// lease is renewed every few seconds while it runs).
func liveServer(ctx context.Context, db *database) (bool, string, error) {
	if db.cluster != nil && db.cluster.Attached() {
		return true, "it owns the embedded PostgreSQL in " + db.cluster.DataDir(), nil
	}
	holder, err := db.store.Leader(ctx, "ticker")
	if errors.Is(err, task.ErrNotFound) {
		return false, "", nil
	}
	if err != nil {
		return false, "", err
	}
	return true, "replica " + holder + " leads its ticker", nil
}
