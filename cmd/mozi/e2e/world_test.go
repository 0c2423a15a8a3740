//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/embedded"
	"github.com/moziplus/mozi/repository/gitea/realgitea"
	"github.com/moziplus/mozi/repository/pgtest"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/spawner/agenttest"
	"github.com/moziplus/mozi/spawner/progress"
)

// agentSpec declares one agent of a world: a Gitea user of its own and
// the e2e agent program (this test binary) as its command, or a real agent
// CLI whose model (worldOptions.model) has it run that program.
type agentSpec struct {
	name string // short name; its login is <world>-<name>
	role string // coder, reviewer or lead: what the agent program does
	// preset, when set, makes the agent that preset's real CLI
	// (claude-code, codex, opencode) talking to worldOptions.model.
	preset string
	// env are extra variables of the agent program (E2E_* behaviours).
	env         map[string]string
	concurrency int
	lead, infra bool
	timeout     time.Duration
}

// worldOptions configure a world.
type worldOptions struct {
	agents []agentSpec
	// gitea is the Gitea to use (default: the test binary's shared one).
	gitea *realgitea.Server
	// giteaURL is the URL mozi calls Gitea at (default gitea's: a fault
	// proxy goes here).
	giteaURL string
	// tune edits mozi's configuration before it is written.
	tune func(cfg map[string]any)
	// noStart leaves mozi stopped (the test starts it).
	noStart bool
	// files are committed to the repository's main branch.
	files map[string]string
	// ownDatabase gives the world a PostgreSQL cluster of its own, which
	// the test may stop and start (a database outage).
	ownDatabase bool
	// model is the fake model endpoint of the agents with a preset.
	model *agenttest.Server
	// path is mozi's PATH, and so its agents' (default the test's): where
	// the agents' CLIs are found.
	path string
}

// world is one repository in Gitea with its people and agents, and the mozi
// serving it.
type world struct {
	t     *testing.T
	g     *realgitea.Server
	id    string
	repo  string
	dir   string // the world's files; the mozi data dir is dir/state
	human realgitea.User
	bot   realgitea.User
	// agents by short name.
	agents map[string]*agentUser
	secret string
	dbURL  string
	store  *repository.Store
	cfg    string // mozi's configuration file
	env    []string
	mozi   *moziProc
	api    realgitea.Client
	// relay receives Gitea's deliveries and forwards them to mozi.
	relay  *relay
	hooked bool
	// db is the world's own cluster (worldOptions.ownDatabase).
	db *embedded.Cluster
}

// agentUser is an agent's Gitea account and its home on this machine.
type agentUser struct {
	realgitea.User
	spec agentSpec
	home string
	// modelEnv points the agent's CLI at the world's model (agents with
	// a preset).
	modelEnv map[string]string
}

var worldSeq atomic.Int64

