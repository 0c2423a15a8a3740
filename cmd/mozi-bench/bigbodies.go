package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/moziplus/mozi/webhook"
	"github.com/moziplus/mozi/webhook/recording"
)

// benchBigBodies measures what huge issue bodies cost a real `mozi serve`
// process in memory: N "issue assigned" webhooks whose bodies are grown to
// a few megabytes each are POSTed at once, processed into tasks, and their
// agents started (so each prompt is gathered and built); meanwhile the
// process's RSS is sampled from /proc. It reports the peak RSS (VmHWM),
// the RSS when the last agent started and after a settling time, and the
// bytes mozi allocated per byte of body (go_memstats_alloc_bytes_total
// from its /metrics).
func benchBigBodies(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "bigbodies")
	n := fs.Int("webhooks", 20, "webhooks posted at once, one issue each")
	bodyBytes := fs.Int("body-bytes", 9_000_000, "bytes of each issue body")
	settle := fs.Duration("settle", 30*time.Second, "how long to watch the RSS after the last agent started")
	concurrency := fs.Int("concurrency", 20, "agent runs (and so prompts gathered) at once")
	fixture := fs.String("fixture", filepath.Join("testdata", "gitea-1.25", "webhooks", "004-issues-issue_assign-assigned.json"),
		"recorded issue-assigned delivery whose body is grown (its issue number is rewritten per webhook)")
	url := fs.String("database-url", "", "PostgreSQL to use (default: a private cluster in a temporary directory)")
	moziPath := fs.String("mozi", "", "the mozi binary to run (default: a mozi next to this program, else on PATH, else built from the source tree the benchmark runs in)")
	if err := parseFlags(e, fs, args); err != nil {
		return err
	}
	if *n < 1 || *bodyBytes < 1 || *concurrency < 1 {
		return usagef("--webhooks, --body-bytes and --concurrency must be positive")
	}
	var promptDir string
	st, err := startStage(ctx, e, stageOptions{moziPath: *moziPath, fixture: *fixture, databaseURL: *url,
		tempPrefix: "mozi-bench-bigbodies-", concurrency: *concurrency,
		prepare: func(dir string) (string, error) {
			// The agent copies its prompt here, to see what of each body
			// it carried; as root, it runs as an unprivileged user.
			promptDir = filepath.Join(dir, "prompts")
			if err := os.Mkdir(promptDir, 0o777); err != nil {
				return "", err
			}
			if err := os.Chmod(promptDir, 0o777); err != nil {
				return "", err
			}
			return fmt.Sprintf(`cp "$MOZI_PROMPT_FILE" %s/"$MOZI_ISSUE"`, promptDir), nil
		}})
	defer st.close()
	if err != nil {
		return err
	}
	f, bd, bin, srv, j, dbURL := st.fixture, st.bd, st.bin, st.srv, st.journal, st.dbURL
	pid := srv.cmd.Process.Pid
	base := "http://" + srv.addr
	client := &http.Client{Timeout: 2 * time.Minute}

	// Warm-up with an ordinary body: connections, templates, caches.
	const firstIssue = 1_000_000
	warm, err := bigBodyDelivery(f, firstIssue, "## Task\nWarm up.\n")
	if err != nil {
		return err
	}
	if err := postDelivery(ctx, client, base+webhook.Path, warm, "bench-bigbodies-warm"); err != nil {
		return fmt.Errorf("warm-up: %w (mozi serve said: %s)", err, srv.tail())
	}
	if err := j.waitFor(ctx, []int{firstIssue}, time.Minute); err != nil {
		return fmt.Errorf("warm-up: %w (mozi serve said: %s)", err, srv.tail())
	}

	// The deliveries are built before the clock starts: only mozi's
	// memory is measured, not the load generator's.
	bodies := make([]string, *n)
	deliveries := make([]recording.Fixture, *n)
	issues := make([]int, *n)
	wireBytes := 0
	for i := range *n {
		issues[i] = firstIssue + 1 + i
		bodies[i] = bigBody(issues[i], *bodyBytes)
		if deliveries[i], err = bigBodyDelivery(f, issues[i], bodies[i]); err != nil {
			return err
		}
		wireBytes += len(deliveries[i].Body)
	}
	before, err := procStatus(pid)
	if err != nil {
		return err
	}
	allocBefore, err := scrapeCounter(ctx, client, base+"/metrics", "go_memstats_alloc_bytes_total")
	if err != nil {
		return err
	}
	sampler := startRSSSampler(pid, 10*time.Millisecond)
	start := time.Now()
	var (
		wg      sync.WaitGroup
		postErr = make([]error, *n)
	)
	for i := range *n {
		wg.Go(func() {
			postErr[i] = postDelivery(ctx, client, base+webhook.Path, deliveries[i], fmt.Sprintf("bench-bigbodies-%d", issues[i]))
		})
	}
	wg.Wait()
	accepted := time.Since(start)
	if err := errors.Join(postErr...); err != nil {
		sampler.stop()
		return fmt.Errorf("post: %w (mozi serve said: %s)", err, srv.tail())
	}
	if err := waitTasks(ctx, dbURL, issues, 5*time.Minute); err != nil {
		sampler.stop()
		return fmt.Errorf("%w (mozi serve said: %s)", err, srv.tail())
	}
	tasked := time.Since(start)
	if err := j.waitFor(ctx, issues, 5*time.Minute); err != nil {
		sampler.stop()
		return fmt.Errorf("%w (mozi serve said: %s)", err, srv.tail())
	}
	started := time.Since(start)
	done, err := procStatus(pid)
	if err != nil {
		sampler.stop()
		return err
	}
	allocAfter, err := scrapeCounter(ctx, client, base+"/metrics", "go_memstats_alloc_bytes_total")
	if err != nil {
		sampler.stop()
		return err
	}
	select {
	case <-ctx.Done():
		sampler.stop()
		return ctx.Err()
	case <-time.After(*settle):
	}
	later, err := procStatus(pid)
	sampled := sampler.stop()
	if err != nil {
		return err
	}
	heapLater, err := scrapeCounter(ctx, client, base+"/metrics", "go_memstats_heap_inuse_bytes")
	if err != nil {
		return err
	}
	used, err := promptBodyBytes(promptDir, issues, bodies)
	if err != nil {
		return err
	}

	totalBody := *n * *bodyBytes
	fmt.Fprintf(e.stdout, "mozi-bench bigbodies: %d issue-assigned webhooks of %s each (%s on the wire in all) posted at once, %d agent runs at once, %s, %s\n\n",
		*n, mib(int64(*bodyBytes)), mib(int64(wireBytes)), *concurrency, bd.serverVersion(ctx), bin)
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "measure\tvalue\t")
	fmt.Fprintf(tw, "RSS before the webhooks\t%s\t\n", mib(before.rss))
	fmt.Fprintf(tw, "peak RSS (VmHWM)\t%s\t\n", mib(max(later.hwm, sampled)))
	fmt.Fprintf(tw, "RSS when the last agent started\t%s\t\n", mib(done.rss))
	fmt.Fprintf(tw, "RSS %s later\t%s\t\n", *settle, mib(later.rss))
	fmt.Fprintf(tw, "Go heap in use %s later\t%s\t\n", *settle, mib(int64(heapLater)))
	fmt.Fprintf(tw, "allocated per body byte\t%.1f B\t\n", (allocAfter-allocBefore)/float64(totalBody))
	fmt.Fprintf(tw, "body bytes in each prompt (min–max)\t%d–%d\t\n", used[0], used[1])
	fmt.Fprintf(tw, "all webhooks accepted\t%s\t\n", accepted.Round(time.Millisecond))
	fmt.Fprintf(tw, "all tasks created\t%s\t\n", tasked.Round(time.Millisecond))
	fmt.Fprintf(tw, "all agents started\t%s\t\n", started.Round(time.Millisecond))
	return tw.Flush()
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// bigBody is an issue body of n bytes: numbered lines of text, so a prompt
// can be checked for how much of it it carries.
func bigBody(issue, n int) string {
	var b strings.Builder
	b.Grow(n)
	fmt.Fprintf(&b, "## Task\nIssue %d: read the log below.\n\n", issue)
	for line := 0; b.Len() < n; line++ {
		fmt.Fprintf(&b, "%07d the quick brown fox jumps over the lazy dog, and the log goes on and on and on\n", line)
	}
	return b.String()[:n]
}

