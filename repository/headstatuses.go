package repository

import (
	"context"
	"fmt"
	"strings"

	"github.com/moziplus/mozi/repository/task"
)

// ciHoldFor is how far a held reviewer task's not_before is pushed: it is
// released by a green head (ReleaseReviewers), not by time.
const ciHoldFor = "100 years"

// reviewerActions are the tasks that review a pull request.
const reviewerActions = `('review_request', 'review_updated')`

// SaveHeadStatus records the latest state of a status context on a commit;
// an older report of the same context changes nothing.
func (q *Queries) SaveHeadStatus(ctx context.Context, st task.CommitStatus) error {
	_, err := q.db.Exec(ctx, `INSERT INTO head_statuses (repo, sha, context, state, description, target_url, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, COALESCE($7, now()))
		ON CONFLICT (repo, sha, context) DO UPDATE SET state = EXCLUDED.state,
			description = EXCLUDED.description, target_url = EXCLUDED.target_url, updated_at = EXCLUDED.updated_at
		WHERE head_statuses.updated_at <= EXCLUDED.updated_at`,
		st.Repo, st.SHA, st.Context, st.State, st.Description, st.TargetURL, nullTime(st.UpdatedAt))
	if err != nil {
		return fmt.Errorf("save status %q of %s@%s: %w", st.Context, st.Repo, st.SHA, err)
	}
	return nil
}

// HeadStatuses returns the latest state of every status context of a
// commit, by context.
func (q *Queries) HeadStatuses(ctx context.Context, repo, sha string) ([]task.CommitStatus, error) {
	rows, err := q.db.Query(ctx, `SELECT context, state, description, target_url, updated_at
		FROM head_statuses WHERE repo = $1 AND sha = $2 ORDER BY context`, repo, sha)
	if err != nil {
		return nil, fmt.Errorf("statuses of %s@%s: %w", repo, sha, err)
	}
	defer rows.Close()
	var out []task.CommitStatus
	for rows.Next() {
		st := task.CommitStatus{Repo: repo, SHA: sha}
		if err := rows.Scan(&st.Context, &st.State, &st.Description, &st.TargetURL, &st.UpdatedAt); err != nil {
			return nil, fmt.Errorf("scan status of %s@%s: %w", repo, sha, err)
		}
		out = append(out, st)
	}
	return out, rows.Err()
}

// CIRounds counts the repair rounds (ci_failure tasks) a pull request has
// had; a round superseded by a newer head before it ran is not one.
func (q *Queries) CIRounds(ctx context.Context, repo string, pr int) (int, error) {
	var n int
	err := q.db.QueryRow(ctx, `SELECT count(*) FROM task_state
		WHERE repo = $1 AND issue_number = $2 AND action_type = 'ci_failure'
		  AND NOT (status = 'cancelled' AND last_error = $3)`, repo, pr, SupersededByHead).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("repair rounds of %s#%d: %w", repo, pr, err)
	}
	return n, nil
}

// SupersededByHead is the last error of a repair round cancelled before
// it ran because the pull request's head moved on.
const SupersededByHead = "superseded: the pull request has a newer head"

// CancelStaleRepairs cancels the pull request's ci_failure tasks that have
// not started and are about another head than sha: a status of an older
// head never counts.
func (q *Queries) CancelStaleRepairs(ctx context.Context, repo string, pr int, sha string) (int, error) {
	tag, err := q.db.Exec(ctx, `UPDATE task_state SET status = 'cancelled', finished_at = now(), updated_at = now(),
			last_error = $4, ended_by = 'mozi'
		WHERE id IN (SELECT id FROM task_state WHERE repo = $1 AND issue_number = $2 AND action_type = 'ci_failure'
			AND status = 'pending' AND daemon_meta->>'head_sha' IS DISTINCT FROM $3 `+lockInOrder+`)`,
		repo, pr, sha, SupersededByHead)
	if err != nil {
		return 0, fmt.Errorf("cancel stale repairs of %s#%d: %w", repo, pr, err)
	}
	return int(tag.RowsAffected()), nil
}

// HoldReviewers keeps the pull request's reviewer tasks that have not
// started from running until ReleaseReviewers.
func (q *Queries) HoldReviewers(ctx context.Context, repo string, pr int) (int, error) {
	tag, err := q.db.Exec(ctx, `UPDATE task_state SET not_before = now() + interval '`+ciHoldFor+`',
			held_for = $3, updated_at = now()
		WHERE id IN (SELECT id FROM task_state WHERE repo = $1 AND issue_number = $2
			AND action_type IN `+reviewerActions+` AND status = 'pending' AND held_for <> $3 `+lockInOrder+`)`,
		repo, pr, string(task.HeldForCI))
	if err != nil {
		return 0, fmt.Errorf("hold reviewers of %s#%d: %w", repo, pr, err)
	}
	return int(tag.RowsAffected()), nil
}

// ReleaseReviewers makes the pull request's reviewer tasks held for CI due
// now, and wakes the dispatchers.
func (q *Queries) ReleaseReviewers(ctx context.Context, repo string, pr int) (int, error) {
	tag, err := q.db.Exec(ctx, `UPDATE task_state SET not_before = now(), held_for = '', updated_at = now()
		WHERE id IN (SELECT id FROM task_state WHERE repo = $1 AND issue_number = $2
			AND action_type IN `+reviewerActions+` AND status = 'pending' AND held_for = $3 `+lockInOrder+`)`,
		repo, pr, string(task.HeldForCI))
	if err != nil {
		return 0, fmt.Errorf("release reviewers of %s#%d: %w", repo, pr, err)
	}
	if tag.RowsAffected() > 0 {
		if _, err := q.db.Exec(ctx, `SELECT pg_notify('mozi_pending', '')`); err != nil {
			return 0, fmt.Errorf("wake dispatchers: %w", err)
		}
	}
	return int(tag.RowsAffected()), nil
}

// RepoHasStatuses reports whether any commit of the repository ever had a
// status: a repository with CI whose new head has none yet is pending, one
// without CI goes straight to review.
func (q *Queries) RepoHasStatuses(ctx context.Context, repo string) (bool, error) {
	var ok bool
	if err := q.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM head_statuses WHERE repo = $1)`, repo).Scan(&ok); err != nil {
		return false, fmt.Errorf("statuses of %s: %w", repo, err)
	}
	return ok, nil
}

// CIState sums up a head's statuses: green when there are none or all
// passed, red when one failed, pending otherwise. red lists the failed.
func CIState(statuses []task.CommitStatus) (state string, red []task.CommitStatus) {
	state = CIGreen
	for _, st := range statuses {
		switch strings.ToLower(st.State) {
		case "success", "warning", "skipped":
		case "failure", "error":
			state = CIRed
			red = append(red, st)
		default:
			if state == CIGreen {
				state = CIPending
			}
		}
	}
	return state, red
}

// What CIState says of a head.
const (
	CIGreen   = "green"
	CIRed     = "red"
	CIPending = "pending"
)
