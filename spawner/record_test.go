package spawner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/prompts"
	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/pgtest"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/spawner/backend"
	"github.com/moziplus/mozi/spawner/backend/backendtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// blinkingStore is the real store whose FinishRun fails while the database
// is "away"; whileAway runs at the first failure (the world moving on
// meanwhile: the ticker rescuing the run whose lease expired).
type blinkingStore struct {
	*repository.Store
	away      atomic.Bool
	failures  atomic.Int32
	whileAway func()
}

var errDatabaseAway = errors.New("dial unix /run/postgresql/.s.PGSQL.5432: connect: connection refused")

func (b *blinkingStore) FinishRun(ctx context.Context, e repository.RunEnd) (repository.Result, error) {
	if b.away.Load() {
		if b.failures.Add(1) == 1 && b.whileAway != nil {
			b.whileAway()
		}
		return repository.Result{}, errDatabaseAway
	}
	return b.Store.FinishRun(ctx, e)
}

// succeeding is an agent that exits 0 at once.
func succeeding() *backendtest.Backend { return &backendtest.Backend{} }

// claimed makes an issue_assigned task and claims it for runner r1 with a
// lease that expires quickly.
func claimed(t *testing.T, store *repository.Store) task.Task {
	t.Helper()
	ctx := context.Background()
	_, err := store.CreateTask(ctx, repository.NewTask{Repo: "acme/widget", IssueNumber: 3,
		ActionType: task.ActionIssueAssigned, BusinessType: task.BusinessBug, Agent: "coder1", Priority: 2})
	require.NoError(t, err)
	tasks, err := store.ClaimTasks(ctx, repository.ClaimRequest{Owner: "r1", Limit: 1, LeaseTTL: 200 * time.Millisecond,
		Agents: []repository.AgentLimit{{Login: "coder1", MaxConcurrency: 1}}})
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	return tasks[0]
}

// staticPrompt is a prompter that needs no issue.
type staticPrompt struct{}

func (staticPrompt) Gather(_ context.Context, t task.Task) (*prompts.Input, error) {
	return &prompts.Input{Task: t}, nil
}

func (staticPrompt) Build(*prompts.Input) (*prompts.Prompt, error) {
	return &prompts.Prompt{Text: "do it"}, nil
}

func newTestSpawner(t *testing.T, store Store, b backend.Backend, stateDir string) *Spawner {
	return New(Config{Owner: "r1", StateDir: stateDir, Agents: map[string]Agent{"coder1": {Agent: backend.Agent{Login: "coder1",
		Argv: []string{"/bin/true"}, Workdir: t.TempDir()}, Timeout: time.Minute}}}, store, b, staticPrompt{})
}

// rescueOnceExpired plays the ticker: it moves the database's clock past
// the task's lease (its runner could not renew it: the database was away)
// and rescues the task.
func rescueOnceExpired(t *testing.T, store *repository.Store, clock *pgtest.Clock, id int64) {
	clock.Advance(2 * time.Minute) // past the lease and the runner's silence
	rescued, err := store.RescueExpired(context.Background(), time.Minute)
	require.NoError(t, err)
	if assert.Len(t, rescued, 1, "the run was not rescued") {
		assert.Equal(t, id, rescued[0].ID)
	}
}

func assertRecordedOnce(t *testing.T, store *repository.Store, id int64) {
	t.Helper()
	got, err := store.Task(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, task.StatusWorking, got.Status, "the run succeeded: the task waits for Gitea")
	assert.Empty(t, got.LeaseOwner)
	assert.Equal(t, 1, got.DispatchCount)
	assert.Equal(t, 0, got.RetryCount)
	attempts, err := store.Attempts(context.Background(), id)
	require.NoError(t, err)
	require.Len(t, attempts, 1)
	assert.Equal(t, task.AttemptSucceeded, attempts[0].Outcome, "the rescue's 'runner lost' is replaced by the real outcome")
}

// PostgreSQL drops as a run finishes, long enough for the lease to expire
// and the ticker to rescue the task: the runner keeps trying, records the
// real outcome when the database is back, and the task does not run again.
func TestRunRecordedAfterADatabaseBlip(t *testing.T) {
	real, clock := pgtest.StoreWithClock(t)
	tk := claimed(t, real)
	store := &blinkingStore{Store: real}
	store.away.Store(true)
	store.whileAway = func() {
		go func() {
			rescueOnceExpired(t, real, clock, tk.ID)
			store.away.Store(false)
		}()
	}
	runner := succeeding()
	sp := newTestSpawner(t, store, runner, t.TempDir())
	sp.Handle(context.Background(), tk)

	assert.Positive(t, store.failures.Load(), "recording failed while the database was away")
	assertRecordedOnce(t, real, tk.ID)
	got, err := real.ClaimTasks(context.Background(), repository.ClaimRequest{Owner: "r2", Limit: 1,
		LeaseTTL: time.Minute, Agents: []repository.AgentLimit{{Login: "coder1", MaxConcurrency: 1}}})
	require.NoError(t, err)
	assert.Empty(t, got, "nothing to run again")
	assert.Len(t, runner.Steps(), 1)
}

