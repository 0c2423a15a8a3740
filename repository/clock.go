package repository

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Clock tells the store what time it is. Production leaves it nil and every
// statement reads PostgreSQL's now(); a test sets one so that leases,
// not_before, backoffs, retention and budgets expire when the test moves
// the clock instead of when the test has slept long enough.
type Clock interface {
	Now() time.Time
}

// sqlNow is how statements spell the database clock. Every time-dependent
// statement in this package says now() (a source test keeps it so).
const sqlNow = "now()"

// clockedDB runs statements with now() read from a Clock. It takes River's
// pattern, coalesce($n::timestamptz, now()) with $n the clock's time, but
// threads the parameter in one place instead of in every statement: the SQL
// stays written once, as production runs it, and no statement (nor one added
// later) can forget it. A zero time from the clock falls back to now().
type clockedDB struct {
	db    querier
	clock Clock
}

func (c clockedDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	sql, args = c.bind(sql, args)
	return c.db.Exec(ctx, sql, args...)
}

func (c clockedDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	sql, args = c.bind(sql, args)
	return c.db.Query(ctx, sql, args...)
}

func (c clockedDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	sql, args = c.bind(sql, args)
	return c.db.QueryRow(ctx, sql, args...)
}

// bind replaces now() with the clock's time as one more positional
// parameter; a statement that does not read the clock is left alone (an
// unused parameter would have no type PostgreSQL could infer).
func (c clockedDB) bind(sql string, args []any) (string, []any) {
	if !strings.Contains(sql, sqlNow) {
		return sql, args
	}
	var now *time.Time
	if t := c.clock.Now(); !t.IsZero() {
		now = &t
	}
	param := "coalesce($" + strconv.Itoa(len(args)+1) + "::timestamptz, " + sqlNow + ")"
	bound := make([]any, len(args), len(args)+1)
	copy(bound, args)
	return strings.ReplaceAll(sql, sqlNow, param), append(bound, now)
}

// withClock wraps db when a clock is set; without one db is returned as is,
// so production runs its statements unchanged.
func withClock(db querier, clock Clock) querier {
	if clock == nil {
		return db
	}
	return clockedDB{db: db, clock: clock}
}

// frozen is a clock stopped at one instant: a transaction's statements all
// see the time it began, as PostgreSQL's now() does.
type frozen time.Time

func (f frozen) Now() time.Time { return time.Time(f) }
