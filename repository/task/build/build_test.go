package build_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/pgtest"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/repository/task/build"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

var updated = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestFromIssue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		issue task.Issue
		want  repository.NewTask
	}{
		{
			name: "labelled sub-issue",
			issue: task.Issue{Repo: "acme/widget", Number: 7, Title: "Token bucket", Body: "Make it.",
				Author: "lead", Labels: []string{"priority/P1", "kind/feature"}, ParentIssue: 3, DependsOn: []int{4, 5},
				UpdatedAt: updated, Assignees: []string{"coder"}},
			want: repository.NewTask{Repo: "acme/widget", IssueNumber: 7, ParentIssue: 3, ActionType: task.ActionMention,
				Agent: "coder", Priority: 1, DependsOn: []int{4, 5}, IssueBody: "Make it.", IssueUpdatedAt: updated,
				Meta: task.Meta{Title: "Token bucket", Labels: []string{"priority/P1", "kind/feature"}, IssueAuthor: "lead"}},
		},
		{
			name:  "unknown issue: default priority",
			issue: task.Issue{Repo: "acme/widget", Number: 9},
			want: repository.NewTask{Repo: "acme/widget", IssueNumber: 9, ActionType: task.ActionMention, Agent: "coder",
				Priority: task.DefaultPriority},
		},
		{
			name:  "most urgent label wins",
			issue: task.Issue{Repo: "acme/widget", Number: 2, Labels: []string{"priority/P3", "Priority/P0"}},
			want: repository.NewTask{Repo: "acme/widget", IssueNumber: 2, ActionType: task.ActionMention, Agent: "coder",
				Priority: 0, Meta: task.Meta{Labels: []string{"priority/P3", "Priority/P0"}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, build.FromIssue(tc.issue, task.ActionMention, "coder"))
		})
	}
}

func TestFromPullAndRepo(t *testing.T) {
	t.Parallel()
	pr := task.PullRequest{Repo: "acme/widget", Number: 12, Author: "coder", Title: "Add bucket", HeadRef: "feat/7-token-bucket",
		HeadSHA: "abc123", Body: "not kept"}
	assert.Equal(t, repository.NewTask{Repo: "acme/widget", IssueNumber: 12, PRNumber: 12, ActionType: task.ActionCIFailure,
		Agent: "coder", Priority: task.DefaultPriority, Meta: task.Meta{Title: "Add bucket", IssueAuthor: "coder",
			HeadSHA: "abc123", HeadBranch: "feat/7-token-bucket"}},
		build.FromPull(pr, task.ActionCIFailure, "coder"))
	assert.Equal(t, repository.NewTask{Repo: "acme/widget", ActionType: task.ActionDeployFailure, Agent: "infra", Priority: 0},
		build.FromRepo("acme/widget", task.ActionDeployFailure, "infra", 0))
}

func TestPrepareAndPreview(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		configured int // Config.MaxRetries
		own        int // NewTask.MaxRetries
		wantSet    int // after Prepare
		wantRow    int // the max_retries the task gets
	}{
		{"defaults everywhere", 0, 0, 0, task.DefaultMaxRetries},
		{"configured", 5, 0, 5, 5},
		{"configured none", task.NoRetries, 0, task.NoRetries, 0},
		{"the task's own wins", 5, 1, 1, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := build.New(build.Config{MaxRetries: tc.configured})
			n := build.FromIssue(task.Issue{Repo: "acme/widget", Number: 7, Title: "T", Body: "B", Labels: []string{"priority/P1"}},
				task.ActionIssueAssigned, "coder")
			n.MaxRetries = tc.own
			assert.Equal(t, tc.wantSet, b.Prepare(n).MaxRetries)
			p := b.Preview(n)
			assert.Equal(t, tc.wantRow, p.MaxRetries)
			assert.Equal(t, task.StatusPending, p.Status)
			assert.Equal(t, 1, p.Priority)
			assert.Equal(t, "B", p.IssueBodyCache)
			assert.Equal(t, "T", p.Meta.Title)
		})
	}
}

// recorder is the observer: what it was told, in order.
type recorder struct{ told []string }

func (r *recorder) TaskCreated(a task.ActionType) { r.told = append(r.told, "created "+string(a)) }
func (r *recorder) TaskRefused(a task.ActionType, why repository.Refusal) {
	r.told = append(r.told, "refused "+string(a)+" "+string(why))
}

func TestCreateGuardsAndReports(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := pgtest.Store(t)
	closedAt := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	require.NoError(t, store.SaveIssue(ctx, task.Issue{Repo: "acme/widget", Number: 1, Title: "Open", State: task.StateOpen,
		UpdatedAt: updated}))
	require.NoError(t, store.SaveIssue(ctx, task.Issue{Repo: "acme/widget", Number: 2, Title: "Closed", State: task.StateClosed,
		UpdatedAt: closedAt, ClosedAt: closedAt}))

	obs := &recorder{}
	b := build.New(build.Config{MaxRetries: 4, BudgetPerHour: 2, Observer: obs})
	tests := []struct {
		name   string
		number int
		agent  string
		cause  build.Cause
		want   repository.Refusal
	}{
		{"created", 1, "a1", build.Cause{}, ""},
		{"a second live task like it", 1, "a1", build.Cause{}, repository.RefusedDuplicate},
		{"another agent, within the budget", 1, "a2", build.Cause{}, ""},
		{"the budget is spent", 1, "a3", build.Cause{}, repository.RefusedBudget},
		{"caused before the close", 2, "a1", build.Cause{At: closedAt.Add(-time.Minute)}, repository.RefusedClosed},
		{"caused after the close", 2, "a1", build.Cause{At: closedAt.Add(time.Minute)}, ""},
		{"a notification skips the close", 2, "a2", build.Cause{Notification: true}, ""},
	}
	created, refused := 0, 0
	for _, tc := range tests {
		var out build.Outcomes
		var got task.Task
		var why repository.Refusal
		err := store.InTx(ctx, func(tx *repository.Tx) error {
			out = build.Outcomes{}
			var err error
			got, why, err = b.Create(ctx, tx, &out, build.FromIssue(task.Issue{Repo: "acme/widget", Number: tc.number},
				task.ActionMention, tc.agent), tc.cause)
			return err
		})
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, why, tc.name)
		assert.Equal(t, 1, out.Len(), tc.name)
		if tc.want == "" {
			assert.Equal(t, 1, out.Created(), tc.name)
			assert.Empty(t, out.Refused(), tc.name)
			assert.Equal(t, 4, got.MaxRetries, tc.name+": the configured retries")
			assert.Equal(t, task.StatusPending, got.Status, tc.name)
		} else {
			assert.Zero(t, out.Created(), tc.name)
			require.Len(t, out.Refused(), 1, tc.name)
			assert.Equal(t, tc.want, out.Refused()[0].Why, tc.name)
			assert.Zero(t, got.ID, tc.name)
		}
		assert.Empty(t, obs.told, tc.name+": nothing told before Report")
		b.Report(out)
		require.Len(t, obs.told, 1, tc.name)
		obs.told = nil
		created, refused = created+out.Created(), refused+len(out.Refused())
	}
	assert.Equal(t, 4, created)
	assert.Equal(t, 3, refused)
}

func TestReportWithoutObserver(t *testing.T) {
	t.Parallel()
	var b build.Builder // the zero value: nobody to tell
	require.NotPanics(t, func() { b.Report(build.Outcomes{}) })
	assert.Equal(t, 0, b.BudgetPerHour())
}
