package repository

import (
	"context"
	"fmt"
	"time"
)

// OutcomeStats sums the outcomes of one repository and agent's merged pull
// requests.
type OutcomeStats struct {
	Repo  string
	Agent string
	// Merged counts merged pull requests; Autonomous those without a push
	// by a person.
	Merged, Autonomous     int
	CIRounds, ReviewRounds int64
	Tokens                 int64
	CostUSD                float64
	AssignToPR, PRToMerge  Durations
}

// Durations summarise one duration over merged pull requests; those whose
// start is unknown are not in them.
type Durations struct {
	Count  int
	SumSec float64
	// MedianSec is nil when Count is 0 (OutcomeStatsSince only).
	MedianSec *float64
	// Buckets[i] counts durations <= Bounds[i] seconds (OutcomeTotals
	// only; the bounds are the database's, a minute to a week).
	Buckets []uint64
	Bounds  []float64
}

// OutcomeStatsSince sums the outcomes of pull requests merged within the
// last window, per repository and agent, with the median durations.
func (q *Queries) OutcomeStatsSince(ctx context.Context, window time.Duration) ([]OutcomeStats, error) {
	rows, err := q.db.Query(ctx, `SELECT repo, agent, count(*), count(*) FILTER (WHERE NOT human_push),
			sum(ci_rounds), sum(review_rounds), sum(tokens), sum(cost_usd)::float8,
			count(assign_to_pr_s), COALESCE(sum(assign_to_pr_s), 0),
			percentile_cont(0.5) WITHIN GROUP (ORDER BY assign_to_pr_s),
			count(pr_to_merge_s), COALESCE(sum(pr_to_merge_s), 0),
			percentile_cont(0.5) WITHIN GROUP (ORDER BY pr_to_merge_s)
		FROM pr_outcomes WHERE merged_at > now() - $1::interval
		GROUP BY repo, agent ORDER BY repo, agent`, window)
	if err != nil {
		return nil, fmt.Errorf("read outcome stats: %w", err)
	}
	defer rows.Close()
	var out []OutcomeStats
	for rows.Next() {
		var s OutcomeStats
		if err := rows.Scan(&s.Repo, &s.Agent, &s.Merged, &s.Autonomous, &s.CIRounds, &s.ReviewRounds,
			&s.Tokens, &s.CostUSD, &s.AssignToPR.Count, &s.AssignToPR.SumSec, &s.AssignToPR.MedianSec,
			&s.PRToMerge.Count, &s.PRToMerge.SumSec, &s.PRToMerge.MedianSec); err != nil {
			return nil, fmt.Errorf("read outcome stats: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read outcome stats: %w", err)
	}
	return out, nil
}

// OutcomeTotals reads the totals of every recorded outcome per repository
// and agent, with the durations' histogram buckets: what the Prometheus
// collector exports. The database keeps them as outcomes are written, so
// reading them costs the same after years of merges; and since outcomes
// are never changed, every total only grows.
func (q *Queries) OutcomeTotals(ctx context.Context) ([]OutcomeStats, error) {
	rows, err := q.db.Query(ctx, `SELECT repo, agent, merged, autonomous, ci_rounds, review_rounds, tokens,
			cost_usd::float8, assign_n, assign_sum, assign_le, merge_n, merge_sum, merge_le, mozi_outcome_buckets()
		FROM pr_outcome_totals ORDER BY repo, agent`)
	if err != nil {
		return nil, fmt.Errorf("read outcome totals: %w", err)
	}
	defer rows.Close()
	var out []OutcomeStats
	for rows.Next() {
		var s OutcomeStats
		if err := rows.Scan(&s.Repo, &s.Agent, &s.Merged, &s.Autonomous, &s.CIRounds, &s.ReviewRounds,
			&s.Tokens, &s.CostUSD, &s.AssignToPR.Count, &s.AssignToPR.SumSec, &s.AssignToPR.Buckets,
			&s.PRToMerge.Count, &s.PRToMerge.SumSec, &s.PRToMerge.Buckets, &s.AssignToPR.Bounds); err != nil {
			return nil, fmt.Errorf("read outcome totals: %w", err)
		}
		s.PRToMerge.Bounds = s.AssignToPR.Bounds
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read outcome totals: %w", err)
	}
	return out, nil
}
