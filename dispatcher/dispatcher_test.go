package dispatcher

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/pgtest"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/spawner/notice"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// recorder is a handler that records what it is given, blocks until gate
// closes (when it has one), then completes the task as a finished
// notification run would.
type recorder struct {
	store   *repository.Store
	mu      sync.Mutex
	handled []int64
	gate    chan struct{}
	got     chan int64
}

func newRecorder(store *repository.Store, blocking bool) *recorder {
	r := &recorder{store: store, got: make(chan int64, 100)}
	if blocking {
		r.gate = make(chan struct{})
	}
	return r
}

func (r *recorder) Handle(ctx context.Context, t task.Task) {
	r.mu.Lock()
	r.handled = append(r.handled, t.ID)
	r.mu.Unlock()
	r.got <- t.ID
	if r.gate != nil {
		select {
		case <-r.gate:
		case <-ctx.Done():
		}
	}
	if _, err := r.store.Apply(context.WithoutCancel(ctx), t.ID, task.EventComplete, repository.Change{}); err != nil {
		panic(err)
	}
}

func (r *recorder) ids() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int64(nil), r.handled...)
}

// fakeIssues answers the dependency guardrail: issues listed in open are
// open, every other one closed.
type fakeIssues struct{ open map[int]bool }

func (f fakeIssues) Issue(_ context.Context, repo string, n int) (task.Issue, error) {
	state := "closed"
	if f.open[n] {
		state = "open"
	}
	return task.Issue{Repo: repo, Number: n, State: state}, nil
}

func (f fakeIssues) BlockedBy(context.Context, string, int) ([]int, error) { return nil, nil }

func createTask(t *testing.T, store *repository.Store, n repository.NewTask) task.Task {
	t.Helper()
	if n.Repo == "" {
		n.Repo = "acme/widget"
	}
	if n.ActionType == "" {
		n.ActionType = task.ActionIssueAssigned
	}
	if n.Agent == "" {
		n.Agent = "coder1"
	}
	tk, err := store.CreateTask(context.Background(), n)
	require.NoError(t, err)
	return tk
}

// run starts d and returns a stop that ends claims and waits for workers.
func run(d *Dispatcher) (stop func()) {
	claimCtx, cancelClaims := context.WithCancel(context.Background())
	runCtx, cancelRuns := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(claimCtx, runCtx); close(done) }()
	return func() {
		cancelClaims()
		<-done
		cancelRuns()
		d.Wait()
	}
}

func receive(t *testing.T, ch <-chan int64) int64 {
	t.Helper()
	select {
	case id := <-ch:
		return id
	case <-time.After(10 * time.Second):
		t.Fatal("no task was handed to the handler")
		return 0
	}
}

// Claimed tasks hold leases nobody renews until their agent starts: the
// dispatcher must not claim more than it has idle workers, or tasks would
// wait behind long-running agents until the ticker rescued them.
func TestClaimsOnlyForIdleWorkers(t *testing.T) {
	store := pgtest.Store(t)
	ctx := context.Background()
	for i := range 6 {
		createTask(t, store, repository.NewTask{IssueNumber: i + 1, Priority: 2})
	}
	h := newRecorder(store, true)
	d := New(Config{Owner: "r1", MaxConcurrency: 2, PollInterval: time.Hour,
		Agents: []Agent{{Login: "coder1", MaxConcurrency: 10, Enabled: true}}}, store, nil, h)
	stop := run(d)
	defer stop()
	receive(t, h.got)
	receive(t, h.got)
	for range 5 { // wake-ups while both workers are busy claim nothing
		d.Wake()
		require.Eventually(t, func() bool { return len(d.wake) == 0 }, 10*time.Second, time.Millisecond,
			"the claim loop took the wake-up")
	}
	pending, err := store.ListTasks(ctx, repository.TaskFilter{Status: task.StatusPending})
	require.NoError(t, err)
	assert.Len(t, pending, 4, "only two tasks may be claimed by two busy workers")
	assert.Equal(t, 2, d.Running())

	close(h.gate)
	for range 4 {
		receive(t, h.got)
	}
	assert.Len(t, h.ids(), 6)
}

