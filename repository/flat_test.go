package repository_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/history"
	"github.com/moziplus/mozi/repository/pgtest"
	"github.com/moziplus/mozi/repository/task"
)

// The queries of the periodic jobs, the scrape and the list commands were
// rewritten so that their cost does not grow with history (issue 19). The
// queries they replaced are kept here, as they were, to check that the new
// ones give the same answers on a database with a (small) year of history,
// the live state, and the cases each query must tell apart.

const legacyDueRounds = `
	WITH subs AS (
		SELECT i.repo, i.parent_issue AS parent, count(*) AS n,
		       count(*) FILTER (WHERE i.state = 'closed' OR (
		           EXISTS (SELECT 1 FROM task_state t WHERE t.repo = i.repo AND t.issue_number = i.number)
		           AND NOT EXISTS (SELECT 1 FROM task_state t WHERE t.repo = i.repo AND t.issue_number = i.number
		                           AND t.status IN ('pending', 'claimed', 'working', 'review')))) AS finished,
		       'round#' || i.parent_issue || ':' || string_agg(i.number::text, ',' ORDER BY i.number) AS key
		FROM issues i WHERE i.parent_issue IS NOT NULL AND NOT i.is_pull GROUP BY i.repo, i.parent_issue
	)
	SELECT s.repo, s.parent, s.key,
	       (SELECT count(*) FROM task_state r WHERE r.repo = s.repo AND r.issue_number = s.parent
	          AND r.action_type = 'round_review') + 1
	FROM subs s JOIN issues p ON p.repo = s.repo AND p.number = s.parent AND p.state = 'open'
	WHERE s.n = s.finished
	  AND NOT EXISTS (SELECT 1 FROM task_state r WHERE r.repo = s.repo AND r.action_type = 'round_review'
	                  AND r.dedupe_key = s.key)`

const legacyDueDiscussions = `SELECT repo, number FROM issues
	WHERE discussion_due_at <= now() AND discussed_at IS NULL AND state = 'open'
	  AND assignees = '{}' AND parent_issue IS NULL AND NOT is_pull
	ORDER BY discussion_due_at, repo, number`

const legacyPullRequestsInReview = `SELECT p.repo, p.number FROM pull_requests p
	WHERE p.state = 'open' AND p.head_sha <> '' AND EXISTS (
		SELECT 1 FROM task_state t WHERE t.repo = p.repo AND t.pr_number = p.number
		  AND t.status IN ('pending', 'claimed', 'working', 'review'))
	ORDER BY p.synced_at, p.repo, p.number`

const legacyCatchUpRepos = `SELECT r.repo FROM (SELECT unnest($1::text[]) AS repo UNION SELECT DISTINCT repo FROM issues) r
	ORDER BY r.repo`

const legacyTaskCounts = `SELECT status, action_type, count(*) FROM task_state GROUP BY 1, 2`

const legacyInboxStats = `SELECT
		count(*) FILTER (WHERE processed_at IS NULL AND outcome = ''),
		count(*) FILTER (WHERE processed_at IS NULL AND outcome = '' AND attempts > 0),
		count(*) FILTER (WHERE outcome = 'parked')
	FROM webhook_deliveries WHERE processed_at IS NULL`

const legacyDeliveries = `SELECT delivery_id FROM webhook_deliveries
	WHERE NOT $1 OR outcome = 'parked' OR (processed_at IS NULL AND attempts > 0)
	ORDER BY seq DESC LIMIT $2`

