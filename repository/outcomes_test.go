package repository_test

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/task"
)

// prHistory arranges the rows a pull request's life leaves: its tasks,
// their attempts, the pull request itself.
type prHistory struct {
	t     *testing.T
	ctx   context.Context
	store *repository.Store
	raw   *pgxpool.Pool
}

// task creates a task, dates it and finishes it when done (a second task
// of the same action is then possible, as after a real round).
func (h prHistory) task(n repository.NewTask, created time.Time, done bool) int64 {
	h.t.Helper()
	if n.Repo == "" {
		n.Repo = "acme/widget"
	}
	n.Priority = task.DefaultPriority
	tk, err := h.store.CreateTask(h.ctx, n)
	require.NoError(h.t, err)
	status := "pending"
	if done {
		status = "done"
	}
	_, err = h.raw.Exec(h.ctx, `UPDATE task_state SET created_at = $2, status = $3 WHERE id = $1`, tk.ID, created, status)
	require.NoError(h.t, err)
	return tk.ID
}

// attempt records a finished attempt; nil usage is what an agent that
// reports none leaves.
func (h prHistory) attempt(taskID int64, n int, tokensIn, tokensOut *int64, cost *float64) {
	h.t.Helper()
	_, err := h.raw.Exec(h.ctx, `INSERT INTO task_attempts (task_id, attempt, agent, outcome, finished_at,
			tokens_in, tokens_out, cost_usd)
		VALUES ($1, $2, 'coder1', 'succeeded', now(), $3, $4, $5)`, taskID, n, tokensIn, tokensOut, cost)
	require.NoError(h.t, err)
}

// pull saves a pull request as the rules do, then dates its opening
// (nil: a pull request known before mozi kept it).
func (h prHistory) pull(p task.PullRequest, opened *time.Time) {
	h.t.Helper()
	p.Repo = "acme/widget"
	require.NoError(h.t, h.store.SavePullRequest(h.ctx, p))
	_, err := h.raw.Exec(h.ctx, `UPDATE pull_requests SET opened_at = $3 WHERE repo = $1 AND number = $2`,
		p.Repo, p.Number, opened)
	require.NoError(h.t, err)
}

func i64(n int64) *int64                 { return &n }
func f64(f float64) *float64             { return &f }
func dur(d time.Duration) *time.Duration { return &d }