// The highest priority is claimed first, and a new task starts on a wake-up
// without waiting for the poll interval.
func TestPriorityAndWake(t *testing.T) {
	store := pgtest.Store(t)
	low := createTask(t, store, repository.NewTask{IssueNumber: 1, Priority: 3})
	urgent := createTask(t, store, repository.NewTask{IssueNumber: 2, Priority: 0})
	h := newRecorder(store, false)
	d := New(Config{Owner: "r1", MaxConcurrency: 1, PollInterval: time.Hour,
		Agents: []Agent{{Login: "coder1", MaxConcurrency: 1, Enabled: true}}}, store, nil, h)
	stop := run(d)
	defer stop()
	assert.Equal(t, urgent.ID, receive(t, h.got))
	assert.Equal(t, low.ID, receive(t, h.got))

	late := createTask(t, store, repository.NewTask{IssueNumber: 3, Priority: 2})
	d.Wake()
	assert.Equal(t, late.ID, receive(t, h.got), "woken, not polled (the poll interval is an hour)")
}

func TestGuardrails(t *testing.T) {
	tests := []struct {
		name        string
		task        repository.NewTask
		agents      []Agent
		spawnsToday int
		open        map[int]bool
		wantStatus  task.Status
		wantError   string
	}{
		{name: "mention chain too long fails", task: repository.NewTask{ActionType: task.ActionMention, HopCount: 5},
			wantStatus: task.StatusFailed, wantError: "mention chain of 5 hops"},
		{name: "issue spawn budget holds", spawnsToday: 3,
			wantStatus: task.StatusPending, wantError: "3 spawns on this issue in 24h (budget 3)"},
		{name: "open dependency holds", task: repository.NewTask{DependsOn: []int{7}}, open: map[int]bool{7: true},
			wantStatus: task.StatusPending, wantError: "waits for #7"},
		{name: "closed dependency passes", task: repository.NewTask{DependsOn: []int{7}},
			wantStatus: task.StatusClaimed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := pgtest.Store(t)
			ctx := context.Background()
			agents := []Agent{{Login: "coder1", MaxConcurrency: 1, Enabled: true}}
			tt.task.IssueNumber = 4
			tk := createTask(t, store, tt.task)
			for i := range tt.spawnsToday {
				past := tk
				past.ID = createTask(t, store, repository.NewTask{IssueNumber: 4, ActionType: task.ActionMention,
					Agent: "coder1", DedupeKey: string(rune('a' + i))}).ID
				_, err := store.StartAttempt(ctx, past, "r0", "")
				require.NoError(t, err)
				_, err = store.Apply(ctx, past.ID, task.EventCancel, repository.Change{Error: "test"})
				require.NoError(t, err)
			}
			h := newRecorder(store, false)
			d := New(Config{Owner: "r1", MaxConcurrency: 1, PollInterval: time.Hour, Agents: agents,
				SpawnsPerIssuePerDay: 3, MaxHops: 4, Notices: notice.New()},
				store, fakeIssues{open: tt.open}, h)
			stop := run(d)
			if tt.wantStatus == task.StatusClaimed {
				assert.Equal(t, tk.ID, receive(t, h.got))
				stop()
				return
			}
			// A hold gives the claim back (it was not a run) and counts as a hold.
			wantDispatches, wantHolds := 1, 0
			if tt.wantStatus == task.StatusPending {
				wantDispatches, wantHolds = 0, 1
			}
			require.Eventually(t, func() bool {
				got, err := store.Task(ctx, tk.ID)
				return err == nil && got.DispatchCount == wantDispatches && got.Holds == wantHolds &&
					got.Status == tt.wantStatus && got.LeaseOwner == ""
			}, 10*time.Second, 10*time.Millisecond)
			stop()
			got, err := store.Task(ctx, tk.ID)
			require.NoError(t, err)
			assert.Contains(t, got.LastError, tt.wantError)
			assert.Empty(t, h.ids(), "a guarded task is never handed to the spawner")
			queued, err := store.QueuedComments(ctx, "acme/widget", 4)
			require.NoError(t, err)
			if tt.wantStatus == task.StatusPending {
				assert.True(t, got.NotBefore.After(time.Now().Add(20*time.Second)), "it waits before the next claim")
				assert.Empty(t, queued, "a held task is not announced")
			} else {
				require.Len(t, queued, 1, "a task failed by a guardrail says so on its issue")
				assert.Contains(t, queued[0].Body, tt.wantError)
			}
		})
	}
}

