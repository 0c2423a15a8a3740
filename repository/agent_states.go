package repository

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/moziplus/mozi/repository/task"
)

// AgentWork is one agent's work as the console's agents page shows it:
// its live tasks by status, what they wait for, and its runs in the spawn
// budget's window.
type AgentWork struct {
	Agent string
	// Queued are pending tasks free to be claimed (their retry backoff
	// aside); Held are pending tasks held back for a reason outside them
	// and still waiting, by task.HoldReason.
	Queued  int
	Held    map[task.HoldReason]int
	Claimed int
	Working int
	Review  int
	// Running are its tasks holding a live lease (claimed, or with an
	// agent running): what its concurrency limit counts.
	Running int
	// Waiting are tasks waiting for a person, by task.WaitReason.
	Waiting map[task.WaitReason]int
	// Runs of the last hour and of the window (what the per-agent spawn
	// budget counts), the window's failed ones (non-zero exit, time
	// limit, budget kill, start error) and its usage.
	RunsLastHour int
	Runs         int
	FailedRuns   int
	TokensIn     int64
	TokensOut    int64
	CostUSD      float64
}

// failedOutcomes are the attempt outcomes that count as the agent's
// failure (the retry budget's): not an interruption, a pause or a rescue.
var failedOutcomes = []string{task.AttemptFailed, task.AttemptTimeout, task.AttemptBudget, task.AttemptSpawnError}

// AgentWorks returns the work of every agent with live tasks or runs in
// the last window, by agent name. The live counts read task_state's live
// rows only; the runs read task_attempts by its start time.
func (q *Queries) AgentWorks(ctx context.Context, window time.Duration) (map[string]*AgentWork, error) {
	out := map[string]*AgentWork{}
	of := func(agent string) *AgentWork {
		w := out[agent]
		if w == nil {
			w = &AgentWork{Agent: agent, Held: map[task.HoldReason]int{}, Waiting: map[task.WaitReason]int{}}
			out[agent] = w
		}
		return w
	}
	// A held task whose wait is over is queued again: its held_for
	// stays until it is claimed.
	rows, err := q.db.Query(ctx, `SELECT agent, status,
			CASE WHEN status = 'pending' AND not_before > now() THEN held_for ELSE '' END AS held,
			wait_reason, count(*),
			count(*) FILTER (WHERE lease_owner IS NOT NULL AND lease_expires_at > now()) FROM task_state
		WHERE status IN ('pending', 'claimed', 'working', 'review', 'waiting')
		GROUP BY agent, status, held, wait_reason`)
	if err != nil {
		return nil, fmt.Errorf("count the agents' live tasks: %w", err)
	}
	var agent, status, heldFor, waitReason string
	var n, running int
	_, err = pgx.ForEachRow(rows, []any{&agent, &status, &heldFor, &waitReason, &n, &running}, func() error {
		w := of(agent)
		w.Running += running
		switch task.Status(status) {
		case task.StatusPending:
			if heldFor != "" {
				w.Held[task.HoldReason(heldFor)] += n
			} else {
				w.Queued += n
			}
		case task.StatusClaimed:
			w.Claimed += n
		case task.StatusWorking:
			w.Working += n
		case task.StatusReview:
			w.Review += n
		case task.StatusWaiting:
			w.Waiting[task.WaitReason(waitReason)] += n
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count the agents' live tasks: %w", err)
	}
	rows, err = q.db.Query(ctx, `SELECT agent, count(*) FILTER (WHERE started_at > now() - interval '1 hour'),
			count(*), count(*) FILTER (WHERE outcome = ANY($2)),
			COALESCE(sum(tokens_in), 0), COALESCE(sum(tokens_out), 0), COALESCE(sum(cost_usd), 0)::float8
		FROM task_attempts WHERE started_at > now() - $1::interval GROUP BY agent`, interval(window), failedOutcomes)
	if err != nil {
		return nil, fmt.Errorf("count the agents' runs: %w", err)
	}
	var (
		hour, runs, failed int
		in, outTok         int64
		cost               float64
	)
	_, err = pgx.ForEachRow(rows, []any{&agent, &hour, &runs, &failed, &in, &outTok, &cost}, func() error {
		w := of(agent)
		w.RunsLastHour, w.Runs, w.FailedRuns, w.TokensIn, w.TokensOut, w.CostUSD = hour, runs, failed, in, outTok, cost
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count the agents' runs: %w", err)
	}
	return out, nil
}

// OpenBreakerList lists the repositories whose circuit breaker is open
// now, soonest to close first.
func (q *Queries) OpenBreakerList(ctx context.Context) ([]Breaker, error) {
	rows, err := q.db.Query(ctx, `SELECT repo, tripped_at, open_until, comments, issue FROM repo_breakers
		WHERE open_until > now() ORDER BY open_until, repo`)
	if err != nil {
		return nil, fmt.Errorf("list open circuit breakers: %w", err)
	}
	var b Breaker
	var out []Breaker
	_, err = pgx.ForEachRow(rows, []any{&b.Repo, &b.TrippedAt, &b.OpenUntil, &b.Comments, &b.Issue}, func() error {
		out = append(out, b)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list open circuit breakers: %w", err)
	}
	return out, nil
}
