package repository_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/pgtest"
	"github.com/moziplus/mozi/repository/task"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// setup returns a store on a fresh database and a raw pool on the same
// database, for arranging rows the state machine would take long to reach.
func setup(t *testing.T) (*repository.Store, *pgxpool.Pool) {
	t.Helper()
	url := pgtest.URL(t)
	store, err := repository.Open(context.Background(), url, repository.Options{})
	require.NoError(t, err)
	t.Cleanup(store.Close)
	raw, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(raw.Close)
	return store, raw
}

func newTask(issue int) repository.NewTask {
	return repository.NewTask{
		Repo:        "acme/widget",
		IssueNumber: issue,
		ActionType:  task.ActionIssueAssigned,
		Agent:       "coder1",
		Priority:    task.DefaultPriority,
	}
}

func TestMigrationsUpDownUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.EmptyURL(t))
	require.NoError(t, err)
	defer pool.Close()
	m, err := repository.NewMigrator(pool)
	require.NoError(t, err)
	defer m.Close()

	tableExists := func(name string) bool {
		var exists bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&exists))
		return exists
	}
	tables := []string{"task_state", "task_attempts", "mention_queue", "webhook_deliveries",
		"webhook_effects", "issues", "pull_requests", "commit_statuses"}

	current, err := m.Current(ctx)
	require.NoError(t, err)
	assert.False(t, current, "an empty database is not current")

	applied, err := m.Up(ctx)
	require.NoError(t, err)
	assert.Positive(t, applied)
	for _, table := range tables {
		assert.True(t, tableExists(table), table)
	}
	status, err := m.Status(ctx)
	require.NoError(t, err)
	for _, st := range status {
		assert.True(t, st.Applied, st.Name)
	}

	rolledBack, err := m.DownTo(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, applied, rolledBack)
	for _, table := range tables {
		assert.False(t, tableExists(table), table)
	}
	more, err := m.Down(ctx)
	require.NoError(t, err)
	assert.False(t, more, "nothing left to roll back")

	again, err := m.Up(ctx)
	require.NoError(t, err)
	assert.Equal(t, applied, again)
	current, err = m.Current(ctx)
	require.NoError(t, err)
	assert.True(t, current)
}

// legal is the state machine of SPEC §3 (plus cancelled), written out
// independently of the implementation's rule table.
var legal = map[task.Event][]task.Status{
	task.EventClaim:          {"pending"},
	task.EventStart:          {"claimed"},
	task.EventRelease:        {"claimed"},
	task.EventOpenReview:     {"pending", "claimed", "working"},
	task.EventRequestChanges: {"review"},
	task.EventRetry:          {"claimed", "working"},
	task.EventInterrupt:      {"claimed", "working"},
	task.EventRescue:         {"claimed", "working"},
	task.EventReclaim:        {"pending"},
	task.EventNudge:          {"working"},
	task.EventComplete:       {"pending", "claimed", "working", "review", "waiting"},
	task.EventFail:           {"pending", "claimed", "working", "review", "waiting"},
	task.EventCancel:         {"pending", "claimed", "working", "review", "waiting"},
	task.EventRequeue:        {"failed", "cancelled"},
	task.EventWait:           {"working", "review"},
	task.EventAnswer:         {"waiting"},
	task.EventGreen:          {"waiting"},
}

var targets = map[task.Event]task.Status{
	task.EventClaim:          "claimed",
	task.EventStart:          "working",
	task.EventRelease:        "pending",
	task.EventOpenReview:     "review",
	task.EventRequestChanges: "working",
	task.EventRetry:          "pending",
	task.EventInterrupt:      "pending",
	task.EventRescue:         "pending",
	task.EventReclaim:        "working",
	task.EventNudge:          "pending",
	task.EventComplete:       "done",
	task.EventFail:           "failed",
	task.EventCancel:         "cancelled",
	task.EventRequeue:        "pending",
	task.EventWait:           "waiting",
	task.EventAnswer:         "pending",
	task.EventGreen:          "review",
}