// seeded is a migrated database with a small year of history, the live
// state, and the cases below on top.
func seeded(t *testing.T) (*repository.Store, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	store, raw := setup(t)
	conn, err := raw.Acquire(ctx)
	require.NoError(t, err)
	size, now := history.Year(0.002), time.Now()
	_, err = history.Fill(ctx, conn.Conn(), size, now)
	require.NoError(t, err)
	_, err = history.Live(ctx, conn.Conn(), size, now)
	conn.Release()
	require.NoError(t, err)

	// Rounds: acme/r#1's subs are open but all their tasks failed (due);
	// acme/r#10's round was reviewed, then a sub was added and finished
	// (due: round 2); acme/r#20 has a sub nobody worked on (not due); the
	// parent acme/r#30 is closed (not due); acme/r#40's sub has a live task
	// (not due).
	issue := func(number, parent int, state string) {
		var p *int
		if parent > 0 {
			p = &parent
		}
		_, err := raw.Exec(ctx, `INSERT INTO issues (repo, number, state, parent_issue) VALUES ('acme/r', $1, $2, $3)`,
			number, state, p)
		require.NoError(t, err)
	}
	finished := func(number int, st task.Status, action task.ActionType, key string) int64 {
		tk, err := store.CreateTask(ctx, repository.NewTask{Repo: "acme/r", IssueNumber: number, ActionType: action,
			Agent: "coder1", Priority: 2, DedupeKey: key})
		require.NoError(t, err)
		if st != task.StatusPending {
			forceStatus(t, raw, tk.ID, st)
		}
		return tk.ID
	}
	issue(1, 0, "open")
	issue(2, 1, "open")
	issue(3, 1, "open")
	finished(2, task.StatusFailed, task.ActionIssueAssigned, "")
	finished(3, task.StatusCancelled, task.ActionIssueAssigned, "")
	issue(10, 0, "open")
	issue(11, 10, "closed")
	issue(12, 10, "closed")
	finished(10, task.StatusDone, task.ActionRoundReview, "round#10:11")
	issue(20, 0, "open")
	issue(21, 20, "closed")
	issue(22, 20, "open")
	issue(30, 0, "closed")
	issue(31, 30, "closed")
	issue(40, 0, "open")
	issue(41, 40, "open")
	finished(41, task.StatusDone, task.ActionIssueAssigned, "")
	finished(41, task.StatusPending, task.ActionMention, "")

	// Discussions: due, not yet due, assigned, closed, a sub-issue, a pull
	// request, discussed.
	for i, set := range []string{"", "discussion_due_at = now() + interval '1 hour'", "assignees = '{coder1}'",
		"state = 'closed'", "parent_issue = 30", "is_pull = true", "discussed_at = now()"} {
		n := 100 + i
		issue(n, 0, "open")
		_, err := raw.Exec(ctx, `UPDATE issues SET discussion_due_at = now() - interval '1 minute' WHERE repo = 'acme/r' AND number = $1`, n)
		require.NoError(t, err)
		if set != "" {
			_, err = raw.Exec(ctx, `UPDATE issues SET `+set+` WHERE repo = 'acme/r' AND number = $1`, n)
			require.NoError(t, err)
		}
	}
	require.NoError(t, history.Analyze(ctx, mustConn(t, raw)))
	return store, raw
}

func mustConn(t *testing.T, raw *pgxpool.Pool) *pgx.Conn {
	t.Helper()
	c, err := raw.Acquire(context.Background())
	require.NoError(t, err)
	t.Cleanup(c.Release)
	return c.Conn()
}

