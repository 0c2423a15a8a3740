package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository/pgtest"
)

// demoTable is the table of docs/quickstart.md, section 1: what the
// example configuration's demo agents make of the recorded session, one
// "status action agent issue pr" row per task, in any order.
var demoTable = map[string]int{
	"done discussion coder1 #1 -":                         1,
	"done discussion coder2 #1 -":                         1,
	"done discussion reviewer1 #1 -":                      1,
	"done discussion infra1 #1 -":                         1,
	"done discussion lead #1 -":                           1,
	"done issue_assigned/bug coder1 #2 -":                 1,
	"done discussion coder1 #3 -":                         1,
	"done discussion coder2 #3 -":                         1,
	"done discussion reviewer1 #3 -":                      1,
	"done discussion infra1 #3 -":                         1,
	"done discussion lead #3 -":                           1,
	"cancelled issue_assigned/infrastructure coder2 #3 -": 1,
	"done issue_assigned/infrastructure coder2 #3 #4":     1,
	"done issue_assigned/infrastructure infra1 #3 -":      1,
	"done mention infra1 #3 -":                            1,
	"done review_request reviewer1 #4 #4":                 1,
	"done review_result coder2 #4 #4":                     2,
	"done review_updated reviewer1 #4 #4":                 1,
	"done ci_failure coder2 #4 #4":                        1,
	"done review_comment coder2 #4 #4":                    1,
	"done mention coder2 #4 #4":                           1,
	"done review_merged coder2 #4 #4":                     1,
	"done issue_closed coder1 #2 -":                       1,
	"done round_review lead #1 -":                         2,
	"done issue_assigned/bug coder1 #2 #6":                1,
	"done issue_assigned/docs coder1 #5 -":                1,
}

// TestDemoReplayGivesTheDocumentedTable runs the quickstart's demo from a
// clean database: mozi serve with deploy/mozi.example.yaml, mozi replay
// --settle of the recorded session, then mozi tasks. Every task is the
// documented one, every agent ran (no task finished without its run), and
// mozi logged no warning.
func TestDemoReplayGivesTheDocumentedTable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real mozi process and replays a whole session (about a minute)")
	}
	example, err := filepath.Abs("../../deploy/mozi.example.yaml")
	require.NoError(t, err)
	dir := stateDir(t)
	url := pgtest.URL(t)
	p := startServe(t, dir, "MOZI_CONFIG="+example, "MOZI_DATABASE_URL="+url)
	getenv := func(k string) string {
		switch k {
		case "MOZI_WEBHOOK_SECRET":
			return testSecret
		case "MOZI_LISTEN":
			return p.addr
		case "MOZI_DATABASE_URL":
			return url
		}
		return ""
	}
	mozi := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		require.NoError(t, run(context.Background(), args, getenv, &out, io.Discard), "mozi %s", strings.Join(args, " "))
		return out.String()
	}
	mozi("replay", "--settle", "--config", example, "../../testdata/gitea-1.25/webhooks")

	got := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(mozi("tasks", "--config", example, "--json", "--limit", "1000")), "\n") {
		var tk struct {
			ID           int64
			Status       string
			ActionType   string `json:"action_type"`
			BusinessType string `json:"business_type"`
			Agent        string
			Issue        int
			PR           int
		}
		require.NoError(t, json.Unmarshal([]byte(line), &tk))
		action := tk.ActionType
		if tk.BusinessType != "" {
			action += "/" + tk.BusinessType
		}
		pr := "-"
		if tk.PR != 0 {
			pr = fmt.Sprintf("#%d", tk.PR)
		}
		got[fmt.Sprintf("%s %s %s #%d %s", tk.Status, action, tk.Agent, tk.Issue, pr)]++

		var show struct {
			Attempts []struct{ Outcome string }
		}
		require.NoError(t, json.Unmarshal([]byte(mozi("task", "show", fmt.Sprint(tk.ID), "--config", example, "--json")), &show))
		require.Len(t, show.Attempts, 1, "task %d (%s %s) ran its agent once", tk.ID, action, tk.Agent)
		assert.Equal(t, "succeeded", show.Attempts[0].Outcome, "task %d", tk.ID)
	}
	assert.Equal(t, rows(demoTable), rows(got), "the documented table (docs/quickstart.md)")
	assert.NotContains(t, p.stderr.String(), "level=WARN", "the demo runs without a warning")
}

// rows lists a table's rows sorted, repeated rows repeated: a readable diff.
func rows(table map[string]int) []string {
	var out []string
	for row, n := range table {
		for range n {
			out = append(out, row)
		}
	}
	sort.Strings(out)
	return out
}
