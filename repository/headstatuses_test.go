package repository_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/task"
)

func TestCIState(t *testing.T) {
	t.Parallel()
	st := func(ctx, state string) task.CommitStatus { return task.CommitStatus{Context: ctx, State: state} }
	tests := []struct {
		name     string
		statuses []task.CommitStatus
		want     string
		red      []string
	}{
		{name: "no statuses", want: repository.CIGreen},
		{name: "all passed", statuses: []task.CommitStatus{st("a", "success"), st("b", "warning")}, want: repository.CIGreen},
		{name: "one pending", statuses: []task.CommitStatus{st("a", "success"), st("b", "pending")}, want: repository.CIPending},
		{name: "one failed beats pending", statuses: []task.CommitStatus{st("a", "pending"), st("b", "failure"), st("c", "error")},
			want: repository.CIRed, red: []string{"b", "c"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, red := repository.CIState(tc.statuses)
			assert.Equal(t, tc.want, got)
			var names []string
			for _, r := range red {
				names = append(names, r.Context)
			}
			assert.Equal(t, tc.red, names)
		})
	}
}

func TestHeadStatusesKeepTheLatestOfEachContext(t *testing.T) {
	t.Parallel()
	store, _ := setup(t)
	ctx := context.Background()
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	save := func(context, state string, when time.Time) {
		require.NoError(t, store.SaveHeadStatus(ctx, task.CommitStatus{Repo: "acme/widget", SHA: "abc", Context: context,
			State: state, UpdatedAt: when}))
	}
	has, err := store.RepoHasStatuses(ctx, "acme/widget")
	require.NoError(t, err)
	assert.False(t, has)
	save("ci/test", "pending", at)
	save("ci/test", "failure", at.Add(time.Minute))
	save("ci/test", "success", at.Add(-time.Minute)) // an older report arriving late
	save("ci/lint", "success", at)
	got, err := store.HeadStatuses(ctx, "acme/widget", "abc")
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, []string{"ci/lint", "ci/test"}, []string{got[0].Context, got[1].Context})
	assert.Equal(t, []string{"success", "failure"}, []string{got[0].State, got[1].State})
	has, err = store.RepoHasStatuses(ctx, "acme/widget")
	require.NoError(t, err)
	assert.True(t, has)
}

func TestReviewersHeldAndReleasedAndStaleRepairs(t *testing.T) {
	t.Parallel()
	store, _ := setup(t)
	ctx := context.Background()
	create := func(action task.ActionType, agent, sha string) task.Task {
		n := newTask(7)
		n.PRNumber, n.ActionType, n.Agent, n.Meta.HeadSHA = 7, action, agent, sha
		tk, err := store.CreateTask(ctx, n)
		require.NoError(t, err)
		return tk
	}
	review := create(task.ActionReviewRequest, "reviewer1", "")
	other := create(task.ActionMention, "reviewer1", "")

	n, err := store.HoldReviewers(ctx, "acme/widget", 7)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	got, err := store.Task(ctx, review.ID)
	require.NoError(t, err)
	assert.Equal(t, task.HeldForCI, got.HeldFor)
	assert.True(t, got.NotBefore.After(time.Now().AddDate(50, 0, 0)), "not due: %s", got.NotBefore)
	claimed, err := store.ClaimTasks(ctx, repository.ClaimRequest{Owner: "runner-1", Limit: 10, LeaseTTL: time.Minute,
		Agents: []repository.AgentLimit{{Login: "reviewer1", MaxConcurrency: 5}}})
	require.NoError(t, err)
	require.Len(t, claimed, 1, "only the task not held is claimed")
	assert.Equal(t, other.ID, claimed[0].ID)

	n, err = store.HoldReviewers(ctx, "acme/widget", 7)
	require.NoError(t, err)
	assert.Zero(t, n, "held once")
	n, err = store.ReleaseReviewers(ctx, "acme/widget", 7)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	got, err = store.Task(ctx, review.ID)
	require.NoError(t, err)
	assert.Empty(t, got.HeldFor)
	assert.False(t, got.NotBefore.After(time.Now().Add(time.Minute)))

	// Repair rounds: a pending one of an older head is cancelled and not
	// counted; one of the current head stays.
	old := create(task.ActionCIFailure, "coder1", "aaa")
	rounds, err := store.CIRounds(ctx, "acme/widget", 7)
	require.NoError(t, err)
	assert.Equal(t, 1, rounds)
	n, err = store.CancelStaleRepairs(ctx, "acme/widget", 7, "bbb")
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	got, err = store.Task(ctx, old.ID)
	require.NoError(t, err)
	assert.Equal(t, task.StatusCancelled, got.Status)
	current := create(task.ActionCIFailure, "coder1", "bbb")
	n, err = store.CancelStaleRepairs(ctx, "acme/widget", 7, "bbb")
	require.NoError(t, err)
	assert.Zero(t, n)
	rounds, err = store.CIRounds(ctx, "acme/widget", 7)
	require.NoError(t, err)
	assert.Equal(t, 1, rounds, "the superseded round is not counted")
	got, err = store.Task(ctx, current.ID)
	require.NoError(t, err)
	assert.Equal(t, task.StatusPending, got.Status)
}

