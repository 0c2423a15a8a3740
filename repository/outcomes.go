package repository

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/moziplus/mozi/repository/task"
)

// Outcome is what it took an agent to get one pull request merged
// (docs/loop/outcomes.md defines each figure).
type Outcome struct {
	Repo         string
	PRNumber     int
	Agent        string
	MergedAt     time.Time
	HumanPush    bool
	CIRounds     int
	ReviewRounds int
	// AssignToPR and PRToMerge are nil when their start is unknown.
	AssignToPR *time.Duration
	PRToMerge  *time.Duration
	Tokens     int64
	CostUSD    float64
}

// MarkHumanPush records that someone other than a registered agent pushed
// to the pull request's branch.
func (q *Queries) MarkHumanPush(ctx context.Context, repo string, number int) error {
	_, err := q.db.Exec(ctx, `UPDATE pull_requests SET human_push = true
		WHERE repo = $1 AND number = $2 AND NOT human_push`, repo, number)
	if err != nil {
		return fmt.Errorf("mark human push on %s#%d: %w", repo, number, err)
	}
	return nil
}

// RecordOutcome writes the outcome of a merged pull request authored by
// agent, from what the database holds at the merge: its tasks, those of the
// issues it closes, and their attempts. A second call (the merge delivered
// again, or reconciled) changes nothing; recorded is false then, or when
// the pull request is not a merged one mozi knows.
func (q *Queries) RecordOutcome(ctx context.Context, repo string, number int, agent string) (recorded bool, err error) {
	tag, err := q.db.Exec(ctx, `
		WITH pr AS (
			-- Every time is mozi's clock (when it processed the event), as
			-- task_state.created_at and opened_at are: Gitea's closed_at
			-- would mix two clocks, and a replayed recording's dates.
			SELECT repo, number, opened_at, human_push, now() AS merged_at
			FROM pull_requests WHERE repo = $1 AND number = $2 AND merged
		), linked AS (
			SELECT split_part(l, '#', 1) AS repo, split_part(l, '#', 2)::int AS number
			FROM pull_requests p, unnest(p.linked_issues) l
			WHERE p.repo = $1 AND p.number = $2 AND l ~ '^[^#]+#[0-9]{1,9}$'
		), tasks AS (
			SELECT t.id, t.action_type, t.agent, t.created_at, t.daemon_meta,
				t.repo = $1 AND (t.issue_number = $2 OR t.pr_number = $2) AS of_pr
			FROM task_state t
			WHERE (t.repo = $1 AND (t.issue_number = $2 OR t.pr_number = $2))
				OR (t.repo, t.issue_number) IN (SELECT repo, number FROM linked)
		), figures AS (
			SELECT
				-- A red CI round is a head commit that failed: several failing
				-- contexts of one commit are one round.
				count(DISTINCT COALESCE(NULLIF(daemon_meta->>'head_sha', ''), id::text))
					FILTER (WHERE action_type = 'ci_failure' AND of_pr) AS ci_rounds,
				count(*) FILTER (WHERE action_type = 'review_result' AND of_pr
					AND daemon_meta->>'review_state' = 'rejected') AS review_rounds,
				min(created_at) FILTER (WHERE action_type = 'issue_assigned' AND lower(agent) = lower($3)) AS assigned_at
			FROM tasks
		), usage AS (
			SELECT COALESCE(sum(COALESCE(a.tokens_in, 0) + COALESCE(a.tokens_out, 0)), 0) AS tokens,
				COALESCE(sum(a.cost_usd), 0) AS cost_usd
			FROM task_attempts a WHERE a.task_id IN (SELECT id FROM tasks)
		)
		INSERT INTO pr_outcomes (repo, pr_number, agent, merged_at, human_push, ci_rounds, review_rounds,
			assign_to_pr_s, pr_to_merge_s, tokens, cost_usd)
		SELECT pr.repo, pr.number, $3, pr.merged_at, pr.human_push, f.ci_rounds, f.review_rounds,
			-- GREATEST would turn an unknown start (NULL) into 0.
			CASE WHEN f.assigned_at <= pr.opened_at THEN EXTRACT(EPOCH FROM pr.opened_at - f.assigned_at)
				WHEN f.assigned_at > pr.opened_at THEN 0 END,
			CASE WHEN pr.opened_at <= pr.merged_at THEN EXTRACT(EPOCH FROM pr.merged_at - pr.opened_at)
				WHEN pr.opened_at > pr.merged_at THEN 0 END,
			u.tokens, u.cost_usd
		FROM pr, figures f, usage u
		ON CONFLICT (repo, pr_number) DO NOTHING`, repo, number, agent)
	if err != nil {
		return false, fmt.Errorf("record outcome of %s#%d: %w", repo, number, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Outcome reads the recorded outcome of one pull request.
func (q *Queries) Outcome(ctx context.Context, repo string, number int) (Outcome, error) {
	var (
		o             Outcome
		assign, merge *float64
	)
	err := q.db.QueryRow(ctx, `SELECT repo, pr_number, agent, merged_at, human_push, ci_rounds, review_rounds,
			assign_to_pr_s, pr_to_merge_s, tokens, cost_usd::float8
		FROM pr_outcomes WHERE repo = $1 AND pr_number = $2`, repo, number).
		Scan(&o.Repo, &o.PRNumber, &o.Agent, &o.MergedAt, &o.HumanPush, &o.CIRounds, &o.ReviewRounds,
			&assign, &merge, &o.Tokens, &o.CostUSD)
	if errors.Is(err, pgx.ErrNoRows) {
		return Outcome{}, fmt.Errorf("outcome of %s#%d: %w", repo, number, task.ErrNotFound)
	}
	if err != nil {
		return Outcome{}, fmt.Errorf("read outcome of %s#%d: %w", repo, number, err)
	}
	o.AssignToPR, o.PRToMerge = seconds(assign), seconds(merge)
	return o, nil
}

func seconds(s *float64) *time.Duration {
	if s == nil {
		return nil
	}
	d := time.Duration(*s * float64(time.Second))
	return &d
}
