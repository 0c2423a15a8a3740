package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/moziplus/mozi/cmd/mozi/internal/config"
)

func runMigrate(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "migrate")
	configPath := fs.String("config", "", "configuration file")
	dataDir := fs.String("data-dir", "", "state directory of the embedded database")
	to := fs.String("to", "", "down: roll back to this version (0: everything) instead of one step")
	if err := parseFlags(e, fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("migrate needs exactly one of up, down, status")
	}
	action := fs.Arg(0)
	if action != "up" && action != "down" && action != "status" {
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

	switch action {
	case "up":
		n, err := m.Up(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "applied %d migration(s)\n", n)
	case "down":
		if *to != "" {
			version, err := strconv.ParseInt(*to, 10, 64)
			if err != nil || version < 0 {
				return usagef("migrate down --to: %q is not a version number", *to)
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
	case "status":
		states, err := m.Status(ctx)
		if err != nil {
			return err
		}
		for _, st := range states {
			state := "pending"
			if st.Applied {
				state = "applied"
			}
			fmt.Fprintf(e.stdout, "%05d  %-8s %s\n", st.Version, state, st.Name)
		}
	}
	return nil
}
