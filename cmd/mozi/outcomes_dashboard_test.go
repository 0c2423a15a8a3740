package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The outcome panels count what happened within the dashboard's range from
// the database totals every replica exports: two replicas count once, a
// pair whose first merge falls in the range counts it, and the durations'
// median comes from the range's buckets. promtool evaluates the panels'
// own queries over series written as the collector exports them.
func TestOutcomePanelsCountTheRange(t *testing.T) {
	promtool := promBinary(t, "promtool")
	exprs := map[string][]string{}
	for _, q := range dashboardQueries(t) {
		exprs[q.panel] = append(exprs[q.panel], strings.NewReplacer("$__range", "1h", "$agent", ".*").Replace(q.expr))
	}
	merged := exprs["Merged agent PRs (dashboard range)"]
	require.Len(t, merged, 2)
	autonomy := exprs["Autonomy (dashboard range)"]
	require.Len(t, autonomy, 1)
	toMerge := exprs["PR → merge"]
	require.Len(t, toMerge, 2)
	require.Len(t, exprs["CI rounds per merged PR"], 1)

	// Two hours, a sample a minute. acme/widget coder1: 2 merges before
	// the last hour and a third in it, not autonomous, opened to merged
	// within the hour's first bucket bound (3600 s); the one before took
	// between 3600 and 7200 s. acme/gadget coder2: its first merge, within
	// the hour, autonomous, one CI round.
	var series strings.Builder
	for _, instance := range []string{"a:9090", "b:9090"} {
		for _, s := range []struct{ name, labels, values string }{
			{"mozi_pr_merged_total", `repo="acme/widget",agent="coder1"`, "2x60 3x59"},
			{"mozi_pr_merged_autonomous_total", `repo="acme/widget",agent="coder1"`, "2x60 2x59"},
			{"mozi_pr_ci_rounds_total", `repo="acme/widget",agent="coder1"`, "4x60 4x59"},
			{"mozi_pr_to_merge_seconds_bucket", `repo="acme/widget",agent="coder1",le="3600"`, "1x60 2x59"},
			{"mozi_pr_to_merge_seconds_bucket", `repo="acme/widget",agent="coder1",le="7200"`, "2x60 3x59"},
			{"mozi_pr_to_merge_seconds_bucket", `repo="acme/widget",agent="coder1",le="+Inf"`, "2x60 3x59"},
			{"mozi_pr_merged_total", `repo="acme/gadget",agent="coder2"`, "_x89 1x30"},
			{"mozi_pr_merged_autonomous_total", `repo="acme/gadget",agent="coder2"`, "_x89 1x30"},
			{"mozi_pr_ci_rounds_total", `repo="acme/gadget",agent="coder2"`, "_x89 1x30"},
		} {
			fmt.Fprintf(&series, "      - series: '%s{%s,instance=%q,job=\"mozi\"}'\n        values: '%s'\n",
				s.name, s.labels, instance, s.values)
		}
	}
	check := func(expr string, samples ...string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "      - expr: %q\n        eval_time: 120m\n        exp_samples:\n", expr)
		for i := 0; i < len(samples); i += 2 {
			fmt.Fprintf(&b, "          - labels: '%s'\n            value: %s\n", samples[i], samples[i+1])
		}
		return b.String()
	}
	widget, gadget := `{repo="acme/widget",agent="coder1"}`, `{repo="acme/gadget",agent="coder2"}`
	tests := check(merged[0], widget, "1", gadget, "1") +
		check(merged[1], widget, "0", gadget, "1") +
		check(autonomy[0], widget, "0", gadget, "1") +
		check(exprs["CI rounds per merged PR"][0], widget, "0", gadget, "1") +
		check(toMerge[0], widget, "1800")

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "none.yml"), []byte("groups: []\n"), 0o600))
	file := filepath.Join(dir, "outcomes_test.yml")
	require.NoError(t, os.WriteFile(file, []byte("rule_files: [none.yml]\nevaluation_interval: 1m\ntests:\n"+
		"  - interval: 1m\n    input_series:\n"+series.String()+"    promql_expr_test:\n"+tests), 0o600))
	out, err := exec.Command(promtool, "test", "rules", file).CombinedOutput()
	require.NoError(t, err, "%s", out)
}