func TestEveryTransition(t *testing.T) {
	t.Parallel()
	store, raw := setup(t)
	ctx := context.Background()
	require.Len(t, legal, len(task.Events), "every event has an expectation")

	issue := 0
	for _, ev := range task.Events {
		for _, from := range task.Statuses {
			issue++
			want := contains(legal[ev], from)
			t.Run(string(ev)+"/from_"+string(from), func(t *testing.T) {
				tk, err := store.CreateTask(ctx, newTask(issue))
				require.NoError(t, err)
				forceStatus(t, raw, tk.ID, from)
				if ev == task.EventGreen {
					// Green ends a wait for a red head only.
					_, err := raw.Exec(ctx, `UPDATE task_state SET wait_reason = 'ci_red' WHERE id = $1 AND status = 'waiting'`, tk.ID)
					require.NoError(t, err)
				}
				if ev == task.EventNudge {
					// The watchdog nudges tasks whose run has ended.
					_, err := raw.Exec(ctx, `UPDATE task_state SET lease_owner = NULL, lease_expires_at = NULL WHERE id = $1`, tk.ID)
					require.NoError(t, err)
				}

				res, err := store.Apply(ctx, tk.ID, ev, repository.Change{
					LeaseOwner: "runner-1", Error: "boom", PRNumber: 42,
				})
				require.NoError(t, err)
				assert.Equal(t, want, res.Applied, "applied")
				assert.Equal(t, from, res.From, "status seen by the event")

				got, err := store.Task(ctx, tk.ID)
				require.NoError(t, err)
				if want {
					assert.Equal(t, targets[ev], got.Status)
				} else {
					assert.Equal(t, from, got.Status, "an illegal event changes nothing")
					assert.Equal(t, tk.RetryCount, got.RetryCount)
				}
			})
		}
	}
}

// forceStatus puts a task straight into a status, with an expired lease held
// by runner-1 where the status implies a running agent.
func forceStatus(t *testing.T, raw *pgxpool.Pool, id int64, st task.Status) {
	t.Helper()
	running := st == task.StatusClaimed || st == task.StatusWorking
	_, err := raw.Exec(context.Background(), `UPDATE task_state SET status = $2,
		wait_reason = CASE WHEN $2 = 'waiting' THEN 'question' ELSE wait_reason END,
		lease_owner = CASE WHEN $3 THEN 'runner-1' END,
		lease_expires_at = CASE WHEN $3 THEN now() - interval '1 second' END WHERE id = $1`,
		id, string(st), running)
	require.NoError(t, err)
}

func TestTransitionEffects(t *testing.T) {
	t.Parallel()
	store, raw := setup(t)
	ctx := context.Background()

	t.Run("claim takes a lease and counts the dispatch", func(t *testing.T) {
		tk, err := store.CreateTask(ctx, newTask(1))
		require.NoError(t, err)
		res, err := store.Apply(ctx, tk.ID, task.EventClaim,
			repository.Change{LeaseOwner: "runner-a", LeaseTTL: time.Minute})
		require.NoError(t, err)
		require.True(t, res.Applied)
		got, err := store.Task(ctx, tk.ID)
		require.NoError(t, err)
		assert.Equal(t, "runner-a", got.LeaseOwner)
		assert.Equal(t, 1, got.DispatchCount)
		assert.WithinDuration(t, time.Now().Add(time.Minute), got.LeaseExpiresAt, 10*time.Second)

		res, err = store.Apply(ctx, tk.ID, task.EventStart, repository.Change{LeaseOwner: "runner-b"})
		require.NoError(t, err)
		assert.False(t, res.Applied, "another runner cannot start a task it does not hold")
		res, err = store.Apply(ctx, tk.ID, task.EventRescue, repository.Change{})
		require.NoError(t, err)
		assert.False(t, res.Applied, "a live lease is not rescued")
	})

	t.Run("retry counts, backs off and drops the lease", func(t *testing.T) {
		tk, err := store.CreateTask(ctx, newTask(2))
		require.NoError(t, err)
		forceStatus(t, raw, tk.ID, task.StatusWorking)
		later := time.Now().Add(time.Hour).Truncate(time.Millisecond)
		res, err := store.Apply(ctx, tk.ID, task.EventRetry,
			repository.Change{NotBefore: later, Error: "exit status 1"})
		require.NoError(t, err)
		require.True(t, res.Applied)
		got, err := store.Task(ctx, tk.ID)
		require.NoError(t, err)
		assert.Equal(t, 1, got.RetryCount)
		assert.Equal(t, "exit status 1", got.LastError)
		assert.True(t, later.Equal(got.NotBefore), "not_before %v", got.NotBefore)
		assert.Empty(t, got.LeaseOwner)
	})

	t.Run("open review records the pull request", func(t *testing.T) {
		tk, err := store.CreateTask(ctx, newTask(3))
		require.NoError(t, err)
		forceStatus(t, raw, tk.ID, task.StatusWorking)
		_, err = store.Apply(ctx, tk.ID, task.EventOpenReview, repository.Change{PRNumber: 7})
		require.NoError(t, err)
		got, err := store.Task(ctx, tk.ID)
		require.NoError(t, err)
		assert.Equal(t, 7, got.PRNumber)
		assert.Equal(t, task.StatusReview, got.Status)
	})

	t.Run("terminal event on a terminal task is ignored", func(t *testing.T) {
		tk, err := store.CreateTask(ctx, newTask(4))
		require.NoError(t, err)
		forceStatus(t, raw, tk.ID, task.StatusWorking)
		first, err := store.Apply(ctx, tk.ID, task.EventComplete, repository.Change{})
		require.NoError(t, err)
		second, err := store.Apply(ctx, tk.ID, task.EventComplete, repository.Change{})
		require.NoError(t, err)
		assert.True(t, first.Applied)
		assert.False(t, second.Applied)
		assert.Equal(t, task.StatusDone, second.From)
		got, err := store.Task(ctx, tk.ID)
		require.NoError(t, err)
		assert.False(t, got.FinishedAt.IsZero())
	})

	t.Run("unknown task", func(t *testing.T) {
		_, err := store.Apply(ctx, 999999, task.EventComplete, repository.Change{})
		require.ErrorIs(t, err, task.ErrNotFound)
	})
}

