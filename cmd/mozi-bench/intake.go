package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"runtime"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/webhook"
	"github.com/moziplus/mozi/webhook/recording"
)

const benchSecret = "bench-secret"

func benchIntake(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "intake")
	n := fs.Int("deliveries", 20000, "deliveries per closed-loop run")
	clientList := fs.String("clients", "8,32", "concurrent clients, one closed-loop run each")
	rate := fs.Int("rate", 1000, "deliveries per second of the fixed-rate latency run (0: skip)")
	duration := fs.Duration("duration", 10*time.Second, "length of the fixed-rate run")
	fixture := fs.String("fixture", filepath.Join("testdata", "gitea-1.25", "webhooks", "019-pull_request-pull_request-opened.json"),
		"recorded delivery to send")
	url := fs.String("database-url", "", "PostgreSQL to use (default: a private cluster in a temporary directory)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	writers := fs.Int("writers", 0, "group-commit writers (default: the intake's)")
	baseline := fs.Bool("baseline", true, "also measure single-row INSERTs of the same body")
	if err := parseFlags(e, fs, args); err != nil {
		return err
	}
	if *cpuProfile != "" {
		stopProfile, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stopProfile()
	}
	tuneGC(e)
	clients, err := parseClients(*clientList)
	if err != nil {
		return usagef("%v", err)
	}
	f, err := recording.LoadFile(*fixture)
	if err != nil {
		return fmt.Errorf("load fixture (run from the repository root or pass --fixture): %w", err)
	}
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	bd, err := openBenchDatabase(ctx, *url, logger)
	if err != nil {
		return err
	}
	defer bd.close()

	registry := prometheus.NewRegistry()
	intake, err := webhook.NewIntake(bd.store, webhook.IntakeConfig{Secrets: []string{benchSecret}, Logger: logger,
		Writers: *writers, Metrics: webhook.NewMetrics(registry)})
	if err != nil {
		return err
	}
	bgCtx, stop := context.WithCancel(ctx)
	defer stop()
	intake.Start(bgCtx)
	base, stopServer, err := serveBench(intake.Routes())
	if err != nil {
		return err
	}
	defer stopServer()

	headers := maps.Clone(f.Headers)
	sig := webhook.Sign(f.Body, benchSecret)
	headers["X-Gitea-Signature"], headers["X-Gogs-Signature"] = sig, sig
	headers["X-Hub-Signature-256"] = "sha256=" + sig
	delete(headers, "X-Hub-Signature")
	dial := func() (*rawClient, error) { return dialRawClient(base+webhook.Path, headers, f.Body) }
	run := 0
	fmt.Fprintf(e.stdout, "mozi-bench intake: %d-byte %s delivery, %d per closed-loop run, %d CPUs, %s, durable commits\n\n",
		len(f.Body), f.Name, *n, runtime.NumCPU(), bd.serverVersion(ctx))
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tclients\tper second\tp50 ms\tp99 ms\terrors\t")
	// Warm-up: connections dialled, the pool's backends started, caches
	// filled, so no run measures a cold start.
	warm := func(pool *rawClientPool, clients int) {
		run++
		closedLoop(ctx, clients, 50*clients, func(ctx context.Context, i int) error {
			return pool.post(fmt.Sprintf("warm-%d-%d", run, i))
		})
	}
	if *rate > 0 {
		// First, on a fresh database: a checkpoint triggered by the heavy
		// closed-loop runs would otherwise land in it.
		pool := newRawClientPool(256, dial)
		defer pool.close()
		warm(pool, 16)
		run++
		paced := openLoop(ctx, *rate, *duration, func(ctx context.Context, i int) error {
			return pool.post(fmt.Sprintf("bench-%d-%d", run, i))
		})
		fmt.Fprintf(tw, "intake at %d/s for %s\topen\t%.0f\t%s\t%s\t%d\t\n", *rate, *duration, paced.rate(),
			ms(paced.pct(.5)), ms(paced.pct(.99)), paced.errors)
	}
	for _, c := range clients {
		pool := newRawClientPool(c, dial)
		warm(pool, c)
		run++
		intakeRes := closedLoop(ctx, c, *n, func(ctx context.Context, i int) error {
			return pool.post(fmt.Sprintf("bench-%d-%d", run, i))
		})
		pool.close()
		fmt.Fprintf(tw, "intake (HTTP, signed)\t%d\t%.0f\t%s\t%s\t%d\t\n", c, intakeRes.rate(), ms(intakeRes.pct(.5)), ms(intakeRes.pct(.99)), intakeRes.errors)
		if !*baseline {
			continue
		}
		body := f.Body
		rawInsert := func(ctx context.Context, i int) error {
			_, err := bd.store.InsertDelivery(ctx, repository.Delivery{ID: fmt.Sprintf("raw-%d-%d", run, i),
				Event: "pull_request", EventType: "pull_request", Action: "opened", Repo: "acme/widget",
				Headers: f.Headers, Body: bytes.Clone(body)})
			return err
		}
		run++
		closedLoop(ctx, c, 50*c, rawInsert) // warm-up
		run++
		rawRes := closedLoop(ctx, c, *n, rawInsert)
		fmt.Fprintf(tw, "raw single-row INSERT\t%d\t%.0f\t%s\t%s\t%d\t\n", c, rawRes.rate(), ms(rawRes.pct(.5)), ms(rawRes.pct(.99)), rawRes.errors)
		fmt.Fprintf(tw, "intake / raw\t%d\t%.2fx\t\t\t\t\n", c, intakeRes.rate()/rawRes.rate())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if mean := meanBatch(registry); mean > 0 {
		fmt.Fprintf(e.stdout, "\nmean group-commit batch: %.1f deliveries\n", mean)
	}
	return nil
}

// meanBatch reads the intake's batch-size histogram.
func meanBatch(reg *prometheus.Registry) float64 {
	families, err := reg.Gather()
	if err != nil {
		return 0
	}
	for _, mf := range families {
		if mf.GetName() == "mozi_webhook_commit_batch_size" {
			h := mf.GetMetric()[0].GetHistogram()
			if h.GetSampleCount() > 0 {
				return h.GetSampleSum() / float64(h.GetSampleCount())
			}
		}
	}
	return 0
}