func TestRewrittenSweepsAnswerAsBefore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, raw := seeded(t)

	var want []repository.RoundDue
	rows, err := raw.Query(ctx, legacyDueRounds)
	require.NoError(t, err)
	for rows.Next() {
		var r repository.RoundDue
		require.NoError(t, rows.Scan(&r.Repo, &r.Parent, &r.Key, &r.Round))
		want = append(want, r)
	}
	require.NoError(t, rows.Err())
	got, err := store.DueRounds(ctx)
	require.NoError(t, err)
	byKey := func(rs []repository.RoundDue) { sort.Slice(rs, func(i, j int) bool { return rs[i].Key < rs[j].Key }) }
	byKey(want)
	byKey(got)
	assert.Equal(t, want, got)
	assert.Contains(t, got, repository.RoundDue{Repo: "acme/r", Parent: 1, Round: 1, Key: "round#1:2,3"},
		"subs whose every task ended")
	assert.Contains(t, got, repository.RoundDue{Repo: "acme/r", Parent: 10, Round: 2, Key: "round#10:11,12"},
		"a sub added after the first round")
	assert.Len(t, got, 4, "the live state's two and these two")

	refs := func(sql string, args ...any) []string {
		rows, err := raw.Query(ctx, sql, args...)
		require.NoError(t, err)
		defer rows.Close()
		var out []string
		for rows.Next() {
			var (
				repo string
				n    int
			)
			require.NoError(t, rows.Scan(&repo, &n))
			out = append(out, fmt.Sprintf("%s#%d", repo, n))
		}
		require.NoError(t, rows.Err())
		return out
	}
	discussions, err := store.DueDiscussions(ctx, 50)
	require.NoError(t, err)
	var gotDiscussions []string
	for _, i := range discussions {
		gotDiscussions = append(gotDiscussions, fmt.Sprintf("%s#%d", i.Repo, i.Number))
	}
	assert.ElementsMatch(t, refs(legacyDueDiscussions), gotDiscussions)
	assert.Contains(t, gotDiscussions, "acme/r#100")
	assert.Len(t, gotDiscussions, 3, "the live state's two and acme/r#100")

	prs, err := store.OpenPullRequestsInReview(ctx, 1000)
	require.NoError(t, err)
	var gotPRs []string
	for _, p := range prs {
		gotPRs = append(gotPRs, fmt.Sprintf("%s#%d", p.Repo, p.Number))
	}
	assert.Equal(t, refs(legacyPullRequestsInReview), gotPRs)
	assert.Len(t, gotPRs, 60, "the live review requests' and CI failures' pull requests")

	configured := []string{"acme/api", "zeta/configured-only"}
	marks, err := store.CatchUpMarks(ctx, configured)
	require.NoError(t, err)
	var gotRepos []string
	for _, m := range marks {
		gotRepos = append(gotRepos, m.Repo)
		if m.Repo == "zeta/configured-only" || m.Repo == "acme/r" {
			assert.True(t, m.At.IsZero(), "%s was never caught up on", m.Repo)
		} else {
			assert.False(t, m.At.IsZero(), "%s has its mark", m.Repo)
		}
	}
	var wantRepos []string
	rows, err = raw.Query(ctx, legacyCatchUpRepos, configured)
	require.NoError(t, err)
	wantRepos, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Equal(t, wantRepos, gotRepos)
	assert.Len(t, gotRepos, len(history.Repos)+2)
}

func TestInboxQueriesAnswerAsBefore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, raw := seeded(t)

	var want repository.InboxStats
	require.NoError(t, raw.QueryRow(ctx, legacyInboxStats).Scan(&want.Waiting, &want.Retrying, &want.Parked))
	got, err := store.InboxStats(ctx)
	require.NoError(t, err)
	assert.Positive(t, got.OldestAge)
	got.OldestAge = 0
	assert.Equal(t, want, got)
	assert.Equal(t, repository.InboxStats{Waiting: 10, Retrying: 2, Parked: 1}, got)

	for _, failed := range []bool{false, true} {
		rows, err := raw.Query(ctx, legacyDeliveries, failed, 50)
		require.NoError(t, err)
		wantIDs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		list, err := store.ListDeliveries(ctx, repository.DeliveryFilter{Failed: failed, Limit: 50})
		require.NoError(t, err)
		var gotIDs []string
		for _, d := range list {
			gotIDs = append(gotIDs, d.ID)
		}
		assert.Equal(t, wantIDs, gotIDs, "failed only: %t", failed)
	}
}

// finishedCounts reads the legacy count of finished tasks.
func finishedCounts(t *testing.T, raw *pgxpool.Pool) map[string]int {
	t.Helper()
	rows, err := raw.Query(context.Background(), legacyTaskCounts)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var (
			st, at string
			n      int
		)
		require.NoError(t, rows.Scan(&st, &at, &n))
		out[st+"/"+at] = n
	}
	require.NoError(t, rows.Err())
	return out
}

func taskCounts(t *testing.T, store *repository.Store) map[string]int {
	t.Helper()
	counts, err := store.TaskCounts(context.Background())
	require.NoError(t, err)
	out := map[string]int{}
	for _, c := range counts {
		key := string(c.Status) + "/" + string(c.ActionType)
		_, dup := out[key]
		require.False(t, dup, "%s counted twice", key)
		out[key] = c.N
	}
	return out
}