func TestRecordOutcome(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, raw := setup(t)
	h := prHistory{t: t, ctx: ctx, store: store, raw: raw}
	t0 := time.Now().Add(-5 * time.Hour).Truncate(time.Second)

	// #5 assigned to coder1, who opened #10 two hours later; CI went red on
	// two commits (twice on the first: two contexts), a reviewer asked for
	// changes twice and then approved, and a person pushed once; merged
	// five hours after the assignment.
	assigned := h.task(repository.NewTask{IssueNumber: 5, ActionType: task.ActionIssueAssigned, Agent: "coder1"}, t0, false)
	h.attempt(assigned, 1, i64(100), i64(50), f64(0.5))
	h.attempt(assigned, 2, i64(200), nil, f64(0.25))
	ci := func(sha, ctxName string) repository.NewTask {
		return repository.NewTask{IssueNumber: 10, PRNumber: 10, ActionType: task.ActionCIFailure, Agent: "coder1",
			DedupeKey: task.CIFailureKey(10, sha, ctxName), Meta: task.Meta{HeadSHA: sha, StatusCtx: ctxName}}
	}
	fix := h.task(ci("aaa", "build"), t0.Add(3*time.Hour), true)
	h.attempt(fix, 1, i64(10), nil, nil)
	h.task(ci("aaa", "lint"), t0.Add(3*time.Hour), true)
	h.task(ci("bbb", "build"), t0.Add(4*time.Hour), true)
	review := func(verdict string) repository.NewTask {
		return repository.NewTask{IssueNumber: 10, PRNumber: 10, ActionType: task.ActionReviewResult, Agent: "coder1",
			Meta: task.Meta{ReviewState: verdict}}
	}
	h.task(review("rejected"), t0.Add(3*time.Hour), true)
	h.task(review("rejected"), t0.Add(4*time.Hour), true)
	h.task(review("approved"), t0.Add(4*time.Hour), false)
	h.task(repository.NewTask{IssueNumber: 10, PRNumber: 10, ActionType: task.ActionReviewComment, Agent: "coder1",
		Meta: task.Meta{ReviewState: "comment"}}, t0.Add(4*time.Hour), false)
	// Another agent's work on the issue costs the pull request too; work
	// on an unrelated issue does not.
	mention := h.task(repository.NewTask{IssueNumber: 5, ActionType: task.ActionMention, Agent: "coder2"}, t0, true)
	h.attempt(mention, 1, i64(5), nil, nil)
	other := h.task(repository.NewTask{IssueNumber: 6, ActionType: task.ActionIssueAssigned, Agent: "coder1"}, t0, false)
	h.attempt(other, 1, i64(1000), i64(1000), f64(9))

	h.pull(task.PullRequest{Number: 10, Author: "coder1", State: task.StateClosed, Merged: true, MergedBy: "alice",
		LinkedIssues: []string{"acme/widget#5"}, ClosedAt: t0.Add(time.Hour)}, ptr(t0.Add(2*time.Hour)))
	require.NoError(t, store.MarkHumanPush(ctx, "acme/widget", 10))

	before := time.Now()
	recorded, err := store.RecordOutcome(ctx, "acme/widget", 10, "coder1")
	require.NoError(t, err)
	assert.True(t, recorded)
	after := time.Now()
	got, err := store.Outcome(ctx, "acme/widget", 10)
	require.NoError(t, err)
	assert.Equal(t, "coder1", got.Agent)
	// Merged when mozi processed the merge (mozi's clock, as the other
	// times), not at Gitea's closed_at.
	assert.WithinRange(t, got.MergedAt, before.Add(-time.Second), after.Add(time.Second))
	assert.True(t, got.HumanPush)
	assert.Equal(t, 2, got.CIRounds, "two red head commits")
	assert.Equal(t, 2, got.ReviewRounds, "two changes requested")
	assert.Equal(t, dur(2*time.Hour), got.AssignToPR)
	require.NotNil(t, got.PRToMerge)
	assert.InDelta(t, got.MergedAt.Sub(t0.Add(2*time.Hour)).Seconds(), got.PRToMerge.Seconds(), 1e-3)
	assert.Equal(t, int64(150+200+10+5), got.Tokens)
	assert.InDelta(t, 0.75, got.CostUSD, 1e-9)

	// Written once: a merge delivered again, after more work, changes nothing.
	h.attempt(assigned, 3, i64(7), nil, f64(1))
	recorded, err = store.RecordOutcome(ctx, "acme/widget", 10, "coder1")
	require.NoError(t, err)
	assert.False(t, recorded)
	again, err := store.Outcome(ctx, "acme/widget", 10)
	require.NoError(t, err)
	assert.Equal(t, got, again)
}

func ptr[T any](v T) *T { return &v }

func TestRecordOutcomeWithoutHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, raw := setup(t)
	h := prHistory{t: t, ctx: ctx, store: store, raw: raw}
	merged := time.Now().Add(-time.Hour).Truncate(time.Second)

	// Open, or closed without a merge: no outcome.
	h.pull(task.PullRequest{Number: 3, Author: "coder1", State: task.StateOpen}, ptr(merged))
	h.pull(task.PullRequest{Number: 4, Author: "coder1", State: task.StateClosed, ClosedAt: merged}, ptr(merged))
	for _, n := range []int{3, 4, 99} {
		recorded, err := store.RecordOutcome(ctx, "acme/widget", n, "coder1")
		require.NoError(t, err)
		assert.False(t, recorded, "#%d", n)
		_, err = store.Outcome(ctx, "acme/widget", n)
		assert.ErrorIs(t, err, task.ErrNotFound, "#%d", n)
	}

	// Merged, known before mozi dated openings, closing no issue: no
	// durations, no rounds, nothing spent, not a person's push.
	h.pull(task.PullRequest{Number: 7, Author: "coder1", State: task.StateClosed, Merged: true, ClosedAt: merged}, nil)
	recorded, err := store.RecordOutcome(ctx, "acme/widget", 7, "coder1")
	require.NoError(t, err)
	assert.True(t, recorded)
	got, err := store.Outcome(ctx, "acme/widget", 7)
	require.NoError(t, err)
	assert.Equal(t, repository.Outcome{Repo: "acme/widget", PRNumber: 7, Agent: "coder1", MergedAt: got.MergedAt}, got)
}

