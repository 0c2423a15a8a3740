package pgtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/moziplus/mozi/repository"
)

// Clock is a repository.Clock for tests: the real time plus an offset that
// only Advance changes. It never runs behind the database's own clock, so
// rows stamped by a column default (now() at insert) always look as old as
// the time that has passed, and a test moves time forward instead of
// sleeping until a lease, backoff or age has passed.
type Clock struct {
	mu     sync.Mutex
	offset time.Duration
}

// Now is the real time plus every Advance so far.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

// Advance moves the clock d forward (a negative d is refused: the clock
// never goes back, as the database's does not).
func (c *Clock) Advance(d time.Duration) {
	if d < 0 {
		panic("pgtest: Clock.Advance with a negative duration")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// StoreWithClock opens a repository.Store on a fresh migrated database
// whose statements read the returned clock instead of PostgreSQL's now().
func StoreWithClock(t testing.TB) (*repository.Store, *Clock) {
	t.Helper()
	clock := &Clock{}
	store, err := repository.Open(context.Background(), URL(t), repository.Options{MaxConns: 8, Clock: clock})
	if err != nil {
		t.Fatalf("pgtest: open store: %v", err)
	}
	t.Cleanup(store.Close)
	return store, clock
}
