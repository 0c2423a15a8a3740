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
	// Buckets[i] counts durations <= OutcomeBuckets[i] (OutcomeTotals only).
	Buckets []uint64
}

// OutcomeBuckets are the upper bounds, in seconds, of the duration
// histograms: a minute to a week.
var OutcomeBuckets = []float64{60, 300, 900, 1800, 3600, 7200, 14400, 28800, 86400, 172800, 345600, 604800}

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

// OutcomeTotals sums every recorded outcome per repository and agent, with
// the durations' histogram buckets (OutcomeBuckets): what the Prometheus
// collector exports. Outcomes are never changed nor deleted, so every sum
// only grows.
func (q *Queries) OutcomeTotals(ctx context.Context) ([]OutcomeStats, error) {
	rows, err := q.db.Query(ctx, `WITH le AS (
			SELECT o.repo, o.agent, u.i,
				count(*) FILTER (WHERE o.assign_to_pr_s <= u.b) AS assign,
				count(*) FILTER (WHERE o.pr_to_merge_s <= u.b) AS merge
			FROM pr_outcomes o CROSS JOIN unnest($1::float8[]) WITH ORDINALITY AS u(b, i)
			GROUP BY o.repo, o.agent, u.i
		), buckets AS (
			SELECT repo, agent, array_agg(assign ORDER BY i) AS assign, array_agg(merge ORDER BY i) AS merge
			FROM le GROUP BY repo, agent
		), sums AS (
			SELECT repo, agent, count(*) AS merged, count(*) FILTER (WHERE NOT human_push) AS autonomous,
				sum(ci_rounds) AS ci_rounds, sum(review_rounds) AS review_rounds, sum(tokens) AS tokens,
				sum(cost_usd)::float8 AS cost_usd,
				count(assign_to_pr_s) AS assign_n, COALESCE(sum(assign_to_pr_s), 0) AS assign_sum,
				count(pr_to_merge_s) AS merge_n, COALESCE(sum(pr_to_merge_s), 0) AS merge_sum
			FROM pr_outcomes GROUP BY repo, agent
		)
		SELECT s.repo, s.agent, s.merged, s.autonomous, s.ci_rounds, s.review_rounds, s.tokens, s.cost_usd,
			s.assign_n, s.assign_sum, b.assign, s.merge_n, s.merge_sum, b.merge
		FROM sums s JOIN buckets b USING (repo, agent) ORDER BY s.repo, s.agent`, OutcomeBuckets)
	if err != nil {
		return nil, fmt.Errorf("read outcome totals: %w", err)
	}
	defer rows.Close()
	var out []OutcomeStats
	for rows.Next() {
		var s OutcomeStats
		if err := rows.Scan(&s.Repo, &s.Agent, &s.Merged, &s.Autonomous, &s.CIRounds, &s.ReviewRounds,
			&s.Tokens, &s.CostUSD, &s.AssignToPR.Count, &s.AssignToPR.SumSec, &s.AssignToPR.Buckets,
			&s.PRToMerge.Count, &s.PRToMerge.SumSec, &s.PRToMerge.Buckets); err != nil {
			return nil, fmt.Errorf("read outcome totals: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read outcome totals: %w", err)
	}
	return out, nil
}
