package main

import (
	"context"
	"fmt"
	"time"

	"github.com/moziplus/mozi/cmd/mozi/internal/config"
)

// settlePoll is how often a settling replay looks at the database: short
// beside an agent run, long beside a query.
const settlePoll = 50 * time.Millisecond

// settler waits, between replayed deliveries, until mozi has done all it
// will do about the last one. Without it a replay posts the whole session
// within a second, and later events (a close, a merge) finish tasks before
// their agents ran, or find an earlier task still pending where the
// recorded session had it done: the result would depend on the machine's
// speed.
type settler struct {
	db      *database
	timeout time.Duration
}

func openSettler(ctx context.Context, e *env, cfg *config.Config, dataDir string, timeout time.Duration) (*settler, error) {
	db, err := openDatabase(ctx, e, cfg, dataDir, newCLILogger(cfg.Log, e.stderr), attachOnly)
	if err != nil {
		return nil, fmt.Errorf("replay --settle reads mozi's database: %w", err)
	}
	if err := db.requireSchema(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return &settler{db: db, timeout: timeout}, nil
}

func (s *settler) close() { s.db.Close() }

// wait returns once nothing is left to do, or fails after the timeout
// naming what is still left.
func (s *settler) wait(ctx context.Context, name string) error {
	deadline := time.Now().Add(s.timeout)
	for {
		u, err := s.db.store.Unsettled(ctx)
		if err != nil {
			return err
		}
		if u.Zero() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s mozi did not settle within %s: %s (mozi tasks and mozi deliveries show them)", name, s.timeout, u)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(settlePoll):
		}
	}
}
