// Package lease keeps a lease held in PostgreSQL alive: a run's claim on
// its task (the dispatcher) and the ticker's leadership. A Keeper renews
// every third of the lease's TTL, so two renewals may fail before the lease
// runs out, and gives up once a whole TTL has passed without a successful
// renewal: by then another replica may have taken the lease over, and its
// holder must stop rather than become a second writer.
//
// What renewing means, and what its answer means, is the caller's (Renew);
// the package knows no SQL.
package lease

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrExpired is Run's error when no renewal succeeded for a whole TTL.
var ErrExpired = errors.New("lease not renewed for its whole TTL")

// Ticker delivers beats (time.Ticker).
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// Keeper renews one lease until its context ends, its Renew says the lease
// is over, or it expires.
type Keeper struct {
	// TTL is the lease's time to live; renewals come every TTL/3, and each
	// may take that long.
	TTL time.Duration
	// Renew renews the lease once. It returns false when the keeper should
	// stop (the lease was lost, or is not needed any more); an error is a
	// renewal that failed, tried again on the next beat.
	Renew func(ctx context.Context) (bool, error)
	// Kick, when it delivers, renews at once instead of at the next beat
	// (nil: never).
	Kick <-chan struct{}
	// Retrying is told of a failed renewal that will be tried again (nil:
	// nobody).
	Retrying func(err error)
	// Now is the clock (default time.Now).
	Now func() time.Time
	// NewTicker makes the beat (default: a time.Ticker).
	NewTicker func(d time.Duration) Ticker
}

type timeTicker struct{ *time.Ticker }

func (t timeTicker) C() <-chan time.Time { return t.Ticker.C }

// Run keeps the lease until ctx ends (nil), Renew returns false (nil), or
// no renewal succeeded for a whole TTL since Run began or since the last
// success (an error wrapping ErrExpired and the last renewal's error). A
// renewal in flight when ctx ends is let finish, within its TTL/3: the
// lease's row is not left with a half-sent statement.
func (k Keeper) Run(ctx context.Context) error {
	if k.TTL <= 0 || k.Renew == nil {
		return fmt.Errorf("lease keeper: TTL %s and Renew are required", k.TTL)
	}
	now := k.Now
	if now == nil {
		now = time.Now
	}
	newTicker := k.NewTicker
	if newTicker == nil {
		newTicker = func(d time.Duration) Ticker { return timeTicker{time.NewTicker(d)} }
	}
	every := k.TTL / 3
	beat := newTicker(every)
	defer beat.Stop()
	bg := context.WithoutCancel(ctx)
	renewed := now() // the lease was just taken
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-beat.C():
		case <-k.Kick:
		}
		attempt, cancel := context.WithTimeout(bg, every)
		keep, err := k.Renew(attempt)
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil // the holder ended meanwhile
		case err == nil && !keep:
			return nil
		case err == nil:
			renewed = now()
		case now().Sub(renewed) >= k.TTL:
			return fmt.Errorf("%w (%s): %w", ErrExpired, k.TTL, err)
		case k.Retrying != nil:
			k.Retrying(err)
		}
	}
}