// bigBodyDelivery is the fixture about a new issue with the given body.
func bigBodyDelivery(f recording.Fixture, issue int, body string) (recording.Fixture, error) {
	return f.Edit(func(p map[string]any) {
		if is, ok := p["issue"].(map[string]any); ok {
			is["number"], is["id"], is["body"] = issue, issue, body
		}
	})
}

func postDelivery(ctx context.Context, client *http.Client, url string, f recording.Fixture, id string) error {
	headers := maps.Clone(recording.WithDelivery(id))
	sig := webhook.Sign(f.Body, benchSecret)
	headers["X-Gitea-Signature"], headers["X-Gogs-Signature"], headers["X-Hub-Signature-256"] = sig, sig, "sha256="+sig
	headers["X-Hub-Signature"] = ""
	req, err := f.Request(url, headers)
	if err != nil {
		return err
	}
	resp, err := client.Do(req.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("post webhook %s: %w", id, err)
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("post webhook %s: status %d: %s", id, resp.StatusCode, bytes.TrimSpace(msg))
	}
	return nil
}

// waitTasks polls until every issue has a task.
func waitTasks(ctx context.Context, url string, issues []int, timeout time.Duration) error {
	return withConn(ctx, url, func(ctx context.Context, conn *pgx.Conn) error {
		deadline := time.Now().Add(timeout)
		for {
			var n int
			if err := conn.QueryRow(ctx, `SELECT count(DISTINCT issue_number) FROM task_state
				WHERE issue_number = ANY($1)`, issues).Scan(&n); err != nil {
				return fmt.Errorf("count tasks: %w", err)
			}
			if n == len(issues) {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%d of %d issues have no task after %s", len(issues)-n, len(issues), timeout)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
}

// promptBodyBytes returns the fewest and the most bytes of its issue's
// body that an agent's prompt carried (the longest run of the body found
// in the prompt from the body's first line).
func promptBodyBytes(dir string, issues []int, bodies []string) ([2]int, error) {
	out := [2]int{-1, 0}
	for i, issue := range issues {
		prompt, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(issue)))
		if err != nil {
			return out, fmt.Errorf("prompt of issue %d: %w", issue, err)
		}
		body := bodies[i]
		at := bytes.Index(prompt, []byte(body[:strings.IndexByte(body, '\n')+1]))
		n := 0
		if at >= 0 {
			rest := prompt[at:]
			for n < len(rest) && n < len(body) && rest[n] == body[n] {
				n++
			}
		}
		if out[0] < 0 || n < out[0] {
			out[0] = n
		}
		out[1] = max(out[1], n)
	}
	return out, nil
}

// status is what /proc/<pid>/status says of a process's memory.
type status struct{ rss, hwm int64 }

func procStatus(pid int) (status, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return status{}, fmt.Errorf("read the RSS of mozi: %w", err)
	}
	defer f.Close()
	var st status
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return status{}, fmt.Errorf("/proc/%d/status: %s: %w", pid, name, err)
		}
		if name == "VmRSS" {
			st.rss = kb << 10
		} else {
			st.hwm = kb << 10
		}
	}
	return st, sc.Err()
}

// rssSampler keeps the largest RSS seen, a check on VmHWM.
type rssSampler struct {
	done chan struct{}
	peak chan int64
}

func startRSSSampler(pid int, every time.Duration) *rssSampler {
	s := &rssSampler{done: make(chan struct{}), peak: make(chan int64, 1)}
	go func() {
		var peak int64
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if st, err := procStatus(pid); err == nil {
				peak = max(peak, st.rss)
			}
			select {
			case <-s.done:
				s.peak <- peak
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *rssSampler) stop() int64 {
	close(s.done)
	return <-s.peak
}

// scrapeCounter reads one unlabelled sample from a Prometheus text page.
func scrapeCounter(ctx context.Context, client *http.Client, url, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if value, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(value), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("scrape %s: %w", url, err)
	}
	return 0, fmt.Errorf("scrape %s: no %s", url, name)
}