// newWorld creates the Gitea side (users, a repository, its webhook) and
// starts mozi on it.
func newWorld(t *testing.T, opts worldOptions) *world {
	t.Helper()
	if moziBuildErr != nil {
		realgitea.Need(t, "build mozi", moziBuildErr)
	}
	g := opts.gitea
	if g == nil {
		g = realgitea.Shared(t)
	}
	ctx := context.Background()
	w := &world{t: t, g: g, id: fmt.Sprintf("w%d%s", worldSeq.Add(1), randSuffix()), agents: map[string]*agentUser{},
		secret: "e2e-secret-" + randSuffix(), api: g.Client, relay: newRelay(t)}
	dir, err := os.MkdirTemp("", "mozi-e2e-"+w.id+"-")
	require.NoError(t, err)
	// Agents run as another user and must reach their homes below.
	require.NoError(t, os.Chmod(dir, 0o755))
	w.dir = dir
	t.Cleanup(func() {
		if !t.Failed() && os.Getenv("E2E_KEEP") == "" {
			_ = os.RemoveAll(dir)
		} else {
			t.Logf("world files kept in %s", dir)
		}
	})

	w.human, err = g.CreateUser(ctx, w.id+"-human", false)
	require.NoError(t, err)
	w.bot, err = g.CreateUser(ctx, w.id+"-mozi", false)
	require.NoError(t, err)
	w.repo, err = g.CreateRepo(ctx, "", w.id+"-widget", withDefaults(opts.files))
	require.NoError(t, err)
	require.NoError(t, g.AddCollaborator(ctx, w.repo, w.human.Login, "admin"))
	require.NoError(t, g.AddCollaborator(ctx, w.repo, w.bot.Login, "admin"))
	self, err := os.Executable()
	require.NoError(t, err)
	for _, spec := range opts.agents {
		u, err := g.CreateUser(ctx, w.id+"-"+spec.name, false)
		require.NoError(t, err)
		require.NoError(t, g.AddCollaborator(ctx, w.repo, u.Login, "write"))
		a := &agentUser{User: u, spec: spec, home: filepath.Join(dir, "homes", u.Login)}
		require.NoError(t, os.MkdirAll(filepath.Join(a.home, "bin"), 0o755))
		require.NoError(t, os.Chmod(a.home, 0o755))
		linkOrCopy(t, self, a.bin())
		if spec.preset != "" {
			require.NotNil(t, opts.model, "agent %s runs the %s CLI: the world needs a model", spec.name, spec.preset)
			a.modelEnv, err = opts.model.Env(spec.preset, a.home)
			require.NoError(t, err)
			delete(a.modelEnv, "HOME") // the agent's home: mozi sets it
			giveToAgentsUser(t, a.home)
		}
		w.agents[spec.name] = a
	}

	if opts.ownDatabase {
		w.startDatabase()
		w.dbURL = w.db.URL()
		t.Cleanup(func() {
			if w.db != nil {
				_ = w.db.Stop()
			}
		})
	} else {
		w.dbURL = pgtest.URL(t)
	}
	w.store, err = repository.Open(ctx, w.dbURL, repository.Options{})
	require.NoError(t, err)
	t.Cleanup(w.store.Close)

	giteaURL := opts.giteaURL
	if giteaURL == "" {
		giteaURL = g.URL
	}
	w.writeConfig(giteaURL, opts.tune)
	path := opts.path
	if path == "" {
		path = os.Getenv("PATH")
	}
	w.env = []string{"PATH=" + path, "HOME=" + os.Getenv("HOME"), "USER=" + os.Getenv("USER"),
		"MOZI_GITEA_TOKEN=" + w.bot.Token, "MOZI_WEBHOOK_SECRET=" + w.secret, "GORACE=halt_on_error=0"}
	for _, a := range w.agents {
		w.env = append(w.env, a.tokenEnv()+"="+a.Token)
	}
	if !opts.noStart {
		w.start()
	}
	return w
}

// startDatabase starts the world's own cluster (again).
func (w *world) startDatabase() {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := embedded.Start(ctx, embedded.Options{StateDir: filepath.Join(w.dir, "pg"), Database: "mozi", NoSync: true,
		Settings: map[string]string{"fsync": "off", "synchronous_commit": "off"}})
	require.NoError(w.t, err)
	w.db = c
}

// stopDatabase stops the world's own cluster: mozi loses its database.
func (w *world) stopDatabase() {
	w.t.Helper()
	require.NoError(w.t, w.db.Stop())
}

func withDefaults(files map[string]string) map[string]string {
	out := map[string]string{"main.go": "package main\n\nfunc main() {}\n"}
	for k, v := range files {
		out[k] = v
	}
	return out
}

func (a *agentUser) bin() string { return filepath.Join(a.home, "bin", "mozi-e2e-agent") }

// giveToAgentsUser hands what was written in an agent's home (a CLI's
// configuration) to the user mozi runs agents as when it is root (nobody,
// sandbox.user's default), as an operator would: the CLIs write beside
// their configuration. mozi itself gives the agent only its home's top
// directory. bin/ stays root's: the program there is a link to this test
// binary.
func giveToAgentsUser(t *testing.T, home string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	u, err := user.Lookup("nobody")
	require.NoError(t, err)
	uid, err := strconv.Atoi(u.Uid)
	require.NoError(t, err)
	gid, err := strconv.Atoi(u.Gid)
	require.NoError(t, err)
	err = filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p == filepath.Join(home, "bin") {
			return filepath.SkipDir
		}
		return os.Lchown(p, uid, gid)
	})
	require.NoError(t, err)
}

