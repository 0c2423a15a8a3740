package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/embedded"
	"github.com/moziplus/mozi/repository/gitea/giteatest"
	"github.com/moziplus/mozi/repository/pgtest"
	"github.com/moziplus/mozi/repository/task"
)

func TestMain(m *testing.M) {
	if os.Getenv("TEST_AGENT_MODE") != "" {
		os.Exit(testAgent())
	}
	os.Exit(pgtest.Main(m))
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// servingLineRE finds the listen address in mozi serve's "serving" log line.
var servingLineRE = regexp.MustCompile(`msg="mozi serving" listen=(\S+)`)

// moziBinary builds cmd/mozi once per test run.
func moziBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mozi-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "mozi")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return binPath
}

// agentCopy puts this test binary (the test agent) where the agents' user
// can run it: when the tests run as root, mozi runs agents as an
// unprivileged user, who cannot reach Go's private build directory.
func agentCopy(t *testing.T, dir string) string {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	data, err := os.ReadFile(self)
	require.NoError(t, err)
	path := filepath.Join(dir, "test-agent")
	require.NoError(t, os.WriteFile(path, data, 0o755))
	return path
}

// sharedFile creates an empty file every user may append to (the agents'
// journal).
func sharedFile(t *testing.T, path string) string {
	t.Helper()
	require.NoError(t, os.WriteFile(path, nil, 0o666))
	require.NoError(t, os.Chmod(path, 0o666))
	return path
}

// stateDir makes a data dir that an unprivileged postgres user can reach
// when the tests run as root.
func stateDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mozi-serve-test-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return filepath.Join(dir, "state")
}

type serveProc struct {
	cmd    *exec.Cmd
	addr   string
	stderr *syncBuffer
	done   chan error
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

const testSecret = "s3cret-webhook-for-tests"

// startServe runs `mozi serve` and waits until it logs its listen address.
func startServe(t *testing.T, dataDir string, extraEnv ...string) *serveProc {
	t.Helper()
	cmd := exec.Command(moziBinary(t), "serve", "--data-dir", dataDir)
	cmd.Env = append(os.Environ(), "MOZI_LISTEN=127.0.0.1:0", "MOZI_CONFIG=", "MOZI_DATABASE_URL=",
		"MOZI_WEBHOOK_SECRET="+testSecret)
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.Dir = t.TempDir()
	p := &serveProc{cmd: cmd, stderr: &syncBuffer{}, done: make(chan error, 1)}
	pr, pw := io.Pipe()
	cmd.Stderr = io.MultiWriter(p.stderr, pw)
	require.NoError(t, cmd.Start())
	go func() { p.done <- cmd.Wait(); pw.Close() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := servingLineRE.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case p.addr = <-found:
	case err := <-p.done:
		t.Fatalf("mozi serve exited early (%v): %s", err, p.stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("mozi serve did not start: %s", p.stderr.String())
	}
	return p
}

func (p *serveProc) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + p.addr + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func (p *serveProc) waitExit(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case err := <-p.done:
		return err
	case <-time.After(timeout):
		t.Fatalf("mozi did not exit within %s: %s", timeout, p.stderr.String())
		return nil
	}
}

// postgresRunningFor reports whether any postgres process serves dataDir.
func postgresRunningFor(dataDir string) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if bytes.Contains(cmdline, []byte("postgres")) && bytes.Contains(cmdline, []byte(dataDir)) {
			return true
		}
	}
	return false
}