// Finished tasks are counted as they finish, whatever moves them (a
// transition, a requeue, a bulk update, a delete), folded or not.
func TestTaskCountsFollowEveryChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, raw := seeded(t)
	check := func(step string) {
		t.Helper()
		want := finishedCounts(t, raw)
		assert.Equal(t, want, taskCounts(t, store), "%s", step)
		folded, err := store.FoldTaskCounts(ctx)
		require.NoError(t, err)
		assert.Equal(t, want, taskCounts(t, store), "%s, folded (%d changes)", step, folded)
		var pending int
		require.NoError(t, raw.QueryRow(ctx, `SELECT count(*) FROM task_count_changes`).Scan(&pending))
		assert.Zero(t, pending, "%s: folded away", step)
	}
	check("the seeded history")

	tk, err := store.CreateTask(ctx, newTask(7001))
	require.NoError(t, err)
	for _, ev := range []task.Event{task.EventFail, task.EventRequeue, task.EventCancel, task.EventRequeue, task.EventComplete} {
		res, err := store.Apply(ctx, tk.ID, ev, repository.Change{})
		require.NoError(t, err)
		require.True(t, res.Applied, "%s", ev)
		check(string(ev))
	}
	_, err = raw.Exec(ctx, `UPDATE task_state SET action_type = 'mention' WHERE id = $1`, tk.ID)
	require.NoError(t, err)
	check("a finished task's action type changed")
	_, err = raw.Exec(ctx, `UPDATE task_state SET status = 'cancelled' WHERE status = 'failed' AND id % 3 = 0`)
	require.NoError(t, err)
	check("a bulk update")
	_, err = raw.Exec(ctx, `DELETE FROM task_state WHERE status = 'done' AND id % 5 = 0`)
	require.NoError(t, err)
	check("a bulk delete")
	_, err = raw.Exec(ctx, `INSERT INTO task_state (repo, issue_number, action_type, agent, status)
		VALUES ('acme/r', 7002, 'mention', 'coder1', 'done')`)
	require.NoError(t, err)
	check("a task inserted finished")

	// Unfolded changes count too, and a fold while another holds the
	// fold's lock waits for nothing: it skips.
	_, err = store.Apply(ctx, tk.ID, task.EventRequeue, repository.Change{}) // done: not requeued
	require.NoError(t, err)
	tx, err := raw.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, 0x6d6f7a6a)
	require.NoError(t, err)
	other, err := store.CreateTask(ctx, newTask(7003))
	require.NoError(t, err)
	_, err = store.Apply(ctx, other.ID, task.EventFail, repository.Change{})
	require.NoError(t, err)
	folded, err := store.FoldTaskCounts(ctx)
	require.NoError(t, err)
	assert.Zero(t, folded, "another fold holds the lock")
	assert.Equal(t, finishedCounts(t, raw), taskCounts(t, store), "unfolded changes are counted")
	require.NoError(t, tx.Rollback(ctx))
	folded, err = store.FoldTaskCounts(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, folded)
	assert.Equal(t, finishedCounts(t, raw), taskCounts(t, store))
}

// The migration that brings the counts starts them from the tasks already
// there.
func TestTaskCountsStartFromTheTasksThere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, raw := setup(t)
	m, err := repository.NewMigrator(raw)
	require.NoError(t, err)
	defer m.Close()
	_, err = m.DownTo(ctx, 11)
	require.NoError(t, err)
	for i, st := range []task.Status{task.StatusDone, task.StatusDone, task.StatusFailed, task.StatusPending, task.StatusCancelled} {
		_, err := raw.Exec(ctx, `INSERT INTO task_state (repo, issue_number, action_type, agent, status)
			VALUES ('acme/r', $1, 'issue_assigned', 'coder1', $2)`, i+1, string(st))
		require.NoError(t, err)
	}
	_, err = m.Up(ctx)
	require.NoError(t, err)
	got := taskCounts(t, store)
	assert.Equal(t, finishedCounts(t, raw), got)
	assert.Equal(t, map[string]int{"done/issue_assigned": 2, "failed/issue_assigned": 1,
		"cancelled/issue_assigned": 1, "pending/issue_assigned": 1}, got)
}

