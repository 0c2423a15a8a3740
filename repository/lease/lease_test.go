package lease_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/lease"
	"github.com/moziplus/mozi/repository/pgtest"
	"github.com/moziplus/mozi/repository/task"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

const ttl = 30 * time.Second

var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// beats is the keeper's ticker, driven by the test: a send returns once
// the keeper took the beat, so it is done with the previous one.
type beats struct {
	c      chan time.Time
	period time.Duration
}

func (b *beats) C() <-chan time.Time { return b.c }
func (b *beats) Stop()               {}

// clock is the keeper's clock; Renew sets it to the beat's time before it
// renews, so the keeper reads that time after the renewal without a race.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }

// harness runs a keeper whose Renew takes the scripted steps in turn.
type harness struct {
	t        *testing.T
	beats    *beats
	clock    *clock
	retrying []error
	done     chan error
	cancel   context.CancelFunc
}

type step struct {
	at    time.Duration // since start: the clock when this renewal happens
	renew func(ctx context.Context) (bool, error)
}

func run(t *testing.T, steps []step, kick <-chan struct{}) *harness {
	h := &harness{t: t, beats: &beats{c: make(chan time.Time)}, clock: &clock{now: start}, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	t.Cleanup(cancel)
	i := 0
	k := lease.Keeper{TTL: ttl, Kick: kick, Now: h.clock.Now,
		NewTicker: func(d time.Duration) lease.Ticker { h.beats.period = d; return h.beats },
		Retrying:  func(err error) { h.retrying = append(h.retrying, err) },
		Renew: func(ctx context.Context) (bool, error) {
			if i == len(steps) {
				return false, nil // past the script: stop (the test has failed already)
			}
			s := steps[i]
			i++
			h.clock.set(start.Add(s.at))
			return s.renew(ctx)
		}}
	go func() { h.done <- k.Run(ctx) }()
	return h
}

// beat delivers one beat.
func (h *harness) beat() {
	select {
	case h.beats.c <- start:
	case err := <-h.done:
		h.t.Fatalf("keeper stopped early: %v", err)
	}
}

// wait returns Run's result.
func (h *harness) wait() error { return <-h.done }

// stopped returns Run's result, which must have come without another
// beat: a keeper that still runs takes the beat, and the test fails.
func (h *harness) stopped() error {
	select {
	case err := <-h.done:
		return err
	case h.beats.c <- start:
		h.t.Fatal("the keeper still runs")
		return nil
	}
}

func leadership(store *repository.Store, owner string) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		return store.AcquireLeadership(ctx, "ticker", owner, ttl)
	}
}

func TestLeadershipRenewedUntilStopped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := pgtest.Store(t)
	ok, err := store.AcquireLeadership(ctx, "ticker", "r1", ttl)
	require.NoError(t, err)
	require.True(t, ok)
	renew := leadership(store, "r1")
	h := run(t, []step{{10 * time.Second, renew}, {20 * time.Second, renew}, {30 * time.Second, renew}}, nil)
	for range 3 {
		h.beat()
	}
	h.cancel()
	require.NoError(t, h.wait())
	assert.Equal(t, ttl/3, h.beats.period, "renews every third of the TTL")
	assert.Empty(t, h.retrying)
	holder, err := store.Leader(ctx, "ticker")
	require.NoError(t, err)
	assert.Equal(t, "r1", holder)
}

func TestLeadershipTakenOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := pgtest.Store(t)
	_, err := store.AcquireLeadership(ctx, "ticker", "r1", ttl)
	require.NoError(t, err)
	h := run(t, []step{{10 * time.Second, leadership(store, "r1")}, {20 * time.Second, func(ctx context.Context) (bool, error) {
		// Meanwhile r1 was thought dead and r2 took over.
		require.NoError(t, store.ReleaseLeadership(ctx, "ticker", "r1"))
		ok, err := store.AcquireLeadership(ctx, "ticker", "r2", ttl)
		require.NoError(t, err)
		require.True(t, ok)
		return store.AcquireLeadership(ctx, "ticker", "r1", ttl)
	}}}, nil)
	h.beat()
	h.beat()
	require.NoError(t, h.stopped(), "a lost lease ends the keeper without an error: Renew said so")
	holder, err := store.Leader(ctx, "ticker")
	require.NoError(t, err)
	assert.Equal(t, "r2", holder)
}

func TestExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := pgtest.Store(t)
	_, err := store.AcquireLeadership(ctx, "ticker", "r1", ttl)
	require.NoError(t, err)
	// The database out of reach: a real failure, a closed pool.
	gone := pgtest.Store(t)
	gone.Close()
	up, down := leadership(store, "r1"), leadership(gone, "r1")

	tests := []struct {
		name     string
		steps    []step
		expired  bool
		retrying int
	}{
		{
			name:     "no renewal for a whole TTL",
			steps:    []step{{10 * time.Second, down}, {20 * time.Second, down}, {30 * time.Second, down}},
			expired:  true,
			retrying: 2,
		},
		{
			name: "a success starts the TTL again",
			steps: []step{{10 * time.Second, down}, {20 * time.Second, down}, {29 * time.Second, up},
				{40 * time.Second, down}, {50 * time.Second, down}, {59 * time.Second, up}},
			retrying: 4,
		},
		{
			name:     "expiry counts from the last success",
			steps:    []step{{10 * time.Second, up}, {20 * time.Second, down}, {30 * time.Second, down}, {40 * time.Second, down}},
			expired:  true,
			retrying: 2,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := run(t, tc.steps, nil)
			for range tc.steps {
				h.beat()
			}
			if tc.expired {
				err := h.stopped()
				require.ErrorIs(t, err, lease.ErrExpired)
				assert.ErrorContains(t, err, "closed pool", "the last renewal's error is kept")
			} else {
				h.cancel()
				require.NoError(t, h.wait())
			}
			assert.Len(t, h.retrying, tc.retrying)
		})
	}
}

func TestRunLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := pgtest.Store(t)
	created, err := store.CreateTask(ctx, repository.NewTask{Repo: "acme/widget", IssueNumber: 1,
		ActionType: task.ActionIssueAssigned, Agent: "coder", Priority: task.DefaultPriority})
	require.NoError(t, err)
	claimed, err := store.ClaimTasks(ctx, repository.ClaimRequest{Owner: "r1", Limit: 1, LeaseTTL: ttl,
		Agents: []repository.AgentLimit{{Login: "coder", MaxConcurrency: 1}}})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	var states []repository.LeaseState
	heartbeat := func(owner string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			st, err := store.Heartbeat(ctx, created.ID, owner, ttl)
			states = append(states, st)
			return st.Held, err
		}
	}
	kick := make(chan struct{})
	h := run(t, []step{{10 * time.Second, heartbeat("r1")}, {11 * time.Second, heartbeat("r1")},
		{20 * time.Second, heartbeat("r2")}}, kick)
	h.beat()
	kick <- struct{}{} // renews at once, without a beat
	h.beat()
	require.NoError(t, h.stopped())
	require.Len(t, states, 3)
	assert.True(t, states[0].Held)
	assert.True(t, states[1].Held)
	assert.False(t, states[2].Held, "another owner's heartbeat does not hold the lease")
	assert.Equal(t, task.StatusClaimed, states[2].Status)
}

func TestRequiresTTLAndRenew(t *testing.T) {
	t.Parallel()
	err := lease.Keeper{}.Run(context.Background())
	require.Error(t, err)
	assert.False(t, errors.Is(err, lease.ErrExpired))
}
