package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/moziplus/mozi/repository/gitea/giteatest"
	"github.com/moziplus/mozi/webhook/recording"
)

// stageOptions say how to set up a real `mozi serve` whose one agent is a
// bash script that journals the start of each run.
type stageOptions struct {
	moziPath, fixture, databaseURL string
	tempPrefix                     string // of the stage's directory
	concurrency                    int    // agent runs at once
	// prepare, if set, readies the stage's directory before mozi starts
	// and returns bash run by the agent before it journals its start.
	prepare func(dir string) (script string, err error)
}

// stage is a running mozi serve with a fake Gitea, a database, and an
// agent whose starts are journalled: what the e2e and bigbodies
// benchmarks measure against.
type stage struct {
	bin     string
	fixture recording.Fixture
	bd      *benchDatabase
	dbURL   string
	dir     string
	journal *startJournal
	srv     *serveProcess
	closers []func()
}

func (s *stage) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

// startStage sets the stage up; close it even when it fails.
func startStage(ctx context.Context, e *env, o stageOptions) (*stage, error) {
	s := &stage{}
	bin, cleanup, err := findMozi(ctx, o.moziPath)
	if err != nil {
		return s, err
	}
	s.bin = bin
	s.closers = append(s.closers, cleanup)
	if s.fixture, err = recording.LoadFile(o.fixture); err != nil {
		return s, fmt.Errorf("load fixture (run from the repository root or pass --fixture): %w", err)
	}
	agent, err := assignee(s.fixture)
	if err != nil {
		return s, err
	}
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if s.bd, err = openBenchDatabase(ctx, o.databaseURL, logger); err != nil {
		return s, err
	}
	s.closers = append(s.closers, s.bd.close)
	s.dbURL = o.databaseURL
	if s.bd.cluster != nil {
		s.dbURL = s.bd.cluster.URL()
	}
	gitea := giteatest.New()
	s.closers = append(s.closers, gitea.Close)
	gitea.AddUser("bench-agent-token", agent)

	if s.dir, err = os.MkdirTemp("", o.tempPrefix); err != nil {
		return s, err
	}
	s.closers = append(s.closers, func() { os.RemoveAll(s.dir) })
	journalPath := filepath.Join(s.dir, "journal")
	// As root, mozi runs the agent as an unprivileged user: it must reach
	// the directory and append to the journal.
	if err := os.Chmod(s.dir, 0o755); err != nil {
		return s, err
	}
	if err := os.WriteFile(journalPath, nil, 0o666); err != nil {
		return s, err
	}
	if err := os.Chmod(journalPath, 0o666); err != nil {
		return s, err
	}
	script := fmt.Sprintf(`echo "$MOZI_ISSUE $EPOCHREALTIME" >> %s`, journalPath)
	if o.prepare != nil {
		before, err := o.prepare(s.dir)
		if err != nil {
			return s, err
		}
		script = before + "; " + script
	}
	cfgPath := filepath.Join(s.dir, "mozi.yaml")
	cfg := fmt.Sprintf(`listen: 127.0.0.1:0
data_dir: %q
gitea: {url: %q, token: %s, rate_per_second: 10000, burst: 10000}
webhook: {secrets: [%s], discussion_grace: 100000h}
dispatcher: {max_concurrency: %d, spawns_per_issue_per_day: 1000000, spawns_per_agent_per_day: 1000000}
agents:
  - login: %s
    command: ["/bin/bash", "-c", %q]
    workspace: none
    sandbox: none
    workdir: %q
    token_env: BENCH_AGENT_TOKEN
    max_concurrency: %d
`, s.dir, gitea.URL, giteatest.Token, benchSecret, o.concurrency, agent, script, filepath.Join(s.dir, "work"), o.concurrency)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return s, err
	}
	if s.srv, err = startServeProcess(ctx, bin, cfgPath, []string{"MOZI_DATABASE_URL=" + s.dbURL, "BENCH_AGENT_TOKEN=bench-agent-token"}); err != nil {
		return s, err
	}
	s.closers = append(s.closers, s.srv.stop)
	s.journal = &startJournal{path: journalPath, started: map[int]time.Time{}}
	return s, nil
}