// Three merges of coder1 in acme/widget (one eight days ago) and one of
// coder2: the window's stats, the totals and the Prometheus series agree
// with them.
func TestOutcomeStatsAndSeries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, raw := setup(t)
	now := time.Now().Truncate(time.Second)
	type merge struct {
		repo, agent     string
		number          int
		mergedAgo       time.Duration
		human           bool
		ci, review      int
		assignS, mergeS *float64
		tokens          int64
		cost            float64
	}
	for _, m := range []merge{
		{"acme/widget", "coder1", 1, 2 * time.Hour, false, 1, 0, f64(600), f64(1200), 1000, 1.5},
		{"acme/widget", "coder1", 2, 3 * time.Hour, true, 0, 2, f64(1800), f64(3600), 3000, 0.5},
		{"acme/widget", "coder1", 3, 8 * 24 * time.Hour, false, 4, 4, nil, f64(90000), 500, 0},
		{"acme/gadget", "coder2", 1, time.Hour, false, 0, 1, f64(30), nil, 10, 0.01},
	} {
		_, err := raw.Exec(ctx, `INSERT INTO pr_outcomes (repo, pr_number, agent, merged_at, human_push, ci_rounds,
				review_rounds, assign_to_pr_s, pr_to_merge_s, tokens, cost_usd)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`, m.repo, m.number, m.agent, now.Add(-m.mergedAgo),
			m.human, m.ci, m.review, m.assignS, m.mergeS, m.tokens, m.cost)
		require.NoError(t, err)
	}

	week, err := store.OutcomeStatsSince(ctx, 7*24*time.Hour)
	require.NoError(t, err)
	require.Len(t, week, 2)
	gadget, widget := week[0], week[1]
	assert.Equal(t, repository.OutcomeStats{Repo: "acme/gadget", Agent: "coder2", Merged: 1, Autonomous: 1,
		ReviewRounds: 1, Tokens: 10, CostUSD: 0.01,
		AssignToPR: repository.Durations{Count: 1, SumSec: 30, MedianSec: f64(30)},
		PRToMerge:  repository.Durations{}}, gadget)
	assert.Equal(t, repository.OutcomeStats{Repo: "acme/widget", Agent: "coder1", Merged: 2, Autonomous: 1,
		CIRounds: 1, ReviewRounds: 2, Tokens: 4000, CostUSD: 2,
		AssignToPR: repository.Durations{Count: 2, SumSec: 2400, MedianSec: f64(1200)},
		PRToMerge:  repository.Durations{Count: 2, SumSec: 4800, MedianSec: f64(2400)}}, widget)

	all, err := store.OutcomeTotals(ctx)
	require.NoError(t, err)
	require.Len(t, all, 2)
	assert.Equal(t, 3, all[1].Merged, "totals keep every merge")
	assert.Equal(t, outcomeBounds, all[1].PRToMerge.Bounds)
	assert.Equal(t, []uint64{0, 0, 0, 1, 2, 2, 2, 2, 2, 3, 3, 3}, all[1].PRToMerge.Buckets)
	assert.Equal(t, 3, all[1].PRToMerge.Count)
	assert.InDelta(t, 94800, all[1].PRToMerge.SumSec, 1e-9)
	assert.Equal(t, 2, all[1].AssignToPR.Count, "#3's start is unknown")
	assert.Equal(t, repository.OutcomeStats{Repo: "acme/widget", Agent: "coder1", Merged: 3, Autonomous: 2,
		CIRounds: 5, ReviewRounds: 6, Tokens: 4500, CostUSD: 2}, withoutDurations(all[1]))

	c := repository.NewOutcomeCollector(store, slog.New(slog.NewTextHandler(io.Discard, nil)))
	want := `
# HELP mozi_pr_merged_autonomous_total Merged agent pull requests whose branch no person pushed to.
# TYPE mozi_pr_merged_autonomous_total counter
mozi_pr_merged_autonomous_total{agent="coder1",repo="acme/widget"} 2
mozi_pr_merged_autonomous_total{agent="coder2",repo="acme/gadget"} 1
# HELP mozi_pr_merged_total Pull requests authored by an agent and merged.
# TYPE mozi_pr_merged_total counter
mozi_pr_merged_total{agent="coder1",repo="acme/widget"} 3
mozi_pr_merged_total{agent="coder2",repo="acme/gadget"} 1
# HELP mozi_pr_assign_to_pr_seconds From the author's assignment to the issue to the pull request opened, for merged agent pull requests.
# TYPE mozi_pr_assign_to_pr_seconds histogram
` + histogramText("mozi_pr_assign_to_pr_seconds", `agent="coder1",repo="acme/widget"`, []int{0, 0, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2}, 2, 2400) +
		histogramText("mozi_pr_assign_to_pr_seconds", `agent="coder2",repo="acme/gadget"`, []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 1, 30)
	assert.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want),
		"mozi_pr_merged_total", "mozi_pr_merged_autonomous_total", "mozi_pr_assign_to_pr_seconds"))
	assert.Equal(t, 16, testutil.CollectAndCount(c), "eight series for each repository and agent")
}

