package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/embedded"
	"github.com/moziplus/mozi/repository/history"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/webhook"
)

// Databases of the history benchmark.
const (
	emptyDB  = "mozi_history_empty"
	filledDB = "mozi_history_filled"
)

// historyRetention is the retention the benchmark prunes with: the fill
// spans a year and keeps all of it, so each prune finds at the edge what
// an hourly prune finds.
const historyRetention = 365 * 24 * time.Hour

// benchHistory measures what must not grow with history: the ticker's
// periodic queries, the /metrics scrape and the list commands, on a
// database holding only the live state of a busy moment ("empty") and on
// one holding the same live state after a year of history ("filled"),
// alternating the two in every round.
func benchHistory(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "history")
	scale := fs.Float64("scale", 1, "size of the year: 1 is 1M finished tasks, 1.2M attempts, 1M processed deliveries, 200k issues, 68k pull requests")
	runs := fs.Int("runs", 15, "timed runs of each query on each database")
	url := fs.String("database-url", "", "PostgreSQL server to create the two databases on (default: a private cluster in a temporary directory)")
	keep := fs.String("keep", "", "keep the private cluster in this directory, and reuse its databases when they hold a fill of the same scale (new migrations are applied and timed)")
	only := fs.String("only", "", "measure only the queries whose name contains this text")
	if err := parseFlags(e, fs, args); err != nil {
		return err
	}
	if *scale <= 0 || *runs < 1 {
		return usagef("--scale must be positive and --runs at least 1")
	}
	if *keep != "" && *url != "" {
		return usagef("--keep is for the private cluster: not with --database-url")
	}
	tuneGC(e)
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	adminURL := *url
	if adminURL == "" {
		dir := *keep
		if dir == "" {
			tmp, err := os.MkdirTemp("", "mozi-bench-history-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			dir = tmp
		} else if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			return err
		}
		cluster, err := embedded.Start(ctx, embedded.Options{StateDir: dir, Logger: logger,
			Settings: map[string]string{"max_connections": "100", "wal_init_zero": "off"}})
		if err != nil {
			return err
		}
		defer func() { _ = cluster.Stop() }()
		adminURL = cluster.URL()
	}

	size := history.Year(*scale)
	fmt.Fprintf(e.stdout, "mozi-bench history: scale %g (%d finished tasks, %d processed deliveries, %d issues, %d pull requests), %d live tasks on both\n\n",
		*scale, size.Tasks, size.Deliveries, size.Issues, size.PullRequests, history.LiveTasks)
	marker := fmt.Sprintf("mozi-bench history v%d scale=%g", history.Version, *scale)
	empty, err := prepareHistoryDB(ctx, e, adminURL, emptyDB, size, false, *keep != "", marker)
	if err != nil {
		return err
	}
	defer empty.Close()
	filled, err := prepareHistoryDB(ctx, e, adminURL, filledDB, size, true, *keep != "", marker)
	if err != nil {
		return err
	}
	defer filled.Close()
	v, err := empty.ServerVersion(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "\n%s; %d runs of each query on each database, alternating; median ms\n\n", v, *runs)

	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "query\tcaller\tempty ms\tfilled ms\tfilled/empty\twithin target\t")
	over := 0
	for _, p := range historyProbes(size, logger) {
		if *only != "" && !strings.Contains(p.name, *only) {
			continue
		}
		te, tf, err := alternate(ctx, empty, filled, p.run, *runs)
		if err != nil {
			// A query that fails (a scrape over its timeout) is a result too.
			if ctx.Err() != nil {
				return ctx.Err()
			}
			msg, _, _ := strings.Cut(err.Error(), "\n")
			fmt.Fprintf(tw, "%s\t%s\t\t\t\tNO: %s\t\n", p.name, p.caller, msg)
			over++
			continue
		}
		// The target: within 2× of the empty database, or under 5 ms.
		ok := "yes"
		if tf > max(2*te, 5*time.Millisecond) {
			ok, over = "NO", over+1
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.2fx\t%s\t\n", p.name, p.caller, ms(te), ms(tf), float64(tf)/float64(te), ok)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "\ntarget: filled within 2x of empty or under 5 ms; %d over\n", over)
	return nil
}

// prepareHistoryDB makes (or, with reuse, finds) one of the two databases:
// migrated, the year filled in when fill, the live state, fresh statistics.
func prepareHistoryDB(ctx context.Context, e *env, adminURL, name string, size history.Size, fill, reuse bool, marker string) (*repository.Store, error) {
	dbURL, err := history.DatabaseURL(adminURL, name)
	if err != nil {
		return nil, err
	}
	if reuse {
		note, err := history.Marker(ctx, adminURL, name)
		if err != nil {
			return nil, err
		}
		if note == marker {
			store, err := repository.Open(ctx, dbURL, repository.Options{MaxConns: 4})
			if err != nil {
				return nil, err
			}
			start := time.Now()
			n, err := migrateUp(ctx, store)
			if err != nil {
				store.Close()
				return nil, err
			}
			fmt.Fprintf(e.stdout, "%s: reused; %d new migrations applied in %s\n", name, n, time.Since(start).Round(time.Millisecond))
			if n > 0 {
				if err := withConn(ctx, dbURL, history.Analyze); err != nil {
					store.Close()
					return nil, err
				}
			}
			return store, nil
		}
	}
	if dbURL, err = history.CreateDatabase(ctx, adminURL, name); err != nil {
		return nil, err
	}
	store, err := repository.Open(ctx, dbURL, repository.Options{MaxConns: 4})
	if err != nil {
		return nil, err
	}
	if _, err := migrateUp(ctx, store); err != nil {
		store.Close()
		return nil, err
	}
	start := time.Now()
	// The counts of the year's finished tasks, which the ticker folds
	// every few seconds in a live database.
	fold := func() error { _, err := store.FoldTaskCounts(ctx); return err }
	err = withConn(ctx, dbURL, func(ctx context.Context, conn *pgx.Conn) error {
		now := time.Now()
		var steps []history.Step
		if fill {
			s, err := history.Fill(ctx, conn, size, now)
			if err != nil {
				return err
			}
			steps = append(steps, s...)
		}
		s, err := history.Live(ctx, conn, size, now)
		if err != nil {
			return err
		}
		steps = append(steps, s...)
		if fill {
			for _, s := range steps {
				fmt.Fprintf(e.stdout, "  %-20s %9d rows  %s\n", s.Name, s.Rows, s.Elapsed.Round(time.Millisecond))
			}
		}
		if err := fold(); err != nil {
			return err
		}
		if err := history.Analyze(ctx, conn); err != nil {
			return err
		}
		bytes, err := history.DatabaseSize(ctx, conn)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "%s: filled in %s, %d MiB\n", name, time.Since(start).Round(time.Second), bytes>>20)
		return history.SetMarker(ctx, conn, marker)
	})
	if err != nil {
		store.Close()
		return nil, err
	}
	return store, nil
}