func waitNoPostgres(t *testing.T, dataDir string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for postgresRunningFor(dataDir) {
		if time.Now().After(deadline) {
			t.Fatalf("a postgres process for %s is still running", dataDir)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestServeEmbeddedLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real mozi processes")
	}
	dir := stateDir(t)
	ctx := context.Background()

	first := startServe(t, dir)
	code, body := first.get(t, "/readyz")
	require.Equal(t, http.StatusOK, code, body)
	code, _ = first.get(t, "/healthz")
	require.Equal(t, http.StatusOK, code)

	// Write a row through the running cluster, as `mozi tasks` would.
	cluster, err := embedded.Attach(dir)
	require.NoError(t, err)
	store, err := repository.Open(ctx, cluster.URL(), repository.Options{})
	require.NoError(t, err)
	tk, err := store.CreateTask(ctx, repository.NewTask{
		Repo: "acme/widget", IssueNumber: 3, ActionType: task.ActionIssueAssigned,
		Agent: "coder2", Priority: task.DefaultPriority,
	})
	require.NoError(t, err)
	store.Close()

	// A second mozi on the same data dir refuses and exits non-zero.
	second := exec.Command(moziBinary(t), "serve", "--data-dir", dir)
	second.Env = append(os.Environ(), "MOZI_LISTEN=127.0.0.1:0", "MOZI_CONFIG=", "MOZI_DATABASE_URL=",
		"MOZI_WEBHOOK_SECRET="+testSecret)
	out, err := second.CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "data dir in use")

	// Ctrl-C: mozi exits cleanly and takes PostgreSQL with it.
	require.NoError(t, first.cmd.Process.Signal(syscall.SIGINT))
	require.NoError(t, first.waitExit(t, 45*time.Second), first.stderr.String())
	waitNoPostgres(t, dir)

	// A second start reuses the cluster and finds the row.
	again := startServe(t, dir)
	code, _ = again.get(t, "/readyz")
	require.Equal(t, http.StatusOK, code)
	cluster, err = embedded.Attach(dir)
	require.NoError(t, err)
	store, err = repository.Open(ctx, cluster.URL(), repository.Options{})
	require.NoError(t, err)
	got, err := store.Task(ctx, tk.ID)
	require.NoError(t, err)
	assert.Equal(t, "coder2", got.Agent)
	store.Close()

	// SIGKILL leaves no chance to clean up: the parent-death signal must
	// still stop PostgreSQL, and the next start must work.
	require.NoError(t, again.cmd.Process.Signal(syscall.SIGKILL))
	_ = again.waitExit(t, 10*time.Second)
	waitNoPostgres(t, dir)
	third := startServe(t, dir)
	code, _ = third.get(t, "/readyz")
	require.Equal(t, http.StatusOK, code)
	require.NoError(t, third.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, third.waitExit(t, 45*time.Second))
	waitNoPostgres(t, dir)
	assert.NotContains(t, third.stderr.String(), "level=ERROR")
}

func TestServeInterruptedDuringFirstStartRecovers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real mozi processes")
	}
	tests := []struct {
		name string
		// reached says when to send SIGINT, as a Ctrl-C would.
		reached func(dir string) bool
	}{
		{"after taking the lock", func(dir string) bool {
			_, err := os.Stat(filepath.Join(dir, "mozi.lock"))
			return err == nil
		}},
		{"during initdb", func(dir string) bool {
			found, _ := filepath.Glob(filepath.Join(dir, "postgres", "data.initdb-*", "*"))
			return len(found) > 0
		}},
		{"during postgres start-up", func(dir string) bool {
			_, err := os.Stat(filepath.Join(dir, "postgres", "data", "postmaster.pid"))
			return err == nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := stateDir(t)
			cmd := exec.Command(moziBinary(t), "serve", "--data-dir", dir)
			cmd.Env = append(os.Environ(), "MOZI_LISTEN=127.0.0.1:0", "MOZI_CONFIG=", "MOZI_DATABASE_URL=",
				"MOZI_WEBHOOK_SECRET="+testSecret)
			stderr := &syncBuffer{}
			cmd.Stderr = stderr
			require.NoError(t, cmd.Start())
			t.Cleanup(func() { _ = cmd.Process.Kill() })
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()

			deadline := time.After(60 * time.Second)
			for !tt.reached(dir) {
				select {
				case err := <-done:
					t.Fatalf("mozi serve exited before the interrupt (%v): %s", err, stderr)
				case <-deadline:
					t.Fatalf("mozi serve never got there: %s", stderr)
				case <-time.After(2 * time.Millisecond): // polling the state dir
				}
			}
			require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
			var err error
			select {
			case err = <-done:
			case <-time.After(60 * time.Second):
				t.Fatalf("mozi serve did not exit after SIGINT: %s", stderr)
			}
			assert.NotContains(t, stderr.String(), "panic:")
			assert.NotContains(t, stderr.String(), "goroutine ")
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				assert.Equal(t, 1, exit.ExitCode(), "an error, not a crash (a panic exits 2): %s", stderr)
			}
			waitNoPostgres(t, dir)

			again := startServe(t, dir)
			code, body := again.get(t, "/readyz")
			require.Equal(t, http.StatusOK, code, body)
			require.NoError(t, again.cmd.Process.Signal(syscall.SIGTERM))
			require.NoError(t, again.waitExit(t, 45*time.Second), again.stderr.String())
			waitNoPostgres(t, dir)
		})
	}
}

func TestServeWithDatabaseURL(t *testing.T) {
	url := pgtest.EmptyURL(t)
	p := startServe(t, stateDir(t), "MOZI_DATABASE_URL="+url)
	code, body := p.get(t, "/readyz")
	require.Equal(t, http.StatusOK, code, body)
	assert.NotContains(t, p.stderr.String(), "embedded PostgreSQL", "no private cluster with a URL")
	assert.Regexp(t, `migrations_applied=[1-9]`, p.stderr.String())

	code, body = p.get(t, "/metrics")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "go_goroutines")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.waitExit(t, 30*time.Second))
}

