// Package worker is the loop of mozi's background posters: passes over
// durable work in the database, run again at once while a pass says more
// may be waiting, else on a wake-up (new work was written) or a poll (the
// safety net when no wake-up comes, and how soon work that waits for a
// time is seen).
package worker

import (
	"context"
	"time"
)

// Loop wakes a pass function. The zero value is not usable: use New.
type Loop struct {
	wake chan struct{}
}

// New builds a loop.
func New() *Loop { return &Loop{wake: make(chan struct{}, 1)} }

// Wake asks for a pass now. It never blocks; wake-ups that arrive while
// one is pending are one.
func (l *Loop) Wake() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Run calls pass until ctx ends: again at once while it reports more,
// else after a wake-up or poll.
func (l *Loop) Run(ctx context.Context, poll time.Duration, pass func(context.Context) bool) {
	for ctx.Err() == nil {
		if pass(ctx) {
			continue
		}
		select {
		case <-ctx.Done():
		case <-l.wake:
		case <-time.After(poll):
		}
	}
}