func TestRacingTerminalEventsExactlyOneWins(t *testing.T) {
	t.Parallel()
	store, raw := setup(t)
	ctx := context.Background()
	events := []task.Event{
		task.EventComplete, task.EventFail, task.EventCancel, task.EventComplete,
	}
	for round := range 20 {
		tk, err := store.CreateTask(ctx, newTask(100+round))
		require.NoError(t, err)
		forceStatus(t, raw, tk.ID, task.StatusWorking)

		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []task.Event
		)
		start := make(chan struct{})
		for _, ev := range events {
			wg.Go(func() {
				<-start
				res, err := store.Apply(ctx, tk.ID, ev, repository.Change{Error: "race"})
				assert.NoError(t, err)
				if res.Applied {
					mu.Lock()
					winners = append(winners, ev)
					mu.Unlock()
				}
			})
		}
		close(start)
		wg.Wait()
		require.Len(t, winners, 1, "round %d: exactly one terminal event wins", round)
		got, err := store.Task(ctx, tk.ID)
		require.NoError(t, err)
		assert.Equal(t, targets[winners[0]], got.Status)
	}
}

func TestDuplicateLiveTaskRejectedByDatabase(t *testing.T) {
	t.Parallel()
	store, raw := setup(t)
	ctx := context.Background()

	first, err := store.CreateTask(ctx, newTask(1))
	require.NoError(t, err)
	_, err = store.CreateTask(ctx, newTask(1))
	require.ErrorIs(t, err, repository.ErrDuplicateTask)

	// Bypassing the Go code entirely, the database still refuses.
	_, err = raw.Exec(ctx, `INSERT INTO task_state (repo, issue_number, action_type, agent)
		VALUES ('acme/widget', 1, 'issue_assigned', 'coder1')`)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	assert.Equal(t, "23505", pgErr.Code)
	assert.Equal(t, "task_state_one_live_idx", pgErr.ConstraintName)

	other := newTask(1)
	other.Agent = "coder2"
	_, err = store.CreateTask(ctx, other)
	require.NoError(t, err, "another agent may work on the same issue")

	_, err = store.Apply(ctx, first.ID, task.EventCancel, repository.Change{Error: "unassigned"})
	require.NoError(t, err)
	_, err = store.CreateTask(ctx, newTask(1))
	require.NoError(t, err, "once the first is terminal a new live task is allowed")

	_, err = store.Apply(ctx, first.ID, task.EventRequeue, repository.Change{})
	require.ErrorIs(t, err, repository.ErrDuplicateTask, "requeue cannot make a second live task")
}

func TestDedupeKeyIsForever(t *testing.T) {
	t.Parallel()
	store, _ := setup(t)
	ctx := context.Background()
	n := newTask(4)
	n.ActionType = task.ActionCIFailure
	n.DedupeKey = "pr4/abc123/ci/test"
	tk, err := store.CreateTask(ctx, n)
	require.NoError(t, err)
	_, err = store.Apply(ctx, tk.ID, task.EventComplete, repository.Change{})
	require.NoError(t, err)
	_, err = store.CreateTask(ctx, n)
	require.ErrorIs(t, err, repository.ErrDuplicateTask, "the same CI failure never makes a second task")
}

