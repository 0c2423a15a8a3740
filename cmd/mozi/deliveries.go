package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/moziplus/mozi/cmd/mozi/internal/config"
	"github.com/moziplus/mozi/repository"
)

// openForCLI loads the configuration and opens the database the way the
// commands that look at mozi's work do: the configured server, or the
// embedded cluster a running mozi serve owns — never a new one.
func openForCLI(ctx context.Context, e *env, configPath, dataDir string) (*config.Config, *database, error) {
	cfg, err := config.Load(configPath, e.getenv)
	if err != nil {
		return nil, nil, err
	}
	db, err := openDatabase(ctx, e, cfg, dataDir, newCLILogger(cfg.Log, e.stderr), attachOnly)
	if err != nil {
		return nil, nil, err
	}
	if err := db.requireSchema(ctx); err != nil {
		db.Close()
		return nil, nil, err
	}
	return cfg, db, nil
}

func runDeliveries(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "deliveries")
	configPath := fs.String("config", "", "configuration file")
	dataDir := fs.String("data-dir", "", "state directory of the embedded database")
	failed := fs.Bool("failed", false, "only parked deliveries and waiting ones that failed")
	limit := fs.Int("limit", 50, "how many to show, newest first")
	asJSON := fs.Bool("json", false, "print JSON lines instead of a table")
	if err := parseFlags(e, fs, args); err != nil {
		return err
	}
	_, db, err := openForCLI(ctx, e, *configPath, *dataDir)
	if err != nil {
		return err
	}
	defer db.Close()

	if fs.NArg() > 0 {
		if fs.Arg(0) != "requeue" || fs.NArg() < 2 {
			return usagef("deliveries takes no arguments but: requeue ID…")
		}
		for _, id := range fs.Args()[1:] {
			ok, err := db.store.RequeueDelivery(ctx, id)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("delivery %s is not parked or waiting", id)
			}
			fmt.Fprintf(e.stdout, "requeued %s\n", id)
		}
		return nil
	}
	list, err := db.store.ListDeliveries(ctx, repository.DeliveryFilter{Failed: *failed, Limit: *limit})
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		for _, d := range list {
			if err := enc.Encode(deliveryJSON(d)); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RECEIVED\tEVENT\tACTION\tREPO\tOUTCOME\tATTEMPTS\tDELIVERY\tLAST ERROR")
	for _, d := range list {
		outcome := d.Outcome
		if outcome == "" {
			outcome = "waiting"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", d.ReceivedAt.Local().Format(time.DateTime),
			d.Event, dash(d.Action), dash(d.Repo), outcome, d.Attempts, d.ID, oneLine(d.LastError, 80))
	}
	return tw.Flush()
}

func deliveryJSON(d repository.Delivery) map[string]any {
	return map[string]any{
		"delivery_id": d.ID, "event": d.Event, "event_type": d.EventType, "action": d.Action,
		"repo": d.Repo, "received_at": d.ReceivedAt, "outcome": d.Outcome, "attempts": d.Attempts,
		"last_error": d.LastError, "semantic_key": d.SemanticKey,
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine flattens and shortens text for a table cell.
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}