func (a *agentUser) tokenEnv() string {
	return strings.ToUpper(strings.NewReplacer("-", "_").Replace(a.Login)) + "_TOKEN"
}

// linkOrCopy puts the test binary where an agent runs it from.
func linkOrCopy(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.Link(src, dst); err == nil {
		return
	}
	data, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(dst, data, 0o755))
}

// login is the Gitea login of an agent by short name.
func (w *world) login(name string) string {
	a, ok := w.agents[name]
	require.True(w.t, ok, "no agent %q", name)
	return a.Login
}

// writeConfig writes mozi's configuration: quick timings, every agent
// sandboxed in its own worktree.
func (w *world) writeConfig(giteaURL string, tune func(map[string]any)) {
	var agents []any
	for _, a := range w.agents {
		env := map[string]string{agentRoleEnv: a.spec.role}
		for k, v := range a.spec.env {
			env[k] = strings.NewReplacer("{world}", w.id).Replace(v)
		}
		timeout := a.spec.timeout
		if timeout == 0 {
			timeout = 2 * time.Minute
		}
		agent := map[string]any{
			"login": a.Login, "command": []string{a.bin()}, "home": a.home, "token_env": a.tokenEnv(),
			"max_concurrency": max(a.spec.concurrency, 1), "lead": a.spec.lead, "infra": a.spec.infra,
			"timeout": timeout.String(), "env": env,
		}
		if a.spec.preset != "" {
			delete(agent, "command")
			agent["preset"] = a.spec.preset
			maps.Copy(env, a.modelEnv)
		}
		agents = append(agents, agent)
	}
	cfg := map[string]any{
		"listen":   "127.0.0.1:0",
		"database": map[string]any{"url": w.dbURL},
		"gitea":    map[string]any{"url": giteaURL, "bot_user": w.bot.Login, "repos": []string{w.repo}, "timeout": "5s"},
		"webhook":  map[string]any{"discussion_grace": "1000h", "max_mention_hops": 4},
		"dispatcher": map[string]any{"lease_ttl": "10s", "poll_interval": "500ms", "max_retries": 2,
			"max_concurrency": 8},
		"spawner": map[string]any{"retry_base": "500ms", "retry_max": "2s", "kill_grace": "2s", "shutdown_grace": "10s"},
		"ticker": map[string]any{"sweep_every": "500ms", "leader_ttl": "5s", "reconcile_every": "3s",
			"status_poll_every": "1000h", "watchdog_quiet": "1000h"},
		"workspace": map[string]any{"keep_finished": "1s", "sweep_every": "1s"},
		"log":       map[string]any{"level": "debug"},
		"agents":    agents,
	}
	if tune != nil {
		tune(cfg)
	}
	data, err := yaml.Marshal(cfg)
	require.NoError(w.t, err)
	w.cfg = filepath.Join(w.dir, "mozi.yaml")
	require.NoError(w.t, os.WriteFile(w.cfg, data, 0o600))
}

// section returns a section of a configuration map, for tune funcs.
func section(cfg map[string]any, name string) map[string]any {
	s, ok := cfg[name].(map[string]any)
	if !ok {
		s = map[string]any{}
		cfg[name] = s
	}
	return s
}

// moziProc is a running mozi serve.
type moziProc struct {
	cmd  *exec.Cmd
	addr string
	log  *logBuffer
	done chan struct{}
	err  error
}

var servingRE = regexp.MustCompile(`msg="mozi serving" listen=(\S+)`)