// outcomeBounds are the histograms' bucket bounds: a minute to a week.
var outcomeBounds = []float64{60, 300, 900, 1800, 3600, 7200, 14400, 28800, 86400, 172800, 345600, 604800}

// histogramText is a histogram in the exposition format, buckets as
// outcomeBounds.
func histogramText(name, labels string, cumulative []int, count int, sum float64) string {
	var b strings.Builder
	for i, le := range outcomeBounds {
		b.WriteString(name + "_bucket{" + labels + `,le="` + strconv.FormatFloat(le, 'g', -1, 64) + `"} ` +
			strconv.Itoa(cumulative[i]) + "\n")
	}
	b.WriteString(name + "_bucket{" + labels + `,le="+Inf"} ` + strconv.Itoa(count) + "\n")
	b.WriteString(name + "_sum{" + labels + "} " + strconv.FormatFloat(sum, 'g', -1, 64) + "\n")
	b.WriteString(name + "_count{" + labels + "} " + strconv.Itoa(count) + "\n")
	return b.String()
}

func withoutDurations(s repository.OutcomeStats) repository.OutcomeStats {
	s.AssignToPR, s.PRToMerge = repository.Durations{}, repository.Durations{}
	return s
}

// A pull request is opened when mozi first sees it open: one first seen
// merged (during downtime, through the reconcile) has no opening time,
// rather than one at its merge.
func TestPullRequestOpenedWhenFirstSeenOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, raw := setup(t)
	opened := func(number int) *time.Time {
		var at *time.Time
		require.NoError(t, raw.QueryRow(ctx, `SELECT opened_at FROM pull_requests WHERE repo = 'acme/widget' AND number = $1`,
			number).Scan(&at))
		return at
	}
	before := time.Now()
	open := task.PullRequest{Repo: "acme/widget", Number: 1, Author: "coder1", State: task.StateOpen}
	require.NoError(t, store.SavePullRequest(ctx, open))
	first := opened(1)
	require.NotNil(t, first)
	assert.WithinRange(t, *first, before.Add(-time.Second), time.Now().Add(time.Second))
	open.State, open.Merged = task.StateClosed, true
	require.NoError(t, store.SavePullRequest(ctx, open))
	assert.Equal(t, first, opened(1), "written once")

	require.NoError(t, store.SavePullRequest(ctx, task.PullRequest{Repo: "acme/widget", Number: 2, Author: "coder1",
		State: task.StateClosed, Merged: true}))
	assert.Nil(t, opened(2))
}
