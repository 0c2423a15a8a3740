package repository

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/moziplus/mozi/repository/task"
)

// AcquireLeadership takes or renews the named lease for holder. It returns
// true while holder leads: the lease is free, expired, or already its own.
func (q *Queries) AcquireLeadership(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	var got string
	err := q.db.QueryRow(ctx, `INSERT INTO leader_leases (name, holder, expires_at)
		VALUES ($1, $2, now() + $3::interval)
		ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at,
			acquired_at = CASE WHEN leader_leases.holder = EXCLUDED.holder THEN leader_leases.acquired_at ELSE now() END
		WHERE leader_leases.holder = EXCLUDED.holder OR leader_leases.expires_at < now()
		RETURNING holder`, name, holder, leaseTTL(ttl)).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("acquire leadership %s: %w", name, err)
	}
	return got == holder, nil
}

// ReleaseLeadership gives the lease up at shutdown, so another replica
// takes over at once.
func (q *Queries) ReleaseLeadership(ctx context.Context, name, holder string) error {
	_, err := q.db.Exec(ctx, `DELETE FROM leader_leases WHERE name = $1 AND holder = $2`, name, holder)
	if err != nil {
		return fmt.Errorf("release leadership %s: %w", name, err)
	}
	return nil
}

// Leader returns who holds the named lease unexpired (task.ErrNotFound:
// nobody).
func (q *Queries) Leader(ctx context.Context, name string) (string, error) {
	var holder string
	err := q.db.QueryRow(ctx, `SELECT holder FROM leader_leases WHERE name = $1 AND expires_at > now()`, name).Scan(&holder)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("leader of %s: %w", name, task.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("read leader of %s: %w", name, err)
	}
	return holder, nil
}