func migrateUp(ctx context.Context, store *repository.Store) (int, error) {
	m, err := store.Migrator()
	if err != nil {
		return 0, err
	}
	defer m.Close()
	return m.Up(ctx)
}

func withConn(ctx context.Context, url string, fn func(ctx context.Context, conn *pgx.Conn) error) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return fn(ctx, conn)
}

// alternate times run on both stores, runs times each after a warm-up,
// alternating which goes first, and returns both medians.
func alternate(ctx context.Context, empty, filled *repository.Store, run func(ctx context.Context, s *repository.Store) error, runs int) (time.Duration, time.Duration, error) {
	for range 2 {
		for _, s := range []*repository.Store{empty, filled} {
			if err := run(ctx, s); err != nil {
				return 0, 0, err
			}
		}
	}
	var te, tf []time.Duration
	timed := func(s *repository.Store, into *[]time.Duration) error {
		start := time.Now()
		err := run(ctx, s)
		*into = append(*into, time.Since(start))
		return err
	}
	for i := range runs {
		first, second := timed(empty, &te), func() error { return timed(filled, &tf) }
		if i%2 == 1 {
			first, second = timed(filled, &tf), func() error { return timed(empty, &te) }
		}
		if first != nil {
			return 0, 0, first
		}
		if err := second(); err != nil {
			return 0, 0, err
		}
	}
	return medianOf(te), medianOf(tf), nil
}

