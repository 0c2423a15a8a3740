package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/moziplus/mozi/webhook"
	"github.com/moziplus/mozi/webhook/recording"
)

// benchE2E measures what an operator feels: a signed "issue assigned"
// webhook POSTed to a real `mozi serve` process until the assigned agent's
// process runs. The agent is bash writing $EPOCHREALTIME (a builtin: no
// extra process) to a journal, so the latency includes bash's own start.
func benchE2E(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "e2e")
	sequential := fs.Int("sequential", 200, "webhooks sent one at a time, each after the previous agent started")
	rate := fs.Int("rate", 20, "webhooks per second of the fixed-rate run (0: skip)")
	duration := fs.Duration("duration", 10*time.Second, "length of the fixed-rate run")
	fixture := fs.String("fixture", filepath.Join("testdata", "gitea-1.25", "webhooks", "004-issues-issue_assign-assigned.json"),
		"recorded issue-assigned delivery to send (its issue number is rewritten per webhook)")
	url := fs.String("database-url", "", "PostgreSQL to use (default: a private cluster in a temporary directory)")
	moziPath := fs.String("mozi", "", "the mozi binary to run (default: a mozi next to this program, else on PATH, else built from the source tree the benchmark runs in)")
	if err := parseFlags(e, fs, args); err != nil {
		return err
	}
	st, err := startStage(ctx, e, stageOptions{moziPath: *moziPath, fixture: *fixture, databaseURL: *url,
		tempPrefix: "mozi-bench-e2e-", concurrency: 64})
	defer st.close()
	if err != nil {
		return err
	}
	f, bd, bin, srv, j := st.fixture, st.bd, st.bin, st.srv, st.journal
	b := &e2eBench{ctx: ctx, fixture: f, url: "http://" + srv.addr + webhook.Path, journal: j,
		client: &http.Client{Timeout: 10 * time.Second}, nextIssue: 1_000_000}
	fmt.Fprintf(e.stdout, "mozi-bench e2e: webhook POSTed → agent process running (bash), %s, fake Gitea on loopback, %s\n\n",
		bd.serverVersion(ctx), bin)
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\twebhooks\tp50 ms\tp90 ms\tp99 ms\tmax ms\terrors\t")
	if _, err := b.oneAtATime(20); err != nil { // warm-up: connections, caches, plans
		return fmt.Errorf("warm-up: %w (mozi serve said: %s)", err, srv.tail())
	}
	if *sequential > 0 {
		res, err := b.oneAtATime(*sequential)
		if err != nil {
			return fmt.Errorf("%w (mozi serve said: %s)", err, srv.tail())
		}
		fmt.Fprintf(tw, "one at a time\t%d\t%s\t%s\t%s\t%s\t%d\t\n", res.n, ms(res.pct(.5)), ms(res.pct(.9)), ms(res.pct(.99)), ms(res.pct(1)), res.errors)
	}
	if *rate > 0 {
		res, err := b.paced(*rate, *duration)
		if err != nil {
			return fmt.Errorf("%w (mozi serve said: %s)", err, srv.tail())
		}
		fmt.Fprintf(tw, "%d/s for %s\t%d\t%s\t%s\t%s\t%s\t%d\t\n", *rate, *duration, res.n, ms(res.pct(.5)), ms(res.pct(.9)), ms(res.pct(.99)), ms(res.pct(1)), res.errors)
	}
	return tw.Flush()
}