// Prune deletes what the statements it replaced deleted, found through
// time-bounded indexes, and returns the logs of exactly the attempts whose
// task finished before the cutoff.
func TestPruneRemovesWhatItDidBefore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, raw := seeded(t)
	// An attempt that started long ago of a task that finished just now
	// keeps its log; one of a live task too.
	var oldAttemptOfRecentTask, oldAttemptOfLiveTask int64
	require.NoError(t, raw.QueryRow(ctx, `UPDATE task_attempts SET started_at = now() - interval '300 days'
		WHERE id = (SELECT max(a.id) FROM task_attempts a JOIN task_state t ON t.id = a.task_id
		            WHERE t.status = 'done' AND t.finished_at > now() - interval '1 day')
		RETURNING id`).Scan(&oldAttemptOfRecentTask))
	require.NoError(t, raw.QueryRow(ctx, `UPDATE task_attempts SET started_at = now() - interval '300 days'
		WHERE id = (SELECT max(a.id) FROM task_attempts a JOIN task_state t ON t.id = a.task_id WHERE t.status = 'working')
		RETURNING id`).Scan(&oldAttemptOfLiveTask))

	cutoff := time.Now().Add(-180 * 24 * time.Hour)
	count := func(sql string) int64 {
		var n int64
		require.NoError(t, raw.QueryRow(ctx, sql, cutoff).Scan(&n))
		return n
	}
	wantDeliveries := count(`SELECT count(*) FROM webhook_deliveries WHERE processed_at < $1 AND outcome <> 'parked'`)
	wantEffects := count(`SELECT count(*) FROM webhook_effects WHERE created_at < $1`)
	wantMentions := count(`SELECT count(*) FROM mention_queue WHERE consumed_at < $1`)
	wantStatuses := count(`SELECT count(*) FROM commit_statuses WHERE created_at < $1`)
	rows, err := raw.Query(ctx, `SELECT a.log_path FROM task_attempts a JOIN task_state t ON t.id = a.task_id
		WHERE t.finished_at < $1 AND a.log_path <> ''`, cutoff)
	require.NoError(t, err)
	wantLogs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	keptAttempts := count(`SELECT count(*) FROM task_attempts WHERE log_path <> '' AND $1::timestamptz IS NOT NULL`) - int64(len(wantLogs))
	require.Positive(t, wantDeliveries)
	require.Positive(t, wantMentions)
	require.NotEmpty(t, wantLogs)

	r, err := store.Prune(ctx, cutoff)
	require.NoError(t, err)
	assert.Equal(t, wantDeliveries, r.Deliveries)
	assert.Equal(t, wantEffects, r.Effects)
	assert.Equal(t, wantMentions, r.Mentions)
	assert.Equal(t, wantStatuses, r.Statuses)
	slices.Sort(wantLogs)
	slices.Sort(r.LogPaths)
	assert.Equal(t, wantLogs, r.LogPaths)

	assert.Zero(t, count(`SELECT count(*) FROM webhook_deliveries WHERE processed_at < $1 AND outcome <> 'parked'`))
	assert.Equal(t, int64(1), count(`SELECT count(*) FROM webhook_deliveries WHERE outcome = 'parked' AND $1::timestamptz IS NOT NULL`),
		"the parked delivery stays")
	assert.Zero(t, count(`SELECT count(*) FROM mention_queue WHERE consumed_at < $1`))
	assert.Equal(t, keptAttempts, count(`SELECT count(*) FROM task_attempts WHERE log_path <> '' AND $1::timestamptz IS NOT NULL`))
	for _, id := range []int64{oldAttemptOfRecentTask, oldAttemptOfLiveTask} {
		var path string
		require.NoError(t, raw.QueryRow(ctx, `SELECT log_path FROM task_attempts WHERE id = $1`, id).Scan(&path))
		assert.NotEmpty(t, path, "attempt %d keeps its log: its task did not finish before the cutoff", id)
	}

	again, err := store.Prune(ctx, cutoff)
	require.NoError(t, err)
	assert.Equal(t, repository.PruneResult{}, again, "nothing left to prune")
}