// mozi stops while the database is still away: the outcome stays on disk
// next to the attempt's log and is recorded at the next start.
func TestRunKeptOnDiskWhenMoziStops(t *testing.T) {
	real, clock := pgtest.StoreWithClock(t)
	tk := claimed(t, real)
	store := &blinkingStore{Store: real}
	store.away.Store(true)
	stateDir := t.TempDir()
	done := make(chan struct{})
	store.whileAway = func() { time.AfterFunc(100*time.Millisecond, func() { close(done) }) }
	sp := newTestSpawner(t, store, succeeding(), stateDir)
	sp.cfg.Done = done // mozi's end, after its shutdown grace
	sp.Handle(context.Background(), tk)

	kept, err := filepath.Glob(filepath.Join(stateDir, "logs", "*", "*"+outcomeSuffix))
	require.NoError(t, err)
	require.Len(t, kept, 1, "the outcome is on disk")
	rescueOnceExpired(t, real, clock, tk.ID)

	// The next start, with the database back.
	n, err := newTestSpawner(t, real, succeeding(), stateDir).RecordLeftovers(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.NoFileExists(t, kept[0])
	assertRecordedOnce(t, real, tk.ID)
}

// failingOnce is an agent that exits 1.
func failingOnce() *backendtest.Backend {
	return &backendtest.Backend{Play: func(backend.Step) backendtest.Script {
		return backendtest.Script{Exit: backend.Exit{Code: 1, Why: "exited with status 1"}}
	}}
}

// A run whose outcome is recorded only after its task was rescued and
// started again by another runner records its attempt and leaves the
// newer run alone: it must neither fail the task nor take its lease.
func TestStaleRunLeavesTheNewerRunsTaskAlone(t *testing.T) {
	ctx := context.Background()
	real, clock := pgtest.StoreWithClock(t)
	tk := claimed(t, real)
	tk.MaxRetries = 0 // r1's failure would be its last: fail
	store := &blinkingStore{Store: real}
	store.away.Store(true)
	stateDir := t.TempDir()
	done := make(chan struct{})
	store.whileAway = func() { time.AfterFunc(100*time.Millisecond, func() { close(done) }) }
	sp := newTestSpawner(t, store, failingOnce(), stateDir)
	sp.cfg.Done = done // r1's mozi stops before the database is back
	sp.Handle(ctx, tk)
	kept, _ := filepath.Glob(filepath.Join(stateDir, "logs", "*", "*"+outcomeSuffix))
	require.Len(t, kept, 1, "r1's outcome waits on disk")
	rescueOnceExpired(t, real, clock, tk.ID)

	got, err := real.ClaimTasks(ctx, repository.ClaimRequest{Owner: "r2", Limit: 1,
		LeaseTTL: time.Minute, Agents: []repository.AgentLimit{{Login: "coder1", MaxConcurrency: 1}}})
	require.NoError(t, err)
	require.Len(t, got, 1)
	_, started, err := real.StartRun(ctx, got[0], "r2", filepath.Join(t.TempDir(), "r2.log"))
	require.NoError(t, err)
	require.True(t, started)

	n, err := newTestSpawner(t, real, succeeding(), stateDir).RecordLeftovers(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "r1's outcome is recorded")
	cur, err := real.Task(ctx, tk.ID)
	require.NoError(t, err)
	assert.Equal(t, task.StatusWorking, cur.Status, "r2's run goes on")
	assert.Equal(t, "r2", cur.LeaseOwner)
	attempts, err := real.Attempts(ctx, tk.ID)
	require.NoError(t, err)
	require.Len(t, attempts, 2)
	assert.Equal(t, "failed", attempts[0].Outcome, "r1's attempt is on record")
}

// startFails is a store whose StartRun does not answer (the database
// blinked as the agent was about to start).
type startFails struct{ *repository.Store }

func (startFails) StartRun(context.Context, task.Task, string, string) (task.Attempt, bool, error) {
	return task.Attempt{}, false, errDatabaseAway
}

// A claim whose run could not be started is given back at once, as a hold:
// not left to expire and counted as a dispatch.
func TestARunThatCouldNotStartGivesItsClaimBack(t *testing.T) {
	ctx := context.Background()
	real := pgtest.Store(t)
	tk := claimed(t, real)
	runner := succeeding()
	newTestSpawner(t, startFails{real}, runner, t.TempDir()).Handle(ctx, tk)

	got, err := real.Task(ctx, tk.ID)
	require.NoError(t, err)
	assert.Equal(t, task.StatusPending, got.Status)
	assert.Empty(t, got.LeaseOwner)
	assert.Equal(t, 0, got.DispatchCount, "the claim was given back")
	assert.Equal(t, 1, got.Holds)
	assert.Contains(t, got.LastError, "not started: dial unix")
	assert.Empty(t, runner.Steps(), "nothing started")
	assert.Equal(t, 1, runner.Released(), "its place was released")
}

// A configuration error found by the backend's check fails the task at
// once, with its line and no retry, and nothing is prepared or started.
func TestAnAgentItsBackendCannotRunFailsAtOnce(t *testing.T) {
	real := pgtest.Store(t)
	tk := claimed(t, real)
	b := &backendtest.Backend{CheckErr: errors.New("agent coder1: command \"fake-agent\" not found on PATH (/nowhere)")}
	newTestSpawner(t, real, b, t.TempDir()).Handle(context.Background(), tk)
	got, err := real.Task(context.Background(), tk.ID)
	require.NoError(t, err)
	assert.Equal(t, task.StatusFailed, got.Status)
	assert.Contains(t, got.LastError, "not found on PATH")
	assert.Equal(t, 0, got.RetryCount, "no retry")
	assert.Empty(t, b.Runs(), "nothing prepared")
	assert.Empty(t, b.Steps(), "nothing started")
}
