package repository

import (
	"context"
	"fmt"
	"strings"
)

// Unsettled counts what mozi still has to do with what it received: work
// that a later delivery could race with. `mozi replay --settle` waits for
// all of it to be zero before it posts the next delivery, so a replayed
// session unfolds as the recorded one did (each agent ran before Gitea's
// next event) however fast this machine is.
type Unsettled struct {
	Deliveries int // stored and not yet processed (waiting or retrying)
	Mentions   int // queued for the ticker and not yet consumed
	Pending    int // tasks a worker will take: not waiting for an open issue or a tripped breaker
	Claimed    int // tasks a dispatcher holds but has not started
	Running    int // attempts whose agent has not finished
	// Rounds and Discussions are due for the ticker's next sweep, which
	// makes their tasks: timed, so a replay that did not wait for them
	// would get a round review or not depending on when the sweep fell.
	Rounds      int
	Discussions int
}

// Zero reports whether nothing is left to do.
func (u Unsettled) Zero() bool { return u == Unsettled{} }

// String names what is left, e.g. "2 pending tasks, 1 running attempt".
func (u Unsettled) String() string {
	var parts []string
	for _, c := range []struct {
		n    int
		what string
	}{
		{u.Deliveries, "unprocessed deliveries"}, {u.Mentions, "queued mentions"},
		{u.Pending, "pending tasks"}, {u.Claimed, "claimed tasks"}, {u.Running, "running attempts"},
		{u.Rounds, "rounds due for a review"}, {u.Discussions, "discussions due"},
	} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	if len(parts) == 0 {
		return "settled"
	}
	return strings.Join(parts, ", ")
}

// Unsettled reads what is left to do. A pending task that
// waits for an open issue or a tripped breaker waits for something a later
// delivery brings, so it does not count; one that waits for its backoff
// does, as the dispatcher will take it without further news.
//
// Due rounds and discussions are read first: the ticker turns them into
// pending tasks, which the counts read after them then see.
func (q *Queries) Unsettled(ctx context.Context) (Unsettled, error) {
	var u Unsettled
	rounds, err := q.DueRounds(ctx)
	if err != nil {
		return Unsettled{}, err
	}
	discussions, err := q.DueDiscussions(ctx, 1)
	if err != nil {
		return Unsettled{}, err
	}
	u.Rounds, u.Discussions = len(rounds), len(discussions)
	err = q.db.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM webhook_deliveries WHERE processed_at IS NULL),
			(SELECT count(*) FROM mention_queue WHERE consumed_at IS NULL),
			(SELECT count(*) FROM task_state t WHERE t.status = 'pending'
				AND NOT EXISTS (SELECT 1 FROM repo_breakers b WHERE b.repo = t.repo AND b.open_until > now())
				AND (t.action_type <> 'issue_assigned' OR NOT EXISTS (SELECT 1 `+openDependenciesOfT+`))),
			(SELECT count(*) FROM task_state WHERE status = 'claimed'),
			(SELECT count(*) FROM task_attempts WHERE finished_at IS NULL)`).
		Scan(&u.Deliveries, &u.Mentions, &u.Pending, &u.Claimed, &u.Running)
	if err != nil {
		return Unsettled{}, fmt.Errorf("count unsettled work: %w", err)
	}
	return u, nil
}
