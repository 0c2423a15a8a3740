package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository/pgtest"
)

// mozi tasks --stats prints the window's outcomes per repository and
// agent, as a table or JSON lines, filtered by --repo and --agent.
func TestTasksStats(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	raw, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(raw.Close)
	now := time.Now()
	for _, o := range []struct {
		repo, agent   string
		pr            int
		ago           time.Duration
		human         bool
		ci, review    int
		assign, merge any
		tokens        int64
		cost          float64
	}{
		{"acme/widget", "coder1", 1, time.Hour, false, 1, 0, 600.0, 7200.0, 1000, 0.5},
		{"acme/widget", "coder1", 2, 2 * time.Hour, true, 2, 1, 1800.0, 10800.0, 3000, 1.5},
		{"acme/widget", "coder1", 3, 10 * 24 * time.Hour, false, 9, 9, 60.0, 60.0, 9, 9},
		{"acme/gadget", "coder2", 7, 3 * time.Hour, false, 0, 0, nil, 45.0, 20, 0.02},
	} {
		_, err := raw.Exec(ctx, `INSERT INTO pr_outcomes (repo, pr_number, agent, merged_at, human_push, ci_rounds,
				review_rounds, assign_to_pr_s, pr_to_merge_s, tokens, cost_usd)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`, o.repo, o.pr, o.agent, now.Add(-o.ago), o.human,
			o.ci, o.review, o.assign, o.merge, o.tokens, o.cost)
		require.NoError(t, err)
	}
	mozi := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(ctx, append([]string{"tasks", "--stats"}, args...),
			func(k string) string { return map[string]string{"MOZI_DATABASE_URL": dbURL}[k] }, &out, &errOut)
		return out.String(), err
	}

	out, err := mozi()
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, out)
	assert.Equal(t, "Agent pull requests merged in the last 7 days (medians of the times, means per PR):", lines[0])
	assert.Equal(t, []string{"REPO", "AGENT", "MERGED", "AUTONOMOUS", "CI", "ROUNDS", "REVIEW", "ROUNDS",
		"ASSIGN→PR", "PR→MERGE", "TOKENS", "COST"}, strings.Fields(lines[1]))
	assert.Equal(t, []string{"acme/gadget", "coder2", "1", "1", "(100%)", "0.0", "0.0", "-", "45s", "20", "$0.02"},
		strings.Fields(lines[2]))
	// #3, merged ten days ago, is outside the week.
	assert.Equal(t, []string{"acme/widget", "coder1", "2", "1", "(50%)", "1.5", "0.5", "20m", "2.5h", "2000", "$1.00"},
		strings.Fields(lines[3]))

	out, err = mozi("--days", "30", "--repo", "acme/widget", "--json")
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	assert.Equal(t, "coder1", doc["agent"])
	assert.Equal(t, float64(30), doc["days"])
	assert.Equal(t, float64(3), doc["merged"])
	assert.InDelta(t, 2.0/3, doc["autonomy"], 1e-9)
	assert.Equal(t, float64(12), doc["ci_rounds"])
	assert.Equal(t, float64(600), doc["assign_to_pr_median_seconds"])
	assert.InDelta(t, 11.0/3, doc["cost_usd_per_pr"], 1e-9)

	out, err = mozi("--agent", "nobody")
	require.NoError(t, err)
	assert.Equal(t, "No agent pull request merged in the last 7 days.\n", out)
}

func TestTasksStatsUsage(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"tasks", "--days", "3"}, "--days goes with --stats"},
		{[]string{"tasks", "--stats", "--status", "done"}, "--status and --limit do not apply"},
		{[]string{"tasks", "--stats", "--limit", "5"}, "--status and --limit do not apply"},
		{[]string{"tasks", "--stats", "--days", "0"}, "--days 0: give 1 to 3650"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tt.args, func(string) string { return "" }, &stdout, &stderr)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.Equal(t, 2, exitCode(err), "a usage error")
		})
	}
}
