package history_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/history"
	"github.com/moziplus/mozi/repository/pgtest"
	"github.com/moziplus/mozi/repository/task"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// database is a fresh migrated database with the live state, and the
// history of size when fill.
func database(t *testing.T, size history.Size, now time.Time, fill bool) (*repository.Store, *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	url := pgtest.URL(t)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	if fill {
		_, err := history.Fill(ctx, conn, size, now)
		require.NoError(t, err)
	}
	_, err = history.Live(ctx, conn, size, now)
	require.NoError(t, err)
	store, err := repository.Open(ctx, url, repository.Options{MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(store.Close)
	return store, conn
}

func TestFillWritesTheYearAsSized(t *testing.T) {
	t.Parallel()
	size := history.Year(0.002)
	_, conn := database(t, size, time.Now(), true)
	rows, err := history.TableRows(context.Background(), conn)
	require.NoError(t, err)
	parents := size.Issues / 10
	assert.Equal(t, map[string]int64{
		"issues":             int64(size.Issues + 200),
		"pull_requests":      int64(size.PullRequests + 60),
		"task_state":         int64(size.Tasks + history.LiveTasks),
		"task_attempts":      int64(size.Tasks + size.Tasks/5 + 200),
		"webhook_deliveries": int64(size.Deliveries + 211),
		"webhook_effects":    rows["webhook_effects"],
		"mention_queue":      int64(size.Mentions + 23),
		"commit_statuses":    int64(size.Statuses),
		"agent_comments":     int64(size.Comments + 50),
	}, rows, "%d parents", parents)
	assert.Greater(t, rows["webhook_effects"], int64(size.Deliveries/2), "most processed deliveries had an effect")

	var statuses map[string]int64
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT jsonb_object_agg(status, n) FROM
		(SELECT status, count(*) AS n FROM task_state GROUP BY status) s`).Scan(&statuses))
	assert.Equal(t, int64(history.LiveTasks), statuses["pending"]+statuses["claimed"]+statuses["working"]+statuses["review"],
		"every task of the history is finished")
}

// The history is at rest: what the ticker, the scrape and the dispatcher
// look for is the live state's alone, so the two databases answer alike.
func TestHistoryIsAtRest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	size, now := history.Year(0.002), time.Now()
	empty, _ := database(t, size, now, false)
	filled, _ := database(t, size, now, true)

	type answer struct {
		name string
		get  func(s *repository.Store) (any, error)
	}
	answers := []answer{
		{"DueRounds", func(s *repository.Store) (any, error) { return s.DueRounds(ctx) }},
		{"DueDiscussions", func(s *repository.Store) (any, error) {
			issues, err := s.DueDiscussions(ctx, 50)
			var refs []string
			for _, i := range issues {
				refs = append(refs, fmt.Sprintf("%s#%d", i.Repo, i.Number))
			}
			return refs, err
		}},
		{"UnconsumedMentions", func(s *repository.Store) (any, error) {
			m, err := s.UnconsumedMentions(ctx, time.Minute, 100)
			return len(m), err
		}},
		{"StalledTasks", func(s *repository.Store) (any, error) {
			st, err := s.StalledTasks(ctx, 30*time.Minute, 100)
			return len(st), err
		}},
		{"StaleLiveIssues", func(s *repository.Store) (any, error) {
			refs, err := s.StaleLiveIssues(ctx, 10*time.Minute, 100)
			return len(refs), err
		}},
		{"OpenPullRequestsInReview", func(s *repository.Store) (any, error) {
			prs, err := s.OpenPullRequestsInReview(ctx, 100)
			return len(prs), err
		}},
		{"RunningByAgent", func(s *repository.Store) (any, error) { return s.RunningByAgent(ctx) }},
		{"InboxStats", func(s *repository.Store) (any, error) {
			st, err := s.InboxStats(ctx)
			st.OldestAge = st.OldestAge.Round(time.Hour)
			return st, err
		}},
		{"live TaskCounts", func(s *repository.Store) (any, error) {
			counts, err := s.TaskCounts(ctx)
			live := map[string]int{}
			for _, c := range counts {
				if !c.Status.Terminal() {
					live[string(c.Status)+"/"+string(c.ActionType)] = c.N
				}
			}
			return live, err
		}},
		{"pending tasks", func(s *repository.Store) (any, error) {
			ts, err := s.ListTasks(ctx, repository.TaskFilter{Status: task.StatusPending, Limit: 1000})
			return len(ts), err
		}},
	}
	for _, a := range answers {
		want, err := a.get(empty)
		require.NoError(t, err, a.name)
		got, err := a.get(filled)
		require.NoError(t, err, a.name)
		assert.Equal(t, want, got, a.name)
	}
	// And the live state has something for each to find.
	due, err := empty.DueRounds(ctx)
	require.NoError(t, err)
	assert.Len(t, due, 2)
	discussions, err := empty.DueDiscussions(ctx, 50)
	require.NoError(t, err)
	assert.Len(t, discussions, 2)
	inbox, err := empty.InboxStats(ctx)
	require.NoError(t, err)
	assert.Equal(t, repository.InboxStats{Waiting: 10, Retrying: 2, Parked: 1}, repository.InboxStats{
		Waiting: inbox.Waiting, Retrying: inbox.Retrying, Parked: inbox.Parked})
}
