package repository

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// QueryRowForTest runs a statement on the store's own connections.
func (s *Store) QueryRowForTest(ctx context.Context, sql string, args ...any) pgx.Row {
	return s.pool.QueryRow(ctx, sql, args...)
}

// NowForTest reads the time the queries' statements see.
func (q *Queries) NowForTest(ctx context.Context) (time.Time, error) {
	var now time.Time
	err := q.db.QueryRow(ctx, `SELECT now()`).Scan(&now)
	return now, err
}
