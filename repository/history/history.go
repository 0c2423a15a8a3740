// Package history fills a mozi database with what a year of use leaves
// behind — finished tasks and their attempts, processed deliveries and
// their effect keys, closed issues and merged pull requests, consumed
// mentions, commit statuses — next to the live state of a busy moment
// (300 live tasks, open issues and pull requests, waiting deliveries).
// `mozi-bench history` measures the periodic queries, the metrics scrape
// and the list commands on a database with the live state alone and on
// one with the year behind it.
//
// Everything is generated in the database with generate_series: no row
// crosses the network, and the same Size gives the same rows (values come
// from the row numbers, not from random()), with timestamps relative to
// the Now given.
//
// Invariants of what it writes:
//   - History is at rest: every task of it is finished, every delivery
//     processed, every mention consumed, every round reviewed and every
//     discussion sent; the ticker's queries find in it nothing to do, so
//     they answer the same on both databases.
//   - Live numbers (issues and pull requests of live tasks) are above
//     every history number of their repository, and live rows are
//     written after the history: live tasks have the highest ids, as in a
//     database that grew.
//   - History spans the year before Now, oldest first, evenly: a prune
//     with a year's retention finds at its edge what an hourly prune finds.
package history

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Size is how much history Fill writes.
type Size struct {
	Issues       int // issues (a tenth are parents of four sub-issues each)
	PullRequests int
	Tasks        int // finished tasks; each has one attempt, every fifth two
	Deliveries   int // processed deliveries, with an effect key for most
	Mentions     int // consumed mentions
	Statuses     int // failing commit statuses kept
	Comments     int // agent comments of the last day (the prune keeps one day)
}

// Year is the issue's measurement scaled by scale: 1M finished tasks,
// 1.2M attempts, 1M processed deliveries, 200k issues, 68k pull requests.
func Year(scale float64) Size {
	n := func(v float64) int { return max(1, int(math.Round(v*scale))) }
	return Size{Issues: n(200_000), PullRequests: n(68_000), Tasks: n(1_000_000), Deliveries: n(1_000_000),
		Mentions: n(100_000), Statuses: n(30_000), Comments: n(3_000)}
}

// Repos are the repositories both databases have work in.
var Repos = []string{"acme/api", "acme/web", "acme/mobile", "acme/infra", "acme/docs", "acme/billing",
	"acme/search", "acme/auth", "acme/data", "acme/ml", "acme/cli", "acme/sdk"}

// Agents are the agents tasks belong to; Lead gets the round reviews.
var Agents = []string{"coder1", "coder2", "coder3", "coder4", "coder5", "reviewer1", "reviewer2", "lead"}

// Lead is the agent of round reviews.
const Lead = "lead"

// Version changes whenever what Fill or Live write changes: a database
// filled by another version is not reused.
const Version = 6

// LiveTasks is how many live tasks Live writes.
const LiveTasks = 300

// LiveBase is the first live issue number of each repository for a
// history of size s: above every number the history gives out.
func LiveBase(s Size) int {
	return (s.Issues+s.PullRequests)/len(Repos) + 1000
}

// Fill writes the history of size s, ending at now, into the migrated
// database conn is connected to, and returns how long each table took.
func Fill(ctx context.Context, conn *pgx.Conn, s Size, now time.Time) ([]Step, error) {
	if err := setParams(ctx, conn, s, now); err != nil {
		return nil, err
	}
	return run(ctx, conn, fillSteps)
}

// Live writes the live state at now (300 live tasks and what goes with
// them) for a database whose history, if any, has size s.
func Live(ctx context.Context, conn *pgx.Conn, s Size, now time.Time) ([]Step, error) {
	if err := setParams(ctx, conn, s, now); err != nil {
		return nil, err
	}
	return run(ctx, conn, liveSteps)
}

// Step is one statement of a fill: what it wrote, how many rows and how long it took.
type Step struct {
	Name    string
	Rows    int64
	Elapsed time.Duration
}

type step struct{ name, sql string }

func run(ctx context.Context, conn *pgx.Conn, steps []step) ([]Step, error) {
	var out []Step
	for _, s := range steps {
		start := time.Now()
		tag, err := conn.Exec(ctx, s.sql)
		if err != nil {
			return out, fmt.Errorf("fill %s: %w", s.name, err)
		}
		out = append(out, Step{Name: s.name, Rows: tag.RowsAffected(), Elapsed: time.Since(start)})
	}
	return out, nil
}