// commentLog is a Gitea that keeps the comments posted to it.
// flakyIssues is a Gitea that can be down (every read fails) or slow.
type flakyIssues struct {
	down  atomic.Bool
	delay time.Duration
}

var errGiteaDown = errors.New("gitea: 502 Bad Gateway")

func (f *flakyIssues) Issue(_ context.Context, repo string, n int) (task.Issue, error) {
	if f.down.Load() {
		return task.Issue{}, errGiteaDown
	}
	return task.Issue{Repo: repo, Number: n, State: "closed"}, nil
}

func (f *flakyIssues) BlockedBy(ctx context.Context, _ string, _ int) ([]int, error) {
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if f.down.Load() {
		return nil, errGiteaDown
	}
	return nil, nil
}

// A long Gitea outage holds every task that needs Gitea again and again
// (the 30-minute outage of the issue, compressed: more holds than the
// dispatch guardrail would ever allow as dispatches). Holds are not
// dispatches: when Gitea recovers, every task runs exactly once and none
// has failed.
func TestGiteaOutageHoldsTasksWithoutFailingThem(t *testing.T) {
	store := pgtest.Store(t)
	ctx := context.Background()
	gitea := &flakyIssues{}
	gitea.down.Store(true)
	var ids []int64
	for i := range 20 {
		ids = append(ids, createTask(t, store, repository.NewTask{IssueNumber: 100 + i, DependsOn: []int{1}}).ID)
	}
	h := newRecorder(store, false)
	d := New(Config{Owner: "r1", MaxConcurrency: 4, PollInterval: 5 * time.Millisecond,
		Agents:   []Agent{{Login: "coder1", MaxConcurrency: 20, Enabled: true}},
		HoldBase: time.Millisecond, HoldMax: 4 * time.Millisecond}, store, gitea, h)
	stop := run(d)
	defer stop()

	const outageHolds = 12 // max_retries (2) + 5 dispatches would have failed each task after 8
	require.Eventually(t, func() bool {
		for _, id := range ids {
			tk, err := store.Task(ctx, id)
			if err != nil || tk.Holds < outageHolds {
				return false
			}
		}
		return true
	}, time.Minute, 20*time.Millisecond, "every task is held again and again while Gitea is down")
	assert.Empty(t, h.ids(), "nothing runs while its dependencies cannot be checked")

	gitea.down.Store(false)
	require.Eventually(t, func() bool { return len(h.ids()) == len(ids) }, time.Minute, 10*time.Millisecond)
	assert.ElementsMatch(t, ids, h.ids(), "every task ran exactly once")
	// The recorder notes a run as it begins and ends its task after.
	require.Eventually(t, func() bool {
		for _, id := range ids {
			if tk, err := store.Task(ctx, id); err != nil || tk.Status != task.StatusDone {
				return false
			}
		}
		return true
	}, time.Minute, 10*time.Millisecond, "every task done")
	for _, id := range ids {
		tk, err := store.Task(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, 1, tk.DispatchCount, "task %d: its holds were not counted as dispatches", id)
	}
}