func TestCLI(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     []string
		wantErr  string
		wantOut  []string
		exitCode int
	}{
		{name: "help lists every command", args: []string{"--help"},
			wantOut: []string{"serve", "migrate", "version", "help"}},
		{name: "version", args: []string{"version"}, wantOut: []string{"mozi dev"}},
		{name: "unknown command", args: []string{"bogus"}, wantErr: `unknown command "bogus"`, exitCode: 2},
		{name: "the benchmarks are mozi-bench's", args: []string{"bench", "intake"}, wantErr: `unknown command "bench"`, exitCode: 2},
		{name: "no command", args: nil, wantErr: "no command given", exitCode: 2},
		{name: "migrate without action", args: []string{"migrate"}, wantErr: "migrate needs exactly one of up, down, status", exitCode: 2},
		{name: "migrate bad action", args: []string{"migrate", "sideways"}, wantErr: `unknown action "sideways"`, exitCode: 2},
		{name: "serve help", args: []string{"serve", "--help"}, wantOut: []string{"-data-dir", "-config"}},
		{name: "templates check", args: []string{"templates", "check"}, wantOut: []string{"ok: built-in en templates"}},
		{name: "templates check broken", args: []string{"templates", "check", "testdata/bad-templates.yaml"},
			wantErr: `testdata/bad-templates.yaml:3: actions.mention.hint: unknown placeholder {agnet}`, exitCode: 1},
		{name: "templates show", args: []string{"templates", "show", "ci_failure", "--locale", "zh"},
			wantOut: []string{"CI 失败", "{target_url}", "原因类型"}},
		{name: "templates show unknown", args: []string{"templates", "show", "deploy"}, wantErr: `unknown action type "deploy"`, exitCode: 2},
		{name: "prompt offline", args: []string{"prompt", "render", "--config", "../../deploy/mozi.example.yaml",
			"--payload", "../../testdata/gitea-1.25/webhooks/021-pull_request_rejected-pull_request_review_rejected-reviewed.json",
			"--agent", "coder2"},
			wantOut: []string{"# Iron rules", "Please add a regression test.", "no Gitea address configured", "[Action Report]\n**Review**: changes requested by reviewer1"}},
		{name: "prompt without issue", args: []string{"prompt", "render"}, wantErr: "needs --repo and --issue", exitCode: 2},
		{name: "bad config", args: []string{"serve", "--config", "testdata/bad.yaml"},
			wantErr: `testdata/bad.yaml:3: unknown field "agnets" (did you mean "agents"?)`, exitCode: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tt.args, func(string) string { return "" }, &stdout, &stderr)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Equal(t, tt.exitCode, exitCode(err))
				return
			}
			require.NoError(t, err)
			for _, w := range tt.wantOut {
				assert.Contains(t, stdout.String(), w)
			}
		})
	}
}

func TestHelpListsEveryCommand(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"help"}, func(string) string { return "" }, &out, io.Discard))
	for _, c := range commands() {
		assert.True(t, strings.Contains(out.String(), "  "+c.name+" "), "help lists %s", c.name)
	}
	assert.NotContains(t, out.String(), "bench", "the benchmarks are mozi-bench's, not mozi's")
}

// Each command's own help starts with its usage line and what it does,
// whatever name its flag set was made with.
func TestEveryCommandsHelpSaysWhatItDoes(t *testing.T) {
	t.Parallel()
	for _, c := range commands() {
		if c.name == "help" || c.name == "version" {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			_ = run(context.Background(), []string{"help", c.name}, func(string) string { return "" }, &out, &errOut)
			assert.True(t, strings.HasPrefix(out.String()+errOut.String(), "Usage: mozi "+c.name), "%q", out.String()+errOut.String())
			assert.Contains(t, out.String()+errOut.String(), c.summary)
		})
	}
}

func TestServeRefusesToStartWithoutASecret(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"serve"}, func(k string) string {
		if k == "MOZI_LISTEN" {
			return "127.0.0.1:0"
		}
		return ""
	}, io.Discard, &stderr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no webhook secret configured")
}

