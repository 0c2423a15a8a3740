package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/moziplus/mozi/dispatcher"
	"github.com/moziplus/mozi/prompts"
	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/gitea"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/spawner"
	"github.com/moziplus/mozi/spawner/backend"
	"github.com/moziplus/mozi/spawner/backend/local"
	"github.com/moziplus/mozi/templates"
)

// noopHandler completes each claimed task at once: what is measured is the
// claim path and one transition per task.
type noopHandler struct {
	store *repository.Store
	done  atomic.Int64
	all   chan struct{}
	total int64
}

func (h *noopHandler) Handle(ctx context.Context, t task.Task) {
	if _, err := h.store.Apply(context.WithoutCancel(ctx), t.ID, task.EventComplete, repository.Change{}); err != nil {
		panic(err)
	}
	if h.done.Add(1) == h.total {
		close(h.all)
	}
}

// countingHandler wraps the spawner and signals when every task ran.
type countingHandler struct {
	next  dispatcher.Handler
	done  atomic.Int64
	all   chan struct{}
	total int64
}

func (h *countingHandler) Handle(ctx context.Context, t task.Task) {
	h.next.Handle(ctx, t)
	if h.done.Add(1) == h.total {
		close(h.all)
	}
}

func benchDispatch(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "dispatch")
	n := fs.Int("tasks", 20000, "tasks in the no-op run")
	nProc := fs.Int("processes", 1000, "tasks in the /bin/true run")
	concurrency := fs.Int("concurrency", 64, "dispatcher concurrency")
	batch := fs.Int("batch", 256, "claim batch of the claim-only run")
	claimers := fs.Int("claimers", 4, "concurrent claimers of the claim-only run")
	url := fs.String("database-url", "", "PostgreSQL to use (default: a private cluster in a temporary directory)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile to this file")
	if err := parseFlags(e, fs, args); err != nil {
		return err
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	tuneGC(e)
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	bd, err := openBenchDatabase(ctx, *url, logger)
	if err != nil {
		return err
	}
	defer bd.close()
	fmt.Fprintf(e.stdout, "mozi-bench dispatch: %s, concurrency %d\n\n", bd.serverVersion(ctx), *concurrency)
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\ttasks\tseconds\ttasks per second\t")

	// The agent cap covers the workers and the claimed tasks queued ahead
	// of them: a lower one would measure the cap, not the claim path.
	agents := []dispatcher.Agent{{Login: "bench", MaxConcurrency: 2 * *concurrency, Enabled: true}}
	dispCfg := dispatcher.Config{Owner: "bench", MaxConcurrency: *concurrency, Agents: agents,
		PollInterval: time.Second, SpawnsPerIssuePerDay: 1 << 30, SpawnsPerAgentPerDay: 1 << 30, Logger: logger}

	// 1. Claims alone, in batches, by several claimers at once.
	if err := createBenchTasks(ctx, bd.store, *n, 0, "claimer"); err != nil {
		return err
	}
	elapsed, err := claimOnly(ctx, bd.store, *n, *batch, *claimers)
	if err != nil {
		return err
	}
	fmt.Fprintf(tw, "claim only, batches of %d, %d claimers\t%d\t%.2f\t%.0f\t\n", *batch, *claimers, *n, elapsed.Seconds(), float64(*n)/elapsed.Seconds())

	// 2. Claim and complete with a no-op handler.
	if err := createBenchTasks(ctx, bd.store, *n, *n, "bench"); err != nil {
		return err
	}
	noop := &noopHandler{store: bd.store, all: make(chan struct{}), total: int64(*n)}
	elapsed = runDispatcher(ctx, dispatcher.New(dispCfg, bd.store, nil, noop), noop.all)
	fmt.Fprintf(tw, "claim + complete, no-op runner\t%d\t%.2f\t%.0f\t\n", *n, elapsed.Seconds(), float64(*n)/elapsed.Seconds())

	// 3. The whole spawn path with /bin/true as the agent.
	if *nProc > 0 {
		set, err := templates.Load("en", "")
		if err != nil {
			return err
		}
		stateDir, err := os.MkdirTemp("", "mozi-bench-runs-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(stateDir)
		reader := gitea.NewIssueReader(bd.store, nil)
		assembler := prompts.NewAssembler(prompts.AssemblerConfig{Set: set, Reader: reader, Attempts: bd.store,
			Agents: map[string]prompts.Agent{"bench": {Login: "bench", Workdir: stateDir}}, GiteaURL: "http://gitea.invalid"})
		sp := spawner.New(spawner.Config{Owner: "bench", StateDir: stateDir, Logger: logger,
			Agents: map[string]spawner.Agent{"bench": {Agent: backend.Agent{Login: "bench", Argv: []string{"/bin/true"},
				Workdir: filepath.Join(stateDir, "work")}, Timeout: time.Minute}}},
			bd.store, local.New(local.Config{StateDir: stateDir, Logger: logger}), assembler)
		if err := createBenchTasks(ctx, bd.store, *nProc, 2**n, "bench"); err != nil {
			return err
		}
		counting := &countingHandler{next: sp, all: make(chan struct{}), total: int64(*nProc)}
		elapsed := runDispatcher(ctx, dispatcher.New(dispCfg, bd.store, reader, counting), counting.all)
		fmt.Fprintf(tw, "full spawn path, /bin/true agent\t%d\t%.2f\t%.0f\t\n", *nProc, elapsed.Seconds(), float64(*nProc)/elapsed.Seconds())
	}
	return tw.Flush()
}

// createBenchTasks inserts notification tasks (done when their agent
// exits) on distinct issues, outside the measurement.
func createBenchTasks(ctx context.Context, store *repository.Store, n, offset int, agent string) error {
	var (
		wg      sync.WaitGroup
		next    atomic.Int64
		errOnce sync.Once
		first   error
	)
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1))
				if i > n {
					return
				}
				_, err := store.CreateTask(ctx, repository.NewTask{Repo: "bench/repo", IssueNumber: offset + i,
					ActionType: task.ActionIssueClosed, Agent: agent, Priority: i % 4,
					Meta: task.Meta{Title: fmt.Sprintf("Benchmark issue %d", i)}, IssueBody: "Nothing to do."})
				if err != nil {
					errOnce.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

func claimOnly(ctx context.Context, store *repository.Store, n, batch, claimers int) (time.Duration, error) {
	var (
		claimed atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	agents := []repository.AgentLimit{{Login: "claimer", MaxConcurrency: 1 << 30}}
	start := time.Now()
	for c := range claimers {
		wg.Go(func() {
			for claimed.Load() < int64(n) {
				tasks, err := store.ClaimTasks(ctx, repository.ClaimRequest{Owner: fmt.Sprint("claimer-", c), Limit: batch,
					LeaseTTL: time.Hour, Agents: agents})
				if err != nil {
					errOnce.Do(func() { first = err })
					return
				}
				if len(tasks) == 0 {
					return
				}
				claimed.Add(int64(len(tasks)))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if first == nil && claimed.Load() != int64(n) {
		first = fmt.Errorf("claimed %d of %d tasks", claimed.Load(), n)
	}
	return elapsed, first
}

func runDispatcher(ctx context.Context, d *dispatcher.Dispatcher, all <-chan struct{}) time.Duration {
	start := time.Now()
	claimCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { d.Run(claimCtx, ctx); close(done) }()
	select {
	case <-all:
	case <-ctx.Done():
	}
	elapsed := time.Since(start)
	stop()
	<-done
	d.Wait()
	return elapsed
}