// A slow Gitea must not let a claimed task's lease expire while its
// dependencies are checked (the ticker would rescue it and another runner
// claim it mid-check); the check gives up after GuardTimeout and holds the
// task.
func TestSlowDependencyCheckKeepsTheLease(t *testing.T) {
	store := pgtest.Store(t)
	ctx := context.Background()
	gitea := &flakyIssues{delay: time.Hour}
	tk := createTask(t, store, repository.NewTask{IssueNumber: 5, DependsOn: []int{1}})
	h := newRecorder(store, false)
	// The check outlasts the lease several times over: only renewals keep
	// it. What is asserted is that the lease moved on while the check ran,
	// not that a renewal came within a bound (a loaded machine delays them).
	const ttl, guard = time.Second, 4 * time.Second
	d := New(Config{Owner: "r1", MaxConcurrency: 1, PollInterval: time.Hour, LeaseTTL: ttl,
		GuardTimeout: guard, Agents: []Agent{{Login: "coder1", MaxConcurrency: 1, Enabled: true}}},
		store, gitea, h)
	stop := run(d)
	defer stop()

	var first, last time.Time
	deadline := time.Now().Add(guard + 30*time.Second)
	for {
		got, err := store.Task(ctx, tk.ID)
		require.NoError(t, err)
		if got.Status == task.StatusClaimed && !got.LeaseExpiresAt.IsZero() {
			if first.IsZero() {
				first = got.LeaseExpiresAt
			}
			last = got.LeaseExpiresAt
		}
		if got.Status == task.StatusPending && got.Holds == 1 {
			assert.Contains(t, got.LastError, "did not answer within 4s")
			break
		}
		require.True(t, time.Now().Before(deadline), "the task was never held: %s", got.Status)
		time.Sleep(20 * time.Millisecond)
	}
	require.False(t, first.IsZero(), "the claim was seen")
	assert.True(t, last.After(first.Add(ttl)), "the lease was renewed while the check ran: first %s, last %s", first, last)
	assert.Empty(t, h.ids())
}

// unreachableHeartbeats is a store whose lease renewals fail (the runner
// lost the database) while everything else works.
type unreachableHeartbeats struct {
	*repository.Store
	failing atomic.Bool
}

func (s *unreachableHeartbeats) Heartbeat(ctx context.Context, id int64, owner string, ttl time.Duration) (repository.LeaseState, error) {
	if s.failing.Load() {
		return repository.LeaseState{}, errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
	}
	return s.Store.Heartbeat(ctx, id, owner, ttl)
}

// causeRecorder blocks in Handle until its context ends and remembers why.
type causeRecorder struct{ cause chan error }

func (c causeRecorder) Handle(ctx context.Context, _ task.Task) {
	<-ctx.Done()
	c.cause <- context.Cause(ctx)
}

// A runner that cannot renew its lease for a whole TTL stops its agent:
// by then the task may have been rescued and started elsewhere, and two
// agents must not write to one branch. Failures shorter than the TTL do
// not stop it.
func TestRunStopsWhenItsLeaseCannotBeRenewedForAWholeTTL(t *testing.T) {
	tests := []struct {
		name     string
		outage   time.Duration
		wantStop bool
	}{
		{name: "a blip shorter than the lease", outage: 150 * time.Millisecond},
		{name: "an outage longer than the lease", outage: time.Hour, wantStop: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := &unreachableHeartbeats{Store: pgtest.Store(t)}
			createTask(t, store.Store, repository.NewTask{IssueNumber: 5})
			h := causeRecorder{cause: make(chan error, 1)}
			const ttl = 300 * time.Millisecond
			d := New(Config{Owner: "r1", MaxConcurrency: 1, PollInterval: time.Hour, LeaseTTL: ttl,
				Agents: []Agent{{Login: "coder1", MaxConcurrency: 1, Enabled: true}}}, store, fakeIssues{}, h)
			store.failing.Store(true)
			time.AfterFunc(tt.outage, func() { store.failing.Store(false) })
			stop := run(d)
			defer stop()

			select {
			case cause := <-h.cause:
				require.True(t, tt.wantStop, "stopped after an outage shorter than the lease: %v", cause)
				assert.ErrorIs(t, cause, task.ErrLeaseLost)
			case <-time.After(10 * ttl):
				require.False(t, tt.wantStop, "the run went on without its lease")
			}
		})
	}
}