func TestReplayIntoARunningMozi(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real mozi process")
	}
	dir := stateDir(t)
	p := startServe(t, dir, "MOZI_DATABASE_URL="+pgtest.URL(t))
	getenv := func(k string) string {
		switch k {
		case "MOZI_WEBHOOK_SECRET":
			return testSecret
		case "MOZI_LISTEN":
			return p.addr
		}
		return ""
	}
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"replay", "../../testdata/gitea-1.25/webhooks"}, getenv, &out, io.Discard))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	assert.Len(t, lines, 45, "one line per recorded delivery")
	assert.Contains(t, lines[0], "002-issues-issues-opened")
	assert.Contains(t, lines[0], "202")

	// With the recorded id, the second delivery is recognised as a redelivery.
	out.Reset()
	keep := []string{"replay", "--keep-ids", "../../testdata/gitea-1.25/webhooks/009-issues-issue_assign-assigned.json"}
	require.NoError(t, run(context.Background(), keep, getenv, &out, io.Discard))
	require.NoError(t, run(context.Background(), keep, getenv, &out, io.Discard))
	assert.Contains(t, out.String(), " 202 ")
	assert.Contains(t, out.String(), " 200 ")

	// A wrong secret is refused, and replay says so.
	wrong := func(k string) string {
		if k == "MOZI_WEBHOOK_SECRET" {
			return "not-the-secret"
		}
		return getenv(k)
	}
	err := run(context.Background(), []string{"replay", "../../testdata/gitea-1.25/webhooks/009-issues-issue_assign-assigned.json"}, wrong, &out, io.Discard)
	require.Error(t, err)
	assert.Contains(t, out.String(), " 401 ")

	code, body := p.get(t, "/metrics")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `mozi_webhook_deliveries_total{action="opened",event="issues",outcome="accepted"}`)
	assert.Contains(t, body, `outcome="rejected_signature"`)
	assert.Contains(t, body, "mozi_inbox_waiting")
}

// Rolling the schema back under a running mozi breaks it: migrate down
// refuses while a replica leads the ticker, unless forced; status and
// task show print JSON for scripts.
func TestMigrateDownRefusesUnderALiveServer(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.URL(t)
	store, err := repository.Open(context.Background(), dbURL, repository.Options{})
	require.NoError(t, err)
	t.Cleanup(store.Close)
	cfg := filepath.Join(t.TempDir(), "mozi.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("agents:\n  - {login: coder1, preset: shell, script: 'true'}\n"), 0o600))
	mozi := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(context.Background(), append(args, "--config", cfg),
			func(k string) string { return map[string]string{"MOZI_DATABASE_URL": dbURL}[k] }, &out, &errOut)
		return out.String() + errOut.String(), err
	}
	ok, err := store.AcquireLeadership(context.Background(), "ticker", "host/42/abc", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)

	_, err = mozi("migrate", "down")
	require.ErrorContains(t, err, "a mozi serve is running against this database (replica host/42/abc leads its ticker)")
	out, err := mozi("migrate", "status", "--json")
	require.NoError(t, err)
	type state struct {
		Version int64
		Applied bool
	}
	var states []state
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var st state
		require.NoError(t, json.Unmarshal([]byte(line), &st), "one JSON object a line: %s", line)
		states = append(states, st)
	}
	require.NotEmpty(t, states)
	assert.True(t, states[len(states)-1].Applied, "nothing was rolled back")

	out, err = mozi("migrate", "down", "--force")
	require.NoError(t, err, out)
	assert.Contains(t, out, "rolled back 1 migration")
	out, err = mozi("migrate", "up")
	require.NoError(t, err, out)

	tk, err := store.CreateTask(context.Background(), repository.NewTask{Repo: "acme/widget", IssueNumber: 3,
		ActionType: task.ActionMention, Agent: "coder1", Priority: 2})
	require.NoError(t, err)
	out, err = mozi("task", "show", fmt.Sprint(tk.ID), "--json")
	require.NoError(t, err, out)
	var shown map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &shown))
	assert.Equal(t, "mention", shown["action_type"])
	assert.Equal(t, []any{}, shown["attempts"])
}

// A command run before mozi serve ever migrated its database says what to
// do, instead of failing on a missing table.
func TestCommandsOnAnUnmigratedDatabaseSayWhatToDo(t *testing.T) {
	t.Parallel()
	url := pgtest.EmptyURL(t)
	getenv := func(k string) string {
		if k == "MOZI_DATABASE_URL" {
			return url
		}
		return ""
	}
	runMozi := func(args ...string) (string, error) {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), args, getenv, &stdout, &stderr)
		return stdout.String(), err
	}
	for _, cmd := range [][]string{{"tasks"}, {"deliveries"}, {"task", "show", "1"}} {
		_, err := runMozi(cmd...)
		require.Error(t, err, "%v", cmd)
		assert.Contains(t, err.Error(), "no mozi tables yet (0 of", "%v", cmd)
		assert.Contains(t, err.Error(), "mozi migrate up", "%v", cmd)
	}

	_, err := runMozi("migrate", "up")
	require.NoError(t, err)
	out, err := runMozi("tasks")
	require.NoError(t, err)
	assert.Contains(t, out, "STATUS")
}