// setParams puts the fill's parameters in a temporary table the
// statements read (fill_cfg), so that they need no placeholders.
func setParams(ctx context.Context, conn *pgx.Conn, s Size, now time.Time) error {
	// JIT compiling these long statements costs more than it saves; with
	// room for their hash tables in memory, joins keep the order rows are
	// generated in (oldest first), so no sort spills gigabytes to disk.
	_, err := conn.Exec(ctx, `SET jit = off; SET work_mem = '256MB'; DROP TABLE IF EXISTS pg_temp.fill_cfg;
		CREATE TEMP TABLE fill_cfg (now timestamptz, n_issues int, n_pulls int, n_tasks int, n_deliveries int,
			n_mentions int, n_statuses int, n_comments int, live_base int, repos text[], agents text[], humans text[])`)
	if err != nil {
		return fmt.Errorf("fill parameters: %w", err)
	}
	_, err = conn.Exec(ctx, `INSERT INTO fill_cfg VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		now, s.Issues, s.PullRequests, s.Tasks, s.Deliveries, s.Mentions, s.Statuses, s.Comments, LiveBase(s),
		Repos, Agents, []string{"alice", "bob", "carol", "dave", "erin", "frank"})
	if err != nil {
		return fmt.Errorf("fill parameters: %w", err)
	}
	return nil
}

// Analyze vacuums and analyses every table, as autovacuum would have done
// over the year, so that both databases are planned from fresh statistics.
func Analyze(ctx context.Context, conn *pgx.Conn) error {
	if _, err := conn.Exec(ctx, `VACUUM (ANALYZE)`); err != nil {
		return fmt.Errorf("vacuum analyze: %w", err)
	}
	return nil
}

// TableRows counts the rows of mozi's tables that the fill writes.
func TableRows(ctx context.Context, conn *pgx.Conn) (map[string]int64, error) {
	out := map[string]int64{}
	for _, t := range []string{"task_state", "task_attempts", "webhook_deliveries", "webhook_effects",
		"issues", "pull_requests", "mention_queue", "commit_statuses", "agent_comments"} {
		var n int64
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+t).Scan(&n); err != nil {
			return nil, fmt.Errorf("count %s: %w", t, err)
		}
		out[t] = n
	}
	return out, nil
}

// DatabaseSize is the size of the database conn is connected to, in bytes.
func DatabaseSize(ctx context.Context, conn *pgx.Conn) (int64, error) {
	var n int64
	if err := conn.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&n); err != nil {
		return 0, fmt.Errorf("database size: %w", err)
	}
	return n, nil
}

// CreateDatabase (re)creates an empty database named name on the server
// adminURL points at and returns its URL.
func CreateDatabase(ctx context.Context, adminURL, name string) (string, error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", fmt.Errorf("connect to the server: %w", err)
	}
	defer conn.Close(ctx)
	id := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, `DROP DATABASE IF EXISTS `+id+` WITH (FORCE)`); err != nil {
		return "", fmt.Errorf("drop database %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+id); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return DatabaseURL(adminURL, name)
}

// Marker reads the note SetMarker left on database name ("" when none, or
// when the database does not exist).
func Marker(ctx context.Context, adminURL, name string) (string, error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", fmt.Errorf("connect to the server: %w", err)
	}
	defer conn.Close(ctx)
	var note *string
	err = conn.QueryRow(ctx, `SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1`, name).Scan(&note)
	if err == pgx.ErrNoRows || note == nil {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the note on database %s: %w", name, err)
	}
	return *note, nil
}

// SetMarker leaves a note on the database conn is connected to (what was
// filled into it), for a later run to find.
func SetMarker(ctx context.Context, conn *pgx.Conn, note string) error {
	var name string
	if err := conn.QueryRow(ctx, `SELECT current_database()`).Scan(&name); err != nil {
		return fmt.Errorf("name of the database: %w", err)
	}
	_, err := conn.Exec(ctx, `COMMENT ON DATABASE `+pgx.Identifier{name}.Sanitize()+` IS `+quote(note))
	if err != nil {
		return fmt.Errorf("note on database %s: %w", name, err)
	}
	return nil
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// DatabaseURL is adminURL with its database replaced by name.
func DatabaseURL(adminURL, name string) (string, error) {
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", fmt.Errorf("database URL: not a URL")
	}
	u.Path = "/" + name
	return u.String(), nil
}