func medianOf(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// probe is one measured call, made the way its caller makes it.
type probe struct {
	name, caller string
	run          func(ctx context.Context, s *repository.Store) error
}

func historyProbes(size history.Size, logger *slog.Logger) []probe {
	var (
		liveBase = history.LiveBase(size)
		agents   = history.Agents
		repo     = history.Repos[0]
	)
	scrapes := map[*repository.Store]http.Handler{}
	scrape := func(ctx context.Context, s *repository.Store) error {
		h, ok := scrapes[s]
		if !ok {
			// What mozi serve registers on its /metrics registry.
			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
				webhook.NewInboxCollector(s, logger), repository.NewTaskCollector(s, agents, logger))
			repository.CountTransitions(s, reg)
			webhook.NewMetrics(reg)
			h = promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
			scrapes[s] = h
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, "/metrics", nil))
		if rec.Code != http.StatusOK {
			return fmt.Errorf("/metrics answered %d: %s", rec.Code, rec.Body.String())
		}
		return nil
	}
	// A live task, looked up once per database, for mozi task show.
	liveIDs := map[*repository.Store]int64{}
	liveTask := func(ctx context.Context, s *repository.Store) (int64, error) {
		if id, ok := liveIDs[s]; ok {
			return id, nil
		}
		ts, err := s.ListTasks(ctx, repository.TaskFilter{Status: task.StatusPending, Repo: repo, Limit: 1})
		if err != nil || len(ts) == 0 {
			return 0, errors.Join(err, errors.New("no pending task"))
		}
		liveIDs[s] = ts[0].ID
		return ts[0].ID, nil
	}
	show := func(ctx context.Context, s *repository.Store, id int64) error {
		t, err := s.Task(ctx, id)
		if err != nil {
			return err
		}
		if _, err := s.Attempts(ctx, id); err != nil {
			return err
		}
		if t.Status == task.StatusPending {
			_, err = s.OpenDependencies(ctx, id)
		}
		return err
	}
	list := func(f repository.TaskFilter) func(ctx context.Context, s *repository.Store) error {
		return func(ctx context.Context, s *repository.Store) error {
			f.Limit = cmp.Or(f.Limit, 50)
			_, err := s.ListTasks(ctx, f)
			return err
		}
	}
	return []probe{
		{"RescueExpired", "ticker rescue, 10 s", func(ctx context.Context, s *repository.Store) error {
			_, err := s.RescueExpired(ctx, time.Minute)
			return err
		}},
		{"UnconsumedMentions", "ticker mentions, 10 s", func(ctx context.Context, s *repository.Store) error {
			_, err := s.UnconsumedMentions(ctx, time.Minute, 100)
			return err
		}},
		{"DueRounds", "ticker rounds, 10 s", func(ctx context.Context, s *repository.Store) error {
			due, err := s.DueRounds(ctx)
			if err == nil && len(due) != 2 {
				err = fmt.Errorf("%d rounds due, want the live state's 2", len(due))
			}
			return err
		}},
		{"DueDiscussions", "ticker discussions, 10 s", func(ctx context.Context, s *repository.Store) error {
			due, err := s.DueDiscussions(ctx, 50)
			if err == nil && len(due) != 2 {
				err = fmt.Errorf("%d discussions due, want the live state's 2", len(due))
			}
			return err
		}},
		{"FailOrphans", "ticker orphans, 10 s", func(ctx context.Context, s *repository.Store) error {
			_, err := s.FailOrphans(ctx, agents)
			return err
		}},
		{"StalledTasks", "ticker watchdog, 10 s", func(ctx context.Context, s *repository.Store) error {
			_, err := s.StalledTasks(ctx, 30*time.Minute, 50)
			return err
		}},
		{"ClaimOutbox", "notice poster, 5 s", func(ctx context.Context, s *repository.Store) error {
			_, err := s.ClaimOutbox(ctx, 20, time.Minute)
			return err
		}},
		{"CatchUpMarks", "ticker catch_up, 5 min", func(ctx context.Context, s *repository.Store) error {
			_, err := s.CatchUpMarks(ctx, history.Repos[:3])
			return err
		}},
		{"StaleLiveIssues", "ticker reconcile, 5 min", func(ctx context.Context, s *repository.Store) error {
			_, err := s.StaleLiveIssues(ctx, 10*time.Minute, 50)
			return err
		}},
		{"OpenPullRequestsInReview", "ticker statuses, 2 min", func(ctx context.Context, s *repository.Store) error {
			_, err := s.OpenPullRequestsInReview(ctx, 50)
			return err
		}},
		{"Prune", "ticker prune, 1 h", func(ctx context.Context, s *repository.Store) error {
			_, err := s.Prune(ctx, time.Now().Add(-historyRetention))
			return err
		}},
		{"TaskCounts", "/metrics", func(ctx context.Context, s *repository.Store) error {
			_, err := s.TaskCounts(ctx)
			return err
		}},
		{"StalledOldest", "/metrics", func(ctx context.Context, s *repository.Store) error {
			_, err := s.StalledOldest(ctx)
			return err
		}},
		{"RunningByAgent", "/metrics", func(ctx context.Context, s *repository.Store) error {
			_, err := s.RunningByAgent(ctx)
			return err
		}},
		{"OpenBreakers", "/metrics", func(ctx context.Context, s *repository.Store) error {
			_, err := s.OpenBreakers(ctx)
			return err
		}},
		{"InboxStats", "/metrics", func(ctx context.Context, s *repository.Store) error {
			_, err := s.InboxStats(ctx)
			return err
		}},
		{"GET /metrics (whole scrape)", "Prometheus, 15 s", scrape},
		{"mozi tasks", "operator", list(repository.TaskFilter{})},
		{"mozi tasks --status pending", "operator", list(repository.TaskFilter{Status: task.StatusPending})},
		{"mozi tasks --status failed", "operator", list(repository.TaskFilter{Status: task.StatusFailed})},
		{"mozi tasks --repo", "operator", list(repository.TaskFilter{Repo: repo})},
		{"mozi tasks --agent", "operator", list(repository.TaskFilter{Agent: "reviewer2"})},
		{"mozi tasks --agent --status review", "operator", list(repository.TaskFilter{Agent: "coder2", Status: task.StatusReview})},
		{"mozi prompt (tasks of an issue)", "operator", list(repository.TaskFilter{Repo: repo, IssueNumber: liveBase + 20})},
		{"mozi task show (live)", "operator", func(ctx context.Context, s *repository.Store) error {
			id, err := liveTask(ctx, s)
			if err != nil {
				return err
			}
			return show(ctx, s, id)
		}},
		{"mozi task show (the first task)", "operator", func(ctx context.Context, s *repository.Store) error {
			return show(ctx, s, 1)
		}},
		{"mozi deliveries", "operator", func(ctx context.Context, s *repository.Store) error {
			_, err := s.ListDeliveries(ctx, repository.DeliveryFilter{Limit: 50})
			return err
		}},
		{"mozi deliveries --failed", "operator", func(ctx context.Context, s *repository.Store) error {
			_, err := s.ListDeliveries(ctx, repository.DeliveryFilter{Failed: true, Limit: 50})
			return err
		}},
		{"SpawnCounts (for reference: claim guardrail)", "dispatcher, per run", func(ctx context.Context, s *repository.Store) error {
			_, _, err := s.SpawnCounts(ctx, repo, liveBase+20, "coder1", time.Now().Add(-24*time.Hour))
			return err
		}},
	}
}
