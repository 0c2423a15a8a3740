package repository

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// PendingChannel is notified (by a trigger) whenever a task becomes pending.
const PendingChannel = "mozi_pending"

// Listen calls onNotify for every notification on channel until ctx ends,
// on a connection of its own, reconnecting after failures. onNotify must not
// block.
func (s *Store) Listen(ctx context.Context, channel string, onNotify func(), logger *slog.Logger) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := s.listenOnce(ctx, channel, onNotify, func() { backoff = 100 * time.Millisecond })
		if ctx.Err() != nil {
			return
		}
		logger.Warn("notification listener lost its connection, reconnecting", "channel", channel, "error", err)
		// Whatever was notified meanwhile is found by the next claim.
		onNotify()
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

func (s *Store) listenOnce(ctx context.Context, channel string, onNotify, connected func()) error {
	pooled, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A LISTENing connection must not go back to the pool.
	conn := pooled.Hijack()
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return err
	}
	connected()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		onNotify()
	}
}