func TestCreateTaskValidation(t *testing.T) {
	t.Parallel()
	store, _ := setup(t)
	tests := []struct {
		name   string
		mutate func(*repository.NewTask)
	}{
		{"repo without owner", func(n *repository.NewTask) { n.Repo = "widget" }},
		{"zero issue", func(n *repository.NewTask) { n.IssueNumber = 0 }},
		{"no agent", func(n *repository.NewTask) { n.Agent = "" }},
		{"unknown action", func(n *repository.NewTask) { n.ActionType = "deploy" }},
		{"unknown business type", func(n *repository.NewTask) { n.BusinessType = "chore" }},
		{"priority out of range", func(n *repository.NewTask) { n.Priority = 7 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newTask(1)
			tt.mutate(&n)
			_, err := store.CreateTask(context.Background(), n)
			require.Error(t, err)
		})
	}
}

func TestTaskRoundTrip(t *testing.T) {
	t.Parallel()
	store, _ := setup(t)
	ctx := context.Background()
	updated := time.Date(2026, 11, 22, 23, 48, 5, 0, time.UTC)
	n := repository.NewTask{
		Repo: "acme/widget", IssueNumber: 2, PRNumber: 6, ParentIssue: 1,
		ActionType: task.ActionIssueAssigned, BusinessType: task.BusinessBug,
		Agent: "coder1", Priority: 0, MaxRetries: 5, DependsOn: []int{1, 3},
		Meta:      task.Meta{Event: "issues", Title: "Token bucket", Labels: []string{"type/bug"}},
		IssueBody: "Parent: #1", IssueUpdatedAt: updated, HopCount: 2,
	}
	created, err := store.CreateTask(ctx, n)
	require.NoError(t, err)
	got, err := store.Task(ctx, created.ID)
	require.NoError(t, err)
	assert.Equal(t, created, got)
	assert.Equal(t, task.StatusPending, got.Status)
	assert.Equal(t, 6, got.PRNumber)
	assert.Equal(t, 1, got.ParentIssue)
	assert.Equal(t, []int{1, 3}, got.DependsOn)
	assert.Equal(t, 5, got.MaxRetries)
	assert.Equal(t, "Token bucket", got.Meta.Title)
	assert.True(t, updated.Equal(got.IssueUpdatedAt))

	live, err := store.ListTasks(ctx, repository.TaskFilter{Repo: "acme/widget", IssueNumber: 2,
		ActionType: task.ActionIssueAssigned, Agent: "coder1"})
	require.NoError(t, err)
	require.Len(t, live, 1)
	assert.Equal(t, created.ID, live[0].ID)

	list, err := store.ListTasks(ctx, repository.TaskFilter{Status: task.StatusPending, Repo: "acme/widget"})
	require.NoError(t, err)
	require.Len(t, list, 1)
	list, err = store.ListTasks(ctx, repository.TaskFilter{Status: task.StatusDone})
	require.NoError(t, err)
	assert.Empty(t, list)
}

func contains(list []task.Status, s task.Status) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// A pending issue task names the issues it waits for: its Depends: lines
// and Gitea's blocked-by, while open; only issue work waits.
func TestOpenDependencies(t *testing.T) {
	ctx := context.Background()
	store, _ := setup(t)
	now := time.Now()
	for _, i := range []task.Issue{
		{Repo: "acme/widget", Number: 1, State: task.StateOpen},
		{Repo: "acme/widget", Number: 3, State: task.StateClosed, ClosedAt: now},
		{Repo: "acme/widget", Number: 4, State: task.StateOpen},
		{Repo: "acme/widget", Number: 9, State: task.StateOpen},
	} {
		i.UpdatedAt = now
		require.NoError(t, store.SaveIssue(ctx, i))
	}
	require.NoError(t, store.CacheBlockedBy(ctx, "acme/widget", 9, []int{4}))

	work := newTask(9)
	work.DependsOn = []int{1, 3}
	assigned, err := store.CreateTask(ctx, work)
	require.NoError(t, err)
	mention := newTask(9)
	mention.ActionType, mention.Agent, mention.DependsOn = task.ActionMention, "coder2", []int{1}
	notice, err := store.CreateTask(ctx, mention)
	require.NoError(t, err)

	open, err := store.OpenDependencies(ctx, assigned.ID)
	require.NoError(t, err)
	assert.Equal(t, []int{1, 4}, open, "#3 is closed")
	open, err = store.OpenDependencies(ctx, notice.ID)
	require.NoError(t, err)
	assert.Empty(t, open, "a mention does not wait")
	_, err = store.OpenDependencies(ctx, 4242)
	assert.ErrorIs(t, err, task.ErrNotFound)
}