// findMozi names the mozi binary the benchmark runs: path when given, else
// a mozi next to this program, else one on PATH, else one built with go
// build from the source tree the benchmark runs in (removed by cleanup).
func findMozi(ctx context.Context, path string) (bin string, cleanup func(), err error) {
	nothing := func() {}
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return "", nil, fmt.Errorf("--mozi: %w", err)
		}
		return path, nothing, nil
	}
	if self, err := os.Executable(); err == nil {
		next := filepath.Join(filepath.Dir(self), "mozi")
		if st, err := os.Stat(next); err == nil && st.Mode().IsRegular() {
			return next, nothing, nil
		}
	}
	if found, err := exec.LookPath("mozi"); err == nil {
		return found, nothing, nil
	}
	root, ok := sourceTree()
	if !ok {
		return "", nil, errors.New("no mozi to run: pass --mozi PATH, put mozi next to this program or on PATH, or run from mozi's source tree")
	}
	dir, err := os.MkdirTemp("", "mozi-bench-bin-")
	if err != nil {
		return "", nil, err
	}
	bin = filepath.Join(dir, "mozi")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/mozi")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("go build ./cmd/mozi: %w: %s", err, out)
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}

// sourceTree finds mozi's module root at or above the working directory.
func sourceTree() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && modulePathRE.Match(data) {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

var modulePathRE = regexp.MustCompile(`(?m)^module\s+github\.com/moziplus/mozi\s*$`)

// assignee is the agent the recorded delivery assigns.
func assignee(f recording.Fixture) (string, error) {
	var p struct {
		Action string `json:"action"`
		Issue  struct {
			Assignee *struct {
				Login string `json:"login"`
			} `json:"assignee"`
		} `json:"issue"`
	}
	if err := json.Unmarshal(f.Body, &p); err != nil {
		return "", fmt.Errorf("fixture %s: %w", f.Name, err)
	}
	if p.Action != "assigned" || p.Issue.Assignee == nil || p.Issue.Assignee.Login == "" {
		return "", fmt.Errorf("fixture %s is not an issue-assigned delivery", f.Name)
	}
	return p.Issue.Assignee.Login, nil
}

type e2eBench struct {
	ctx       context.Context
	fixture   recording.Fixture
	url       string
	client    *http.Client
	journal   *startJournal
	mu        sync.Mutex
	nextIssue int
}

// send POSTs the fixture as a new issue's assignment and returns the issue
// number and when the POST began.
func (b *e2eBench) send() (int, time.Time, error) {
	b.mu.Lock()
	b.nextIssue++
	issue := b.nextIssue
	b.mu.Unlock()
	f, err := b.fixture.Edit(func(p map[string]any) {
		if is, ok := p["issue"].(map[string]any); ok {
			is["number"] = issue
			is["id"] = issue
			// No Depends/Parent lines: a dependency would make it wait.
			is["body"] = "## Task\nImplement the middleware.\n\n## Acceptance\n- unit tests"
		}
	})
	if err != nil {
		return 0, time.Time{}, err
	}
	headers := maps.Clone(recording.WithDelivery(fmt.Sprintf("bench-e2e-%d", issue)))
	sig := webhook.Sign(f.Body, benchSecret)
	headers["X-Gitea-Signature"], headers["X-Gogs-Signature"], headers["X-Hub-Signature-256"] = sig, sig, "sha256="+sig
	headers["X-Hub-Signature"] = ""
	req, err := f.Request(b.url, headers)
	if err != nil {
		return 0, time.Time{}, err
	}
	sent := time.Now()
	resp, err := b.client.Do(req.WithContext(b.ctx))
	if err != nil {
		return issue, sent, fmt.Errorf("post webhook: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return issue, sent, fmt.Errorf("post webhook: status %d", resp.StatusCode)
	}
	return issue, sent, nil
}

func (b *e2eBench) oneAtATime(n int) (latencies, error) {
	sent := map[int]time.Time{}
	errs := 0
	start := time.Now()
	for range n {
		issue, at, err := b.send()
		if err != nil {
			errs++
			continue
		}
		sent[issue] = at
		if err := b.journal.waitFor(b.ctx, []int{issue}, 10*time.Second); err != nil {
			return latencies{}, err
		}
	}
	return b.collect(sent, errs, time.Since(start))
}

func (b *e2eBench) paced(rate int, d time.Duration) (latencies, error) {
	var (
		mu   sync.Mutex
		sent = map[int]time.Time{}
		errs int
	)
	start := time.Now()
	// openLoop's latencies are the POSTs'; what counts here is the journal.
	openLoop(b.ctx, rate, d, func(ctx context.Context, _ int) error {
		issue, at, err := b.send()
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs++
			return err
		}
		sent[issue] = at
		return nil
	})
	if err := b.journal.waitFor(b.ctx, slices.Collect(maps.Keys(sent)), 30*time.Second); err != nil {
		return latencies{}, err
	}
	return b.collect(sent, errs, time.Since(start))
}

func (b *e2eBench) collect(sent map[int]time.Time, errs int, elapsed time.Duration) (latencies, error) {
	all := make([]time.Duration, 0, len(sent))
	for issue, at := range sent {
		started, ok := b.journal.get(issue)
		if !ok {
			return latencies{}, fmt.Errorf("no agent started for issue %d", issue)
		}
		all = append(all, started.Sub(at))
	}
	slices.Sort(all)
	return latencies{n: len(all), elapsed: elapsed, sorted: all, errors: errs}, nil
}

// journal follows the agents' "issue epoch-seconds" lines.
type startJournal struct {
	path    string
	mu      sync.Mutex
	offset  int64
	partial []byte
	started map[int]time.Time
}

func (j *startJournal) get(issue int) (time.Time, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	t, ok := j.started[issue]
	return t, ok
}

// waitFor reads the journal until every issue's agent has started.
func (j *startJournal) waitFor(ctx context.Context, issues []int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if err := j.read(); err != nil {
			return err
		}
		missing := 0
		for _, issue := range issues {
			if _, ok := j.get(issue); !ok {
				missing++
			}
		}
		if missing == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d agents did not start within %s", missing, len(issues), timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

func (j *startJournal) read() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	f, err := os.Open(j.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(j.offset, io.SeekStart); err != nil {
		return err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	j.offset += int64(len(data))
	data = append(j.partial, data...)
	last := bytes.LastIndexByte(data, '\n')
	j.partial = slices.Clone(data[last+1:])
	for line := range strings.Lines(string(data[:last+1])) {
		issueText, epoch, ok := strings.Cut(strings.TrimSpace(line), " ")
		issue, err1 := strconv.Atoi(issueText)
		secs, err2 := strconv.ParseFloat(epoch, 64)
		if !ok || err1 != nil || err2 != nil {
			return fmt.Errorf("journal line %q: want \"issue epoch\"", line)
		}
		if _, seen := j.started[issue]; !seen {
			j.started[issue] = time.UnixMicro(int64(secs * 1e6))
		}
	}
	return nil
}

// serveProcess is a `mozi serve` child process.
type serveProcess struct {
	cmd    *exec.Cmd
	addr   string
	done   chan struct{}
	mu     sync.Mutex
	output []string
}

// servingLineRE finds the listen address in mozi serve's "serving" log line.
var servingLineRE = regexp.MustCompile(`msg="mozi serving" listen=(\S+)`)

// startServeProcess runs `bin serve --config cfg` and waits until it logs
// its listen address (the configuration must log text at info, the default).
func startServeProcess(ctx context.Context, bin, cfg string, env []string) (*serveProcess, error) {
	cmd := exec.Command(bin, "serve", "--config", cfg)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start mozi serve: %w", err)
	}
	p := &serveProcess{cmd: cmd, done: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			if m := servingLineRE.FindStringSubmatch(line); m != nil {
				found <- m[1]
				continue
			}
			p.mu.Lock()
			p.output = append(p.output, line)
			if len(p.output) > 20 {
				p.output = p.output[1:]
			}
			p.mu.Unlock()
		}
	}()
	go func() { _ = cmd.Wait(); close(p.done) }()
	select {
	case p.addr = <-found:
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("mozi serve exited: %s", p.tail())
	case <-time.After(60 * time.Second):
		p.stop()
		return nil, fmt.Errorf("mozi serve did not start within 60s: %s", p.tail())
	case <-ctx.Done():
		p.stop()
		return nil, ctx.Err()
	}
}

func (p *serveProcess) tail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.output, "\n")
}

func (p *serveProcess) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