// mozi task show says why a pending task does not run: the open issues it
// depends on, and how often it was held.
func TestTaskShowSaysWhatAPendingTaskWaitsFor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	store, err := repository.Open(ctx, dbURL, repository.Options{})
	require.NoError(t, err)
	t.Cleanup(store.Close)
	require.NoError(t, store.SaveIssue(ctx, task.Issue{Repo: "acme/widget", Number: 1, State: task.StateOpen, UpdatedAt: time.Now()}))
	tk, err := store.CreateTask(ctx, repository.NewTask{Repo: "acme/widget", IssueNumber: 2, DependsOn: []int{1},
		ActionType: task.ActionIssueAssigned, Agent: "coder1", Priority: 2})
	require.NoError(t, err)

	show := func(args ...string) string {
		var out, errOut bytes.Buffer
		err := run(ctx, append([]string{"task", "show", fmt.Sprint(tk.ID)}, args...),
			func(k string) string { return map[string]string{"MOZI_DATABASE_URL": dbURL}[k] }, &out, &errOut)
		require.NoError(t, err, errOut.String())
		return out.String()
	}
	assert.Contains(t, show(), "waits for:   #1 still open")
	assert.Contains(t, show(), "holds: 0")
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(show("--json")), &doc))
	assert.Equal(t, []any{float64(1)}, doc["waits_for"])

	require.NoError(t, store.SaveIssue(ctx, task.Issue{Repo: "acme/widget", Number: 1, State: task.StateClosed,
		ClosedAt: time.Now(), UpdatedAt: time.Now().Add(time.Second)}))
	assert.NotContains(t, show(), "waits for:")
}

// A mozi whose Gitea token is refused says so at start, in one line,
// instead of looking healthy while every task waits.
func TestServeSaysWhenGiteaRefusesItsToken(t *testing.T) {
	t.Parallel()
	g := giteatest.New()
	t.Cleanup(g.Close)
	p := startServe(t, stateDir(t), "MOZI_DATABASE_URL="+pgtest.URL(t), "MOZI_GITEA_URL="+g.URL, "MOZI_GITEA_TOKEN=revoked-token-123")
	require.Eventually(t, func() bool {
		return strings.Contains(p.stderr.String(), "Gitea refuses mozi's token")
	}, 30*time.Second, 50*time.Millisecond, p.stderr.String())
	assert.NotContains(t, p.stderr.String(), "revoked-token-123", "the token itself is never logged")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.waitExit(t, 30*time.Second))
}

// The commands that look at mozi's work never create or start a database:
// without a running mozi they say where they looked, and leave the data
// directory as it was.
func TestLookingCommandsNeverStartADatabase(t *testing.T) {
	for _, args := range [][]string{{"tasks"}, {"task", "show", "1"}, {"deliveries"}, {"deliveries", "requeue", "x"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			var out, errOut bytes.Buffer
			err := run(context.Background(), append(args, "--data-dir", dir),
				func(k string) string { return map[string]string{"MOZI_CONFIG": ""}[k] }, &out, &errOut)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "no running mozi database in "+dir)
			_, statErr := os.Stat(filepath.Join(dir, "postgres"))
			assert.True(t, os.IsNotExist(statErr), "no cluster was created in %s", dir)
		})
	}
}

// metricValue scrapes a running mozi's /metrics and returns the sum of the
// samples of name whose labels contain every one of labels (0 when none).
func metricValue(t *testing.T, baseURL, name string, labels ...string) float64 {
	t.Helper()
	resp, err := http.Get(baseURL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	sum := 0.0
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		if slices.ContainsFunc(labels, func(l string) bool { return !strings.Contains(line, l) }) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		require.NoError(t, err, line)
		sum += v
	}
	return sum
}

// tickerPasses waits until the ticker ran job n more times: what it was
// going to do by then, it did.
func tickerPasses(t *testing.T, baseURL, job string, n int) {
	t.Helper()
	runs := func() float64 {
		return metricValue(t, baseURL, "mozi_ticker_job_runs_total", `ticker_job="`+job+`"`)
	}
	start := runs()
	deadline := time.Now().Add(30 * time.Second)
	for runs() < start+float64(n) {
		if time.Now().After(deadline) {
			t.Fatalf("the ticker's %s job did not run %d more times in 30 s", job, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
