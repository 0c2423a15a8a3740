package repository

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moziplus/mozi/repository/task"
)

// querier is what pgxpool.Pool and pgx.Tx have in common.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Queries are the store's reads and writes, each written once: Store runs
// them on the connection pool, Tx inside its transaction (both embed
// Queries). What needs a transaction of its own (claims, run bookkeeping,
// the inbox) is Store's; what only makes sense inside one (advisory locks,
// guarded creation) is Tx's.
type Queries struct {
	db querier
	// observe reports applied transitions: at once on the pool, after the
	// commit in a transaction.
	observe func(ev task.Event, to task.Status, n int)
}