// The watchdog fails a stalled task only if it is still stalled when the
// failure is written: what arrived since it was listed wins.
func TestFailStalledOnlyFailsWhatIsStillStalled(t *testing.T) {
	tests := []struct {
		name    string
		arrange string // SQL run on the task after it stalled ($1: its id)
		want    bool
	}{
		{name: "still stalled", want: true},
		{name: "its pull request moved it to review", arrange: `UPDATE task_state SET status = 'review' WHERE id = $1`},
		{name: "an agent runs it again", arrange: `UPDATE task_state SET lease_owner = 'r2', lease_expires_at = now() + interval '1 minute' WHERE id = $1`},
		{name: "it moved a moment ago", arrange: `UPDATE task_state SET updated_at = now() WHERE id = $1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			store, raw := setup(t)
			tk, err := store.CreateTask(ctx, newTask(8))
			require.NoError(t, err)
			_, err = raw.Exec(ctx, `UPDATE task_state SET status = 'working', updated_at = now() - interval '1 hour' WHERE id = $1`, tk.ID)
			require.NoError(t, err)
			if tt.arrange != "" {
				_, err = raw.Exec(ctx, tt.arrange, tk.ID)
				require.NoError(t, err)
			}

			res, err := store.FailStalled(ctx, tk.ID, 30*time.Minute, "no pull request, also after a follow-up", "")
			require.NoError(t, err)
			assert.Equal(t, tt.want, res.Applied)
			got, err := store.Task(ctx, tk.ID)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got.Status == task.StatusFailed, "status %s", got.Status)
		})
	}
}

// Writers of a task's meta that share no lock never undo each other: a
// patch leaves every field it does not name as the row has it.
func TestPatchTaskMetaKeepsWhatItDoesNotName(t *testing.T) {
	ctx := context.Background()
	store, _ := setup(t)
	n := newTask(12)
	n.Meta = task.Meta{Title: "Token bucket", ReportMissed: []string{"Tests"}, Extra: map[string]string{"a": "1"}}
	tk, err := store.CreateTask(ctx, n)
	require.NoError(t, err)
	require.NoError(t, store.PatchTaskMeta(ctx, tk.ID, task.Meta{FollowUp: task.FollowUpReport}))

	require.NoError(t, store.PatchTaskMeta(ctx, tk.ID, task.Meta{Report: map[string]string{"Tests": "added"},
		CommentID: 77, Extra: map[string]string{"b": "2"}}, task.MetaReportMissing))

	got, err := store.Task(ctx, tk.ID)
	require.NoError(t, err)
	assert.Equal(t, task.Meta{Title: "Token bucket", Report: map[string]string{"Tests": "added"}, CommentID: 77,
		FollowUp: task.FollowUpReport, Extra: map[string]string{"a": "1", "b": "2"}}, got.Meta)
	assert.ErrorIs(t, store.PatchTaskMeta(ctx, 4242, task.Meta{Title: "x"}), task.ErrNotFound)
}

// A run that starts clears the reason of the hold or retry before it: the
// task list shows no stale error next to a task that runs (each attempt
// keeps its own).
func TestStartClearsTheLastError(t *testing.T) {
	ctx := context.Background()
	store, _ := setup(t)
	tk, err := store.CreateTask(ctx, newTask(21))
	require.NoError(t, err)
	claim := func() task.Task {
		got, err := store.ClaimTasks(ctx, repository.ClaimRequest{Owner: "r1", Limit: 1, LeaseTTL: time.Minute,
			Agents: []repository.AgentLimit{{Login: "coder1", MaxConcurrency: 1}}})
		require.NoError(t, err)
		require.Len(t, got, 1)
		return got[0]
	}
	claim()
	_, err = store.Apply(ctx, tk.ID, task.EventRelease, repository.Change{Error: "dependencies unknown: Gitea down"})
	require.NoError(t, err)
	held, err := store.Task(ctx, tk.ID)
	require.NoError(t, err)
	require.Equal(t, "dependencies unknown: Gitea down", held.LastError)

	_, started, err := store.StartRun(ctx, claim(), "r1", "")
	require.NoError(t, err)
	require.True(t, started)
	running, err := store.Task(ctx, tk.ID)
	require.NoError(t, err)
	assert.Empty(t, running.LastError)
}
