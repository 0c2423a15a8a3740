package repository

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClockBindsNowAsOneMoreParameter(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name     string
		clock    Clock
		sql      string
		args     []any
		wantSQL  string
		wantArgs []any
	}{
		{
			name: "no clock read: untouched", clock: frozen(at),
			sql: `SELECT id FROM task_state WHERE id = $1`, args: []any{7},
			wantSQL: `SELECT id FROM task_state WHERE id = $1`, wantArgs: []any{7},
		},
		{
			name: "every now() is the same parameter, after the statement's own", clock: frozen(at),
			sql:      `UPDATE t SET a = now(), b = now() + $2::interval WHERE id = $1`,
			args:     []any{7, "1 minute"},
			wantSQL:  `UPDATE t SET a = coalesce($3::timestamptz, now()), b = coalesce($3::timestamptz, now()) + $2::interval WHERE id = $1`,
			wantArgs: []any{7, "1 minute", &at},
		},
		{
			name: "a statement without parameters gets $1", clock: frozen(at),
			sql: `SELECT now()`, wantSQL: `SELECT coalesce($1::timestamptz, now())`, wantArgs: []any{&at},
		},
		{
			name: "a zero time leaves the database's clock", clock: frozen(time.Time{}),
			sql: `SELECT now()`, wantSQL: `SELECT coalesce($1::timestamptz, now())`, wantArgs: []any{(*time.Time)(nil)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]any(nil), tt.args...)
			sql, got := clockedDB{clock: tt.clock}.bind(tt.sql, args)
			assert.Equal(t, tt.wantSQL, sql)
			assert.Equal(t, tt.wantArgs, got)
			assert.Equal(t, tt.args, args, "the caller's arguments are not modified")
		})
	}
}

func TestNoClockLeavesTheConnectionAlone(t *testing.T) {
	var db querier = clockedDB{} // any querier: only its identity matters
	assert.Equal(t, db, withClock(db, nil), "production statements run unchanged")
	assert.IsType(t, clockedDB{}, withClock(nil, frozen(time.Now())))
}

// The clock replaces now() only: a statement reading the time any other way
// would not move with a test's clock.
func TestStatementsReadTheClockOnlyThroughNow(t *testing.T) {
	other := regexp.MustCompile(`(?i:\b(current_timestamp|clock_timestamp|statement_timestamp|transaction_timestamp|localtimestamp|current_date|current_time|timeofday)\b)|\bNOW\(\)|\bnow\s+\(`)
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for i, line := range strings.Split(string(src), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "//") {
				continue
			}
			assert.False(t, other.MatchString(line), "%s:%d reads the database clock past the test clock: %s", f, i+1, line)
		}
	}
}