// A task that someone else ended while its agent ran stops the agent as
// soon as the end is notified (not at the next heartbeat); one the agent
// ended itself does not.
func TestAnEndedTaskStopsItsAgentUnlessTheAgentEndedIt(t *testing.T) {
	tests := []struct {
		name     string
		actor    string
		wantStop bool
	}{
		{name: "merged by the lead", actor: "lead", wantStop: true},
		{name: "closed by mozi", actor: "", wantStop: true},
		{name: "reviewed by the agent itself", actor: "coder1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := pgtest.Store(t)
			tk := createTask(t, store, repository.NewTask{IssueNumber: 5})
			h := causeRecorder{cause: make(chan error, 1)}
			d := New(Config{Owner: "r1", MaxConcurrency: 1, PollInterval: time.Hour, LeaseTTL: time.Hour,
				Agents: []Agent{{Login: "coder1", MaxConcurrency: 1, Enabled: true}}}, store, fakeIssues{}, h)
			stop := run(d)
			defer stop()
			require.Eventually(t, func() bool {
				got, err := store.Task(context.Background(), tk.ID)
				return err == nil && got.Status == task.StatusClaimed
			}, 10*time.Second, 10*time.Millisecond)

			_, err := store.Apply(context.Background(), tk.ID, task.EventComplete, repository.Change{Actor: tt.actor})
			require.NoError(t, err)
			kicked := time.Now()
			d.TaskEnded(tk.ID) // the notification (the hour-long lease never beats meanwhile)
			if tt.wantStop {
				select {
				case cause := <-h.cause:
					assert.ErrorIs(t, cause, task.ErrTaskEnded)
				case <-time.After(10 * time.Second):
					t.Fatal("the agent was not stopped")
				}
				return
			}
			// The keeper looked (its heartbeat renewed the lease) and let
			// the agent go on.
			require.Eventually(t, func() bool {
				got, err := store.Task(context.Background(), tk.ID)
				return err == nil && got.HeartbeatAt.After(kicked.Add(-time.Millisecond))
			}, 10*time.Second, 10*time.Millisecond)
			select {
			case cause := <-h.cause:
				t.Fatalf("stopped though the agent ended its task itself: %v", cause)
			default:
			}
		})
	}
}

// A run whose own outcome was recorded (the task finished, its lease
// dropped) and that is kicked before it returns is not a lost lease: the
// keeper lets the run end by itself instead of stopping it as if another
// runner held the task.
func TestOwnRecordedOutcomeIsNotALostLease(t *testing.T) {
	store := pgtest.Store(t)
	tk := createTask(t, store, repository.NewTask{IssueNumber: 5})
	h := causeRecorder{cause: make(chan error, 1)}
	var logs lockedBuffer
	d := New(Config{Owner: "r1", MaxConcurrency: 1, PollInterval: time.Hour, LeaseTTL: time.Hour,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Agents: []Agent{{Login: "coder1", MaxConcurrency: 1, Enabled: true}}}, store, fakeIssues{}, h)
	stop := run(d)
	defer stop()
	require.Eventually(t, func() bool {
		got, err := store.Task(context.Background(), tk.ID)
		return err == nil && got.Status == task.StatusClaimed
	}, 10*time.Second, 10*time.Millisecond)

	ctx := context.Background()
	_, err := store.Apply(ctx, tk.ID, task.EventComplete, repository.Change{Actor: "coder1"})
	require.NoError(t, err)
	require.NoError(t, store.DropLease(ctx, tk.ID, "r1")) // as recording the run's outcome does
	d.TaskEnded(tk.ID)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "the run is over") },
		10*time.Second, 10*time.Millisecond, "the keeper looked")
	assert.NotContains(t, logs.String(), "lease lost")
	select {
	case cause := <-h.cause:
		t.Fatalf("the run was stopped: %v", cause)
	default:
	}
}

// lockedBuffer is a log destination a test reads while the dispatcher
// writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