// The rounds sweep reads parents from the marks the database keeps as
// issues are saved: whatever order a parent and its sub-issues arrive in,
// and whatever becomes of the parent, it answers as the query it replaced.
func TestRoundsFollowParentsWhateverOrderTheyArriveIn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, raw := setup(t)
	save := func(number, parent int, state string) {
		t.Helper()
		require.NoError(t, store.SaveIssue(ctx, task.Issue{Repo: "acme/o", Number: number, ParentIssue: parent,
			State: state, Title: fmt.Sprintf("#%d", number), UpdatedAt: time.Now()}))
	}
	due := func(step string, want ...int) {
		t.Helper()
		rows, err := raw.Query(ctx, legacyDueRounds)
		require.NoError(t, err)
		var legacy []int
		for rows.Next() {
			var r repository.RoundDue
			require.NoError(t, rows.Scan(&r.Repo, &r.Parent, &r.Key, &r.Round))
			legacy = append(legacy, r.Parent)
		}
		require.NoError(t, rows.Err())
		rounds, err := store.DueRounds(ctx)
		require.NoError(t, err)
		var got []int
		for _, r := range rounds {
			got = append(got, r.Parent)
		}
		assert.ElementsMatch(t, legacy, got, "%s: as before", step)
		assert.ElementsMatch(t, want, got, "%s", step)
	}
	// #1's sub arrives before #1 itself; #5 before its sub.
	save(2, 1, "closed")
	due("a sub-issue whose parent mozi has not seen")
	save(1, 0, "open")
	due("its parent arrives", 1)
	save(5, 0, "open")
	save(6, 5, "open")
	due("a parent and its open sub-issue", 1)
	save(6, 5, "closed")
	due("the sub-issue closed", 1, 5)
	save(1, 0, "closed")
	due("a parent closed", 5)
	save(1, 0, "open")
	due("reopened", 1, 5)
	save(6, 1, "closed")
	due("a sub-issue moved to another parent: #5 has none left", 1)
	save(9, 0, "closed")
	save(10, 9, "closed")
	due("a parent closed before its sub-issue arrived", 1)
	save(9, 0, "open")
	due("and reopened", 1, 9)
	save(11, 0, "open")
	save(12, 0, "closed")
	due("no sub-issue yet", 1, 9)
	save(12, 11, "closed")
	due("an issue edited into a sub-issue", 1, 9, 11)

	// Only open parents are read (the marks of closed ones say so).
	save(11, 0, "closed")
	rows, err := raw.Query(ctx, `SELECT number FROM issue_parents WHERE repo = 'acme/o' AND open ORDER BY number`)
	require.NoError(t, err)
	open, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	require.NoError(t, err)
	assert.Equal(t, []int32{1, 5, 9}, open)
}

// A parent whose round was reviewed is settled: later sweeps do not read
// it until its set of sub-issues changes, even when the change comes while
// a sweep is settling it.
func TestSettledRoundsWakeOnANewSetOfSubIssues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, raw := setup(t)
	save := func(number, parent int, state string) {
		t.Helper()
		require.NoError(t, store.SaveIssue(ctx, task.Issue{Repo: "acme/s", Number: number, ParentIssue: parent,
			State: state, Title: fmt.Sprintf("#%d", number), UpdatedAt: time.Now()}))
	}
	due := func() []string {
		t.Helper()
		rounds, err := store.DueRounds(ctx)
		require.NoError(t, err)
		var keys []string
		for _, r := range rounds {
			keys = append(keys, fmt.Sprintf("%s/%d", r.Key, r.Round))
		}
		return keys
	}
	review := func(key string) {
		t.Helper()
		tk, err := store.CreateTask(ctx, repository.NewTask{Repo: "acme/s", IssueNumber: 1, ActionType: task.ActionRoundReview,
			Agent: "lead", Priority: 2, DedupeKey: key})
		require.NoError(t, err)
		forceStatus(t, raw, tk.ID, task.StatusDone)
	}
	settled := func() bool {
		t.Helper()
		var s bool
		require.NoError(t, raw.QueryRow(ctx, `SELECT settled FROM issue_parents WHERE repo = 'acme/s' AND number = 1`).Scan(&s))
		return s
	}
	save(1, 0, "open")
	save(2, 1, "closed")
	save(3, 1, "closed")
	assert.Equal(t, []string{"round#1:2,3/1"}, due())
	assert.False(t, settled(), "due, not reviewed")
	review("round#1:2,3")
	assert.Empty(t, due())
	assert.True(t, settled(), "reviewed: settled")

	save(3, 1, "open")
	save(3, 1, "closed")
	assert.Empty(t, due(), "a sub-issue reopened and closed again: the same set, reviewed")
	save(4, 1, "closed")
	assert.False(t, settled(), "a new sub-issue unsettles its parent")
	assert.Equal(t, []string{"round#1:2,3,4/2"}, due())
	review("round#1:2,3,4")
	assert.Empty(t, due())
	save(4, 0, "closed")
	assert.False(t, settled(), "a sub-issue moved away unsettles its parent")
	assert.Empty(t, due(), "the set left was reviewed in the first round")
	require.True(t, settled())

	// A sub-issue saved while a sweep settles the parent: the sweep reads
	// the old set (reviewed), waits for the row the new sub-issue's save
	// locked, and then leaves the parent unsettled.
	tx, err := raw.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = raw.Exec(ctx, `UPDATE issue_parents SET settled = false WHERE repo = 'acme/s' AND number = 1`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO issues (repo, number, state, parent_issue) VALUES ('acme/s', 5, 'closed', 1)`)
	require.NoError(t, err)
	sweep := make(chan []string, 1)
	go func() { sweep <- due() }()
	require.Eventually(t, func() bool {
		var waiting int
		require.NoError(t, raw.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE NOT granted`).Scan(&waiting))
		return waiting > 0
	}, 10*time.Second, 10*time.Millisecond, "the sweep waits for the new sub-issue's transaction")
	require.NoError(t, tx.Commit(ctx))
	assert.Empty(t, <-sweep, "it read the set before #5")
	assert.False(t, settled(), "and did not settle over the change")
	assert.Equal(t, []string{"round#1:2,3,5/3"}, due())
}

