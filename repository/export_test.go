package repository

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// QueryRowForTest runs a statement on the store's own connections.
func (s *Store) QueryRowForTest(ctx context.Context, sql string, args ...any) pgx.Row {
	return s.pool.QueryRow(ctx, sql, args...)
}