func TestWaitAndAnswer(t *testing.T) {
	t.Parallel()
	store, raw := setup(t)
	ctx := context.Background()
	tk, err := store.CreateTask(ctx, newTask(3))
	require.NoError(t, err)
	forceStatus(t, raw, tk.ID, task.StatusWorking)
	res, err := store.Apply(ctx, tk.ID, task.EventWait, repository.Change{WaitReason: task.WaitCIRed,
		Question: "CI is still red", Notice: "@alice, CI is still red"})
	require.NoError(t, err)
	require.True(t, res.Applied)
	got, err := store.Task(ctx, tk.ID)
	require.NoError(t, err)
	assert.Equal(t, task.StatusWaiting, got.Status)
	assert.Equal(t, task.WaitCIRed, got.WaitReason)
	assert.Equal(t, "CI is still red", got.Meta.Question)
	assert.Equal(t, "runner-1", got.LeaseOwner, "the run keeps its lease until it records its outcome")
	var notes int
	require.NoError(t, raw.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE kind = 'task_wait' AND issue_number = 3`).Scan(&notes))
	assert.Equal(t, 1, notes)

	res, err = store.Apply(ctx, tk.ID, task.EventAnswer, repository.Change{Answer: "Rebase on main.", AnsweredBy: "alice"})
	require.NoError(t, err)
	require.True(t, res.Applied)
	got, err = store.Task(ctx, tk.ID)
	require.NoError(t, err)
	assert.Equal(t, task.StatusPending, got.Status)
	assert.Empty(t, got.WaitReason)
	assert.Equal(t, "Rebase on main.", got.Meta.Answer)
	assert.Equal(t, "alice", got.Meta.AnsweredBy)
	assert.Equal(t, "CI is still red", got.Meta.Question, "the prompt shows what was asked")

	// Waiting again forgets the old answer.
	forceStatus(t, raw, tk.ID, task.StatusWorking)
	_, err = store.Apply(ctx, tk.ID, task.EventWait, repository.Change{WaitReason: task.WaitQuestion, Question: "Which file?"})
	require.NoError(t, err)
	got, err = store.Task(ctx, tk.ID)
	require.NoError(t, err)
	assert.Empty(t, got.Meta.Answer)
	assert.Equal(t, "Which file?", got.Meta.Question)
}

// TestGreenEndsOnlyAWaitForRedCI: a head turning green moves a task that
// waits because CI stayed red back to review; a question still waits.
func TestGreenEndsOnlyAWaitForRedCI(t *testing.T) {
	t.Parallel()
	store, raw := setup(t)
	ctx := context.Background()
	for i, tc := range []struct {
		reason task.WaitReason
		want   task.Status
	}{{task.WaitCIRed, task.StatusReview}, {task.WaitQuestion, task.StatusWaiting}} {
		t.Run(string(tc.reason), func(t *testing.T) {
			tk, err := store.CreateTask(ctx, newTask(70+i))
			require.NoError(t, err)
			forceStatus(t, raw, tk.ID, task.StatusReview)
			res, err := store.Apply(ctx, tk.ID, task.EventWait, repository.Change{WaitReason: tc.reason, Question: "?"})
			require.NoError(t, err)
			require.True(t, res.Applied)

			res, err = store.Apply(ctx, tk.ID, task.EventGreen, repository.Change{})
			require.NoError(t, err)
			assert.Equal(t, tc.want == task.StatusReview, res.Applied)
			got, err := store.Task(ctx, tk.ID)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got.Status)
			if tc.want == task.StatusReview {
				assert.Empty(t, got.WaitReason)
			} else {
				assert.Equal(t, tc.reason, got.WaitReason)
			}
		})
	}
}