// A sub-issue saved after its parent closed marks the parent open: the
// sweep finds it closed and marks it so, but never over a reopening that
// came while it looked.
func TestSweepMarksClosedParentsButNotReopenedOnes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, raw := setup(t)
	save := func(number, parent int, state string) {
		t.Helper()
		require.NoError(t, store.SaveIssue(ctx, task.Issue{Repo: "acme/c", Number: number, ParentIssue: parent,
			State: state, Title: fmt.Sprintf("#%d", number), UpdatedAt: time.Now()}))
	}
	marked := func(number int) bool {
		t.Helper()
		var open bool
		require.NoError(t, raw.QueryRow(ctx, `SELECT open FROM issue_parents WHERE repo = 'acme/c' AND number = $1`, number).Scan(&open))
		return open
	}
	due := func() []int {
		t.Helper()
		rounds, err := store.DueRounds(ctx)
		require.NoError(t, err)
		var parents []int
		for _, r := range rounds {
			parents = append(parents, r.Parent)
		}
		return parents
	}
	save(1, 0, "closed")
	save(2, 1, "closed")
	save(4, 3, "closed") // #3 itself is not known yet
	assert.True(t, marked(1), "a sub-issue marks its parent open")
	assert.Empty(t, due())
	assert.False(t, marked(1), "the sweep found #1 closed")
	assert.False(t, marked(3), "and #3 missing")
	save(3, 0, "open")
	assert.True(t, marked(3), "#3 arrived, open")
	assert.Equal(t, []int{3}, due())

	// #1 reopened while a sweep looks at it: the sweep read it closed, and
	// waits for the row the reopening locked; it then leaves the mark.
	_, err := raw.Exec(ctx, `UPDATE issue_parents SET open = true WHERE repo = 'acme/c' AND number = 1`)
	require.NoError(t, err)
	tx, err := raw.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `UPDATE issues SET state = 'open' WHERE repo = 'acme/c' AND number = 1`)
	require.NoError(t, err)
	sweep := make(chan []int, 1)
	go func() { sweep <- due() }()
	require.Eventually(t, func() bool {
		var waiting int
		require.NoError(t, raw.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE NOT granted`).Scan(&waiting))
		return waiting > 0
	}, 10*time.Second, 10*time.Millisecond, "the sweep waits for the reopening's transaction")
	require.NoError(t, tx.Commit(ctx))
	assert.Equal(t, []int{3}, <-sweep, "it read #1 closed")
	assert.True(t, marked(1), "and left the reopened #1 marked open")
	assert.ElementsMatch(t, []int{1, 3}, due())
}

// mozi's connections run without JIT compilation unless the URL asks for it.
func TestConnectionsRunWithoutJIT(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	tests := []struct {
		name, url, want string
	}{
		{"default", url, "off"},
		{"asked for in the URL", url + sep + "jit=on", "on"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store, err := repository.Open(ctx, tt.url, repository.Options{MaxConns: 1})
			require.NoError(t, err)
			defer store.Close()
			var jit string
			require.NoError(t, store.QueryRowForTest(ctx, `SHOW jit`).Scan(&jit))
			assert.Equal(t, tt.want, jit)
		})
	}
}
