package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/embedded"
)

func runBench(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprintln(e.stdout, benchUsage)
			return errHelp
		}
		return usagef("bench needs a benchmark name\n%s", benchUsage)
	}
	switch args[0] {
	case "intake":
		return benchIntake(ctx, e, args[1:])
	case "dispatch":
		return benchDispatch(ctx, e, args[1:])
	case "e2e":
		return benchE2E(ctx, e, args[1:])
	case "history":
		return benchHistory(ctx, e, args[1:])
	case "bigbodies":
		return benchBigBodies(ctx, e, args[1:])
	}
	return usagef("unknown benchmark %q\n%s", args[0], benchUsage)
}

// benchCommands are the benchmarks' own usage lines.
var benchCommands = []command{
	{name: "intake", args: "[--deliveries N] [--clients N,M] [--rate R] [--duration D] [--database-url URL]",
		summary: "signed deliveries accepted durably per second through the real HTTP handler, next to single-row INSERTs, and ack latency at a fixed rate"},
	{name: "dispatch", args: "[--tasks N] [--processes N] [--concurrency N] [--database-url URL]",
		summary: "tasks claimed and completed per second with a no-op runner, and through the whole spawn path with /bin/true as the agent"},
	{name: "e2e", args: "[--sequential N] [--rate R] [--duration D] [--database-url URL] [--mozi PATH]",
		summary: "latency from a webhook received to its agent's process started, through a real mozi serve"},
	{name: "history", args: "[--scale S] [--runs N] [--only TEXT] [--keep DIR | --database-url URL]",
		summary: "the ticker's periodic queries, the /metrics scrape and the list commands on a database with a year of history, against one with the same live state alone"},
	{name: "bigbodies", args: "[--webhooks N] [--body-bytes B] [--settle D] [--concurrency N] [--database-url URL] [--mozi PATH]",
		summary: "the memory of a real mozi serve (peak RSS, RSS after, bytes allocated per body byte) when issue webhooks with huge bodies arrive at once and their prompts are built"},
}

const benchUsage = `Usage: mozi-bench intake|dispatch|e2e|history|bigbodies [flags]

  intake    signed deliveries accepted durably per second through the real
            HTTP handler, next to single-row INSERTs of the same body into the
            same PostgreSQL, and ack latency at a fixed rate
  dispatch  tasks claimed and completed per second with a no-op runner, and
            through the whole spawn path with /bin/true as the agent
  e2e       latency from a webhook received to its agent's process started,
            through a real mozi serve (--mozi PATH, else a mozi next to
            mozi-bench, else on PATH, else built from the source tree)
  history   the ticker's periodic queries, the /metrics scrape and the list
            commands on a database filled with a year of history (1M
            finished tasks, 1.2M attempts, 1M processed deliveries, 200k
            issues, 68k pull requests) and on one with the same live state
            alone, alternating, as medians and their ratio
  bigbodies the memory of a real mozi serve (peak RSS, RSS when the last
            agent started and after --settle, bytes allocated per body byte)
            when twenty issue webhooks with 9 MB bodies arrive at once, are
            made tasks and their prompts built

Each benchmark starts its own PostgreSQL (default settings, durable commits)
in a temporary directory, or uses --database-url (history creates two
databases there).`

// benchDatabase is a fresh, migrated database for one benchmark run.
type benchDatabase struct {
	store   *repository.Store
	cluster *embedded.Cluster
	dir     string
}

func openBenchDatabase(ctx context.Context, url string, logger *slog.Logger) (*benchDatabase, error) {
	bd := &benchDatabase{}
	if url == "" {
		dir, err := os.MkdirTemp("", "mozi-bench-")
		if err != nil {
			return nil, err
		}
		bd.dir = dir
		if err := os.Chmod(dir, 0o755); err != nil {
			return nil, err
		}
		bd.cluster, err = embedded.Start(ctx, embedded.Options{StateDir: dir, Logger: logger,
			Settings: map[string]string{"max_connections": "200", "wal_init_zero": "off"}})
		if err != nil {
			bd.close()
			return nil, err
		}
		url = bd.cluster.URL()
	}
	store, err := repository.Open(ctx, url, repository.Options{MaxConns: 64})
	if err != nil {
		bd.close()
		return nil, err
	}
	bd.store = store
	m, err := store.Migrator()
	if err != nil {
		bd.close()
		return nil, err
	}
	defer m.Close()
	if _, err := m.Up(ctx); err != nil {
		bd.close()
		return nil, err
	}
	return bd, nil
}

func (bd *benchDatabase) serverVersion(ctx context.Context) string {
	v, err := bd.store.ServerVersion(ctx)
	if err != nil {
		return "PostgreSQL (version unknown)"
	}
	return v
}

func (bd *benchDatabase) close() {
	if bd.store != nil {
		bd.store.Close()
	}
	if bd.cluster != nil {
		_ = bd.cluster.Stop()
	}
	if bd.dir != "" {
		_ = os.RemoveAll(bd.dir)
	}
}

// latencies summarises a run.
type latencies struct {
	n       int
	elapsed time.Duration
	sorted  []time.Duration
	errors  int
}

func (l latencies) rate() float64 { return float64(l.n) / l.elapsed.Seconds() }

func (l latencies) pct(p float64) time.Duration {
	if len(l.sorted) == 0 {
		return 0
	}
	i := int(float64(len(l.sorted)-1) * p)
	return l.sorted[i]
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 2, 64)
}

// closedLoop runs clients that each do op back to back until n ops are done.
func closedLoop(ctx context.Context, clients, n int, op func(ctx context.Context, i int) error) latencies {
	var (
		next  atomic.Int64
		mu    sync.Mutex
		all   = make([]time.Duration, 0, n)
		errs  atomic.Int64
		wg    sync.WaitGroup
		start = time.Now()
	)
	for range clients {
		wg.Go(func() {
			local := make([]time.Duration, 0, n/clients+1)
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					break
				}
				t0 := time.Now()
				if err := op(ctx, i); err != nil {
					errs.Add(1)
					continue
				}
				local = append(local, time.Since(t0))
			}
			mu.Lock()
			all = append(all, local...)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(all)
	return latencies{n: len(all), elapsed: time.Since(start), sorted: all, errors: int(errs.Load())}
}

// openLoop starts op at a fixed rate for d, whatever the latency (no
// coordinated omission: latency counts from the scheduled start).
func openLoop(ctx context.Context, rate int, d time.Duration, op func(ctx context.Context, i int) error) latencies {
	total := int(float64(rate) * d.Seconds())
	interval := time.Second / time.Duration(rate)
	var (
		mu   sync.Mutex
		all  = make([]time.Duration, 0, total)
		errs atomic.Int64
		wg   sync.WaitGroup
	)
	start := time.Now()
	for i := range total {
		at := start.Add(time.Duration(i) * interval)
		if wait := time.Until(at); wait > 0 {
			time.Sleep(wait)
		}
		wg.Go(func() {
			if err := op(ctx, i); err != nil {
				errs.Add(1)
				return
			}
			lat := time.Since(at)
			mu.Lock()
			all = append(all, lat)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(all)
	return latencies{n: len(all), elapsed: time.Since(start), sorted: all, errors: int(errs.Load())}
}

// serveBench runs handler on a loopback port until the returned stop.
func serveBench(handler http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close() }, nil
}

func parseClients(s string) ([]int, error) {
	var out []int
	if s == "" || s == "0" {
		return nil, nil
	}
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 1 {
			return nil, errors.New("--clients wants a comma-separated list of positive numbers")
		}
		out = append(out, n)
	}
	return out, nil
}

func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