// start runs mozi serve and installs the repository's webhook to it
// with mozi webhook install.
func (w *world) start() {
	w.t.Helper()
	require.Nil(w.t, w.mozi, "mozi already running")
	logFile, err := os.OpenFile(filepath.Join(w.dir, "mozi.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	require.NoError(w.t, err)
	cmd := exec.Command(moziBin, "serve", "--config", w.cfg, "--data-dir", filepath.Join(w.dir, "state"))
	cmd.Env = w.env
	cmd.Dir = w.dir
	p := &moziProc{cmd: cmd, log: &logBuffer{file: logFile}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(w.t, cmd.Start())
	go func() { p.err = cmd.Wait(); logFile.Close(); close(p.done) }()
	w.mozi = p
	w.t.Cleanup(func() { w.stopMozi(syscall.SIGTERM) })

	deadline := time.After(90 * time.Second)
	for p.addr == "" {
		select {
		case <-p.done:
			w.t.Fatalf("mozi serve exited at start (%v):\n%s", p.err, p.log.tail(40))
		case <-deadline:
			w.t.Fatalf("mozi serve did not start within 90 s:\n%s", p.log.tail(40))
		case <-time.After(50 * time.Millisecond):
		}
		if m := servingRE.FindStringSubmatch(p.log.String()); m != nil {
			p.addr = m[1]
		}
	}
	w.relay.setTarget("http://" + p.addr + "/webhooks/gitea")
	if !w.hooked {
		w.installHook()
		w.hooked = true
	}
}

// installHook points the repository's webhook at the relay to mozi, the
// way an operator does.
func (w *world) installHook() {
	w.t.Helper()
	// The world's Gitea timeout is short (outages are noticed fast); a
	// Gitea busy with every parallel test's writes can take longer to
	// create a hook, and an operator would simply run the command again.
	var out string
	var err error
	for try := 1; try <= 3; try++ {
		if out, err = w.moziCommand("webhook", "install", "--config", w.cfg, "--url", w.relay.URL()); err == nil ||
			!strings.Contains(out, "deadline exceeded") {
			break
		}
		w.t.Logf("webhook install, try %d: %s", try, strings.TrimSpace(out))
	}
	require.NoError(w.t, err, out)
}

// moziCommand runs another mozi command with the world's environment.
func (w *world) moziCommand(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, moziBin, args...)
	cmd.Env = w.env
	cmd.Dir = w.dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// stopMozi signals mozi and waits for it to exit; a data race it reported
// fails the test.
func (w *world) stopMozi(sig syscall.Signal) {
	p := w.mozi
	if p == nil {
		return
	}
	w.mozi = nil
	w.relay.setTarget("")
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		w.t.Errorf("mozi did not stop within 60 s of %v", sig)
	}
	if strings.Contains(p.log.String(), "WARNING: DATA RACE") {
		w.t.Errorf("mozi reported a data race:\n%s", p.log.race())
	}
	if w.t.Failed() {
		w.t.Logf("mozi's log (last 150 lines; whole log in %s):\n%s", filepath.Join(w.dir, "mozi.log"), p.log.tail(150))
	}
}

// logBuffer keeps mozi's output in memory and in a file.
type logBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	file io.Writer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, _ = b.file.Write(p)
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) tail(n int) string {
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// race is the race detector's first report.
func (b *logBuffer) race() string {
	s := b.String()
	i := strings.Index(s, "WARNING: DATA RACE")
	if i < 0 {
		return ""
	}
	end := strings.Index(s[i:], "==================")
	if end < 0 {
		end = min(len(s)-i, 8000)
	}
	return s[i : i+end]
}

// eventually polls cond until it holds; detail says what was seen last.
func (w *world) eventually(what string, timeout time.Duration, cond func() (bool, string)) {
	w.t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, detail := cond()
		if ok {
			return
		}
		last = detail
		if time.Now().After(deadline) {
			w.t.Fatalf("timed out after %s waiting for %s; last seen: %s", timeout, what, last)
		}
		if w.mozi != nil {
			select {
			case <-w.mozi.done:
				w.t.Fatalf("mozi exited (%v) while waiting for %s:\n%s", w.mozi.err, what, w.mozi.log.tail(60))
			default:
			}
		}
		time.Sleep(150 * time.Millisecond)
	}
}

// tasks are the repository's tasks, oldest first.
func (w *world) tasks() []task.Task {
	w.t.Helper()
	list, err := w.store.ListTasks(context.Background(), repository.TaskFilter{Repo: w.repo, Limit: 10000})
	require.NoError(w.t, err)
	for i, j := 0, len(list)-1; i < j; i, j = i+1, j-1 {
		list[i], list[j] = list[j], list[i]
	}
	return list
}

// tasksWhere are the tasks keep selects.
func (w *world) tasksWhere(keep func(task.Task) bool) []task.Task {
	var out []task.Task
	for _, t := range w.tasks() {
		if keep(t) {
			out = append(out, t)
		}
	}
	return out
}

// describe lists tasks in one line each, for failure messages.
func describe(tasks []task.Task) string {
	var b strings.Builder
	for _, t := range tasks {
		fmt.Fprintf(&b, "\n  #%d %s#%d %s %s %s retries=%d dispatches=%d err=%q", t.ID, t.Repo, t.IssueNumber,
			t.ActionType, t.Agent, t.Status, t.RetryCount, t.DispatchCount, t.LastError)
	}
	return b.String()
}

// waitTask waits for exactly one task matching keep and for it to reach
// status, and returns it.
func (w *world) waitTask(what string, timeout time.Duration, status task.Status, keep func(task.Task) bool) task.Task {
	w.t.Helper()
	var found task.Task
	w.eventually(what+" → "+string(status), timeout, func() (bool, string) {
		list := w.tasksWhere(keep)
		if len(list) != 1 {
			return false, fmt.Sprintf("%d matching tasks; all:%s", len(list), describe(w.tasks()))
		}
		found = list[0]
		return found.Status == status, describe(list)
	})
	return found
}

// waitRunsRecorded waits until no run holds a task: every run started has
// ended and been recorded.
func (w *world) waitRunsRecorded() {
	w.t.Helper()
	w.eventually("every run recorded", 3*time.Minute, func() (bool, string) {
		busy := w.tasksWhere(func(t task.Task) bool { return t.LeaseOwner != "" })
		return len(busy) == 0, describe(busy)
	})
}

func isAction(action task.ActionType, agent string) func(task.Task) bool {
	return func(t task.Task) bool { return t.ActionType == action && (agent == "" || t.Agent == agent) }
}

func randSuffix() string {
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// as are a user's API credentials.
func as(u realgitea.User) realgitea.Credentials { return u.Credentials() }

// call is a Gitea API call that must succeed.
func (w *world) call(u realgitea.User, method, path string, in, out any) {
	w.t.Helper()
	require.NoError(w.t, w.api.Call(context.Background(), as(u), method, path, in, out))
}

// createIssue opens an issue as the human, assigned to the given logins.
func (w *world) createIssue(title, body string, assignees ...string) int {
	w.t.Helper()
	var issue struct{ Number int }
	w.call(w.human, http.MethodPost, "/repos/"+w.repo+"/issues",
		map[string]any{"title": title, "body": body, "assignees": assignees}, &issue)
	return issue.Number
}

type comment struct {
	ID   int64
	Body string
	User struct{ Login string }
}

// comments lists an issue's comments, oldest first.
func (w *world) comments(number int) []comment {
	w.t.Helper()
	var out []comment
	w.call(w.human, http.MethodGet, fmt.Sprintf("/repos/%s/issues/%d/comments", w.repo, number), nil, &out)
	return out
}

func (w *world) commentsBy(number int, login string) []comment {
	var out []comment
	for _, c := range w.comments(number) {
		if strings.EqualFold(c.User.Login, login) {
			out = append(out, c)
		}
	}
	return out
}

// notices is mozi's comments on an issue other than its status comment
// (which it edits in place as the work moves: spawner/progress).
func (w *world) notices(number int) []comment {
	var out []comment
	for _, c := range w.commentsBy(number, w.bot.Login) {
		if !strings.Contains(c.Body, progress.Marker) {
			out = append(out, c)
		}
	}
	return out
}

// statusText is the issue's status comment as Gitea shows it ("" when none).
func (w *world) statusText(number int) string {
	for _, c := range w.commentsBy(number, w.bot.Login) {
		if strings.Contains(c.Body, progress.Marker) {
			return c.Body
		}
	}
	return ""
}

type pull struct {
	Number int
	State  string
	Merged bool
	Body   string
	Head   struct {
		Ref string
		Sha string
	}
	User struct{ Login string }
}

// pulls lists the repository's pull requests (all states).
func (w *world) pulls() []pull {
	w.t.Helper()
	var out []pull
	w.call(w.human, http.MethodGet, "/repos/"+w.repo+"/pulls?state=all&limit=50", nil, &out)
	return out
}

type review struct {
	ID    int64
	State string
	Body  string
	User  struct{ Login string }
}

func (w *world) reviews(pr int) []review {
	w.t.Helper()
	var out []review
	w.call(w.human, http.MethodGet, fmt.Sprintf("/repos/%s/pulls/%d/reviews", w.repo, pr), nil, &out)
	return out
}

// branches lists the repository's branch names.
func (w *world) branches() []string {
	w.t.Helper()
	var list []struct{ Name string }
	w.call(w.human, http.MethodGet, "/repos/"+w.repo+"/branches?limit=50", nil, &list)
	var out []string
	for _, b := range list {
		out = append(out, b.Name)
	}
	return out
}

type commit struct {
	SHA string
}

func (w *world) pullCommits(pr int) []commit {
	w.t.Helper()
	var out []commit
	w.call(w.human, http.MethodGet, fmt.Sprintf("/repos/%s/pulls/%d/commits", w.repo, pr), nil, &out)
	return out
}

// worktrees lists the task worktrees mozi has on disk for the repository.
func (w *world) worktrees() []string {
	entries, err := os.ReadDir(filepath.Join(w.dir, "state", "workspaces", "trees", w.repo))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// checkout is a clone of the world's repository on the test's side, acting
// as a user (a person pushing, or CI).
type checkout struct {
	w   *world
	dir string
	u   realgitea.User
}

// clone clones the repository as u.
func (w *world) clone(u realgitea.User) *checkout {
	w.t.Helper()
	c := &checkout{w: w, dir: filepath.Join(w.t.TempDir(), "clone"), u: u}
	out, err := exec.Command("git", "clone", "-q", w.g.AuthCloneURL(w.repo, u), c.dir).CombinedOutput()
	require.NoError(w.t, err, string(out))
	return c
}

func (c *checkout) git(args ...string) string {
	c.w.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME="+c.u.Login, "GIT_AUTHOR_EMAIL="+c.u.Login+"@example.test",
		"GIT_COMMITTER_NAME="+c.u.Login, "GIT_COMMITTER_EMAIL="+c.u.Login+"@example.test")
	out, err := cmd.CombinedOutput()
	require.NoError(c.w.t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// commitPush commits a change to a file on branch and pushes it; it
// returns the new head.
func (c *checkout) commitPush(branch, file, content string) string {
	c.w.t.Helper()
	c.git("fetch", "-q", "origin")
	c.git("checkout", "-q", "-B", branch, "origin/"+branch)
	require.NoError(c.w.t, os.WriteFile(filepath.Join(c.dir, file), []byte(content), 0o644))
	c.git("add", file)
	c.git("commit", "-q", "-m", "Change "+file)
	c.git("push", "-q", "origin", "HEAD:"+branch)
	return c.git("rev-parse", "HEAD")
}

// status posts a commit status as u.
func (w *world) status(u realgitea.User, sha, context, state string) {
	w.t.Helper()
	w.call(u, http.MethodPost, "/repos/"+w.repo+"/statuses/"+sha, map[string]any{
		"context": context, "state": state, "description": context + " is " + state,
		"target_url": w.g.URL + "/ci/" + sha,
	}, nil)
}
