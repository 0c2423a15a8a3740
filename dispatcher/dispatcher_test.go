package dispatcher

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/pgtest"
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

func (r *recorder) Handle(ctx context.Context, t repository.Task) {
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
	if _, err := r.store.Apply(context.WithoutCancel(ctx), t.ID, repository.EventComplete, repository.Change{}); err != nil {
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

func (f fakeIssues) Issue(_ context.Context, repo string, n int) (repository.Issue, error) {
	state := "closed"
	if f.open[n] {
		state = "open"
	}
	return repository.Issue{Repo: repo, Number: n, State: state}, nil
}

func (f fakeIssues) BlockedBy(context.Context, string, int) ([]int, error) { return nil, nil }

func createTask(t *testing.T, store *repository.Store, n repository.NewTask) repository.Task {
	t.Helper()
	if n.Repo == "" {
		n.Repo = "acme/widget"
	}
	if n.ActionType == "" {
		n.ActionType = repository.ActionIssueAssigned
	}
	if n.Agent == "" {
		n.Agent = "coder1"
	}
	task, err := store.CreateTask(context.Background(), n)
	require.NoError(t, err)
	return task
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
		time.Sleep(20 * time.Millisecond)
	}
	pending, err := store.ListTasks(ctx, repository.TaskFilter{Status: repository.StatusPending})
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
		wantStatus  repository.Status
		wantError   string
	}{
		{name: "mention chain too long fails", task: repository.NewTask{ActionType: repository.ActionMention, HopCount: 5},
			wantStatus: repository.StatusFailed, wantError: "mention chain of 5 hops"},
		{name: "issue spawn budget holds", spawnsToday: 3,
			wantStatus: repository.StatusPending, wantError: "3 spawns on this issue in 24h (budget 3)"},
		{name: "open dependency holds", task: repository.NewTask{DependsOn: []int{7}}, open: map[int]bool{7: true},
			wantStatus: repository.StatusPending, wantError: "waits for #7"},
		{name: "closed dependency passes", task: repository.NewTask{DependsOn: []int{7}},
			wantStatus: repository.StatusClaimed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := pgtest.Store(t)
			ctx := context.Background()
			agents := []Agent{{Login: "coder1", MaxConcurrency: 1, Enabled: true}}
			tt.task.IssueNumber = 4
			task := createTask(t, store, tt.task)
			for i := range tt.spawnsToday {
				past := task
				past.ID = createTask(t, store, repository.NewTask{IssueNumber: 4, ActionType: repository.ActionMention,
					Agent: "coder1", DedupeKey: string(rune('a' + i))}).ID
				_, err := store.StartAttempt(ctx, past, "r0", "")
				require.NoError(t, err)
				_, err = store.Apply(ctx, past.ID, repository.EventCancel, repository.Change{Error: "test"})
				require.NoError(t, err)
			}
			h := newRecorder(store, false)
			d := New(Config{Owner: "r1", MaxConcurrency: 1, PollInterval: time.Hour, Agents: agents,
				SpawnsPerIssuePerDay: 3, MaxHops: 4}, store, fakeIssues{open: tt.open}, h)
			stop := run(d)
			if tt.wantStatus == repository.StatusClaimed {
				assert.Equal(t, task.ID, receive(t, h.got))
				stop()
				return
			}
			require.Eventually(t, func() bool {
				got, err := store.Task(ctx, task.ID)
				return err == nil && got.DispatchCount == 1 && got.Status == tt.wantStatus && got.LeaseOwner == ""
			}, 10*time.Second, 10*time.Millisecond)
			stop()
			got, err := store.Task(ctx, task.ID)
			require.NoError(t, err)
			assert.Contains(t, got.LastError, tt.wantError)
			assert.Empty(t, h.ids(), "a guarded task is never handed to the spawner")
			if tt.wantStatus == repository.StatusPending {
				assert.True(t, got.NotBefore.After(time.Now().Add(time.Minute)), "it waits before the next claim")
			}
		})
	}
}
