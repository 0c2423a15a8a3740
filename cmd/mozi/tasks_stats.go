package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/moziplus/mozi/repository"
)

// statsArgs are the flags of mozi tasks --stats.
type statsArgs struct {
	configPath, dataDir, repo, agent string
	days                             int
	asJSON                           bool
}

// checkStatsFlags refuses the listing's flags with --stats and --days
// without it: one clear line instead of a flag silently ignored.
func checkStatsFlags(fs *flag.FlagSet, stats bool, days int) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case stats && (set["status"] || set["limit"]):
		return usagef("--stats summarises merged pull requests: --status and --limit do not apply")
	case !stats && set["days"]:
		return usagef("--days goes with --stats")
	case days < 1 || days > 3650:
		return usagef("--days %d: give 1 to 3650", days)
	}
	return nil
}

const defaultStatsDays = 7

// runTaskStats prints, per repository and agent, what it took to get the
// agents' pull requests merged in the last days (docs/loop/outcomes.md).
func runTaskStats(ctx context.Context, e *env, a statsArgs) error {
	_, db, err := openForCLI(ctx, e, a.configPath, a.dataDir)
	if err != nil {
		return err
	}
	defer db.Close()
	all, err := db.store.OutcomeStatsSince(ctx, time.Duration(a.days)*24*time.Hour)
	if err != nil {
		return err
	}
	var stats []repository.OutcomeStats
	for _, s := range all {
		if (a.repo == "" || strings.EqualFold(s.Repo, a.repo)) && (a.agent == "" || strings.EqualFold(s.Agent, a.agent)) {
			stats = append(stats, s)
		}
	}
	if a.asJSON {
		enc := json.NewEncoder(e.stdout)
		for _, s := range stats {
			if err := enc.Encode(statsJSON(s, a.days)); err != nil {
				return err
			}
		}
		return nil
	}
	if len(stats) == 0 {
		fmt.Fprintf(e.stdout, "No agent pull request merged in the last %d days.\n", a.days)
		return nil
	}
	fmt.Fprintf(e.stdout, "Agent pull requests merged in the last %d days (medians of the times, means per PR):\n", a.days)
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REPO\tAGENT\tMERGED\tAUTONOMOUS\tCI ROUNDS\tREVIEW ROUNDS\tASSIGN→PR\tPR→MERGE\tTOKENS\tCOST")
	for _, s := range stats {
		n := float64(s.Merged)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d (%.0f%%)\t%.1f\t%.1f\t%s\t%s\t%s\t$%.2f\n", s.Repo, s.Agent, s.Merged,
			s.Autonomous, 100*float64(s.Autonomous)/n, float64(s.CIRounds)/n, float64(s.ReviewRounds)/n,
			shortSeconds(s.AssignToPR.MedianSec), shortSeconds(s.PRToMerge.MedianSec),
			strconv.FormatInt(int64(float64(s.Tokens)/n+0.5), 10), s.CostUSD/n)
	}
	return tw.Flush()
}

func statsJSON(s repository.OutcomeStats, days int) map[string]any {
	n := float64(s.Merged)
	return map[string]any{
		"repo": s.Repo, "agent": s.Agent, "days": days, "merged": s.Merged, "autonomous": s.Autonomous,
		"autonomy": float64(s.Autonomous) / n, "ci_rounds": s.CIRounds, "review_rounds": s.ReviewRounds,
		"ci_rounds_per_pr": float64(s.CIRounds) / n, "review_rounds_per_pr": float64(s.ReviewRounds) / n,
		"assign_to_pr_median_seconds": s.AssignToPR.MedianSec, "pr_to_merge_median_seconds": s.PRToMerge.MedianSec,
		"tokens": s.Tokens, "cost_usd": s.CostUSD, "tokens_per_pr": float64(s.Tokens) / n, "cost_usd_per_pr": s.CostUSD / n,
	}
}

// shortSeconds writes a duration the way a person reads a lead time:
// 45s, 12m, 5.2h, 3.1d; "-" when unknown.
func shortSeconds(s *float64) string {
	switch {
	case s == nil:
		return "-"
	case *s < 60:
		return fmt.Sprintf("%.0fs", *s)
	case *s < 3600:
		return fmt.Sprintf("%.0fm", *s/60)
	case *s < 48*3600:
		return fmt.Sprintf("%.1fh", *s/3600)
	}
	return fmt.Sprintf("%.1fd", *s/86400)
}
