package repository

import (
	"context"
	"fmt"
	"time"
)

// DeferPending pushes a pending task's start to quiet from now (the
// database clock), never earlier than it already was: each loose comment
// of a burst restarts the quiet period, so the burst becomes one run. It
// reports whether the task was still pending; a claimed or running task
// is not touched (its prompt is read already).
func (q *Queries) DeferPending(ctx context.Context, id int64, quiet time.Duration) (bool, error) {
	tag, err := q.db.Exec(ctx, `UPDATE task_state
		SET not_before = GREATEST(not_before, now() + $2 * interval '1 microsecond'), updated_at = now()
		WHERE id = $1 AND status = 'pending'`, id, quiet.Microseconds())
	if err != nil {
		return false, fmt.Errorf("defer task %d by %s: %w", id, quiet, err)
	}
	return tag.RowsAffected() == 1, nil
}
