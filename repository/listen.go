package repository

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// PendingChannel is notified (by a trigger) whenever a task becomes pending.
const PendingChannel = "mozi_pending"

// TaskEndedChannel is notified (by a trigger), with the task's id, when a
// task whose run holds its lease becomes terminal: its runner decides at
// once whether to stop the agent.
const TaskEndedChannel = "mozi_task_ended"

// Listen calls onNotify for every notification on channel until ctx ends,
// on a connection of its own, reconnecting after failures. onNotify must not
// block. After a lost connection onNotify is called once too: whatever was
// notified meanwhile is found by the next claim.
func (s *Store) Listen(ctx context.Context, channel string, onNotify func(), logger *slog.Logger) {
	s.ListenPayload(ctx, channel, func(string) { onNotify() }, onNotify, logger)
}

// ListenPayload calls onNotify with each notification's payload on channel
// until ctx ends, reconnecting after failures; onLost is called after a
// lost connection (notifications may have been missed). Neither may block.
func (s *Store) ListenPayload(ctx context.Context, channel string, onNotify func(payload string), onLost func(), logger *slog.Logger) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := s.listenOnce(ctx, channel, onNotify, func() { backoff = 100 * time.Millisecond })
		if ctx.Err() != nil {
			return
		}
		logger.Warn("notification listener lost its connection, reconnecting", "channel", channel, "error", err)
		onLost()
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

func (s *Store) listenOnce(ctx context.Context, channel string, onNotify func(string), connected func()) error {
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
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		onNotify(n.Payload)
	}
}
