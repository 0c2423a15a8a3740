package realgitea

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// AdminLogin is the site administrator every server has; its token (Server
// .AdminToken) creates everything else.
const AdminLogin = "gitea-admin"

// Server is a running Gitea.
type Server struct {
	// Client's URL is Gitea's base URL, http://127.0.0.1:<port>.
	Client
	// AdminToken is the administrator's API token (scope all).
	AdminToken    string
	AdminPassword string
	Install       Install
	// Dir holds the configuration, the SQLite database, repositories and
	// logs.
	Dir string
	// Started is how long the first start took, creating the admin
	// included.
	Started time.Duration

	port   int
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Options configures Start.
type Options struct {
	// Dir is where the server keeps everything (default: a new temporary
	// directory, removed by Stop).
	Dir string
	// Settings are extra app.ini lines by section ("webhook" →
	// "DELIVER_TIMEOUT = 2"), written after the defaults.
	Settings map[string][]string
}

// Start runs a Gitea from in on a free loopback port and creates its
// administrator.
func Start(ctx context.Context, in Install, opts Options) (*Server, error) {
	begin := time.Now()
	dir := opts.Dir
	ownDir := dir == ""
	if ownDir {
		d, err := os.MkdirTemp("", "mozi-gitea-")
		if err != nil {
			return nil, fmt.Errorf("create Gitea dir: %w", err)
		}
		dir = d
	}
	// Agents running as another user clone and push over HTTP only, but
	// Gitea's git hooks run as this user: the directory stays private.
	s := &Server{Install: in, Dir: dir, AdminPassword: "admin-" + randomHex(8)}
	fail := func(err error) (*Server, error) {
		s.kill()
		if ownDir {
			_ = os.RemoveAll(dir)
		}
		return nil, err
	}
	var lastErr error
	for try := 0; try < 3; try++ {
		port, err := freePort()
		if err != nil {
			return fail(err)
		}
		s.port = port
		s.URL = "http://127.0.0.1:" + strconv.Itoa(port)
		if err := s.writeConfig(opts.Settings); err != nil {
			return fail(err)
		}
		if lastErr = s.run(ctx); lastErr == nil {
			break
		}
		if !errors.Is(lastErr, errPortTaken) {
			return fail(lastErr)
		}
	}
	if lastErr != nil {
		return fail(lastErr)
	}
	token, err := s.createAdmin(ctx)
	if err != nil {
		return fail(err)
	}
	s.AdminToken = token
	s.Started = time.Since(begin)
	return s, nil
}

var errPortTaken = errors.New("port taken")

// freePort asks the kernel for a free loopback port. Another process may
// take it before Gitea binds it: run retries then.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) configPath() string { return filepath.Join(s.Dir, "app.ini") }

// writeConfig writes app.ini: SQLite, installed, quiet, no mail, no SSH,
// webhooks allowed to loopback and delivered at once.
func (s *Server) writeConfig(extra map[string][]string) error {
	runUser := "root"
	if u, err := user.Current(); err == nil {
		runUser = u.Username
	}
	jwt := make([]byte, 32)
	_, _ = rand.Read(jwt)
	sections := []section{
		{"", []string{"APP_NAME = mozi test Gitea", "RUN_USER = " + runUser, "RUN_MODE = prod",
			"WORK_PATH = " + s.Dir, "I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true"}},
		{"server", []string{"PROTOCOL = http", "HTTP_ADDR = 127.0.0.1", "HTTP_PORT = " + strconv.Itoa(s.port),
			"ROOT_URL = " + s.URL + "/", "LOCAL_ROOT_URL = " + s.URL + "/", "DISABLE_SSH = true",
			"START_SSH_SERVER = false", "OFFLINE_MODE = true", "LFS_START_SERVER = false",
			"APP_DATA_PATH = " + filepath.Join(s.Dir, "data"), "STATIC_ROOT_PATH = " + s.Install.StaticRoot}},
		{"database", []string{"DB_TYPE = sqlite3", "PATH = " + filepath.Join(s.Dir, "data", "gitea.db"),
			"SQLITE_JOURNAL_MODE = WAL", "LOG_SQL = false"}},
		{"repository", []string{"ROOT = " + filepath.Join(s.Dir, "repos"), "DEFAULT_BRANCH = main",
			"DEFAULT_PRIVATE = public"}},
		{"security", []string{"INSTALL_LOCK = true", "SECRET_KEY = " + randomHex(32),
			"INTERNAL_TOKEN = " + randomHex(48), "PASSWORD_COMPLEXITY = off", "MIN_PASSWORD_LENGTH = 6",
			"PASSWORD_HASH_ALGO = pbkdf2$1000$32"}},
		{"oauth2", []string{"JWT_SECRET = " + base64.RawURLEncoding.EncodeToString(jwt)}},
		{"service", []string{"DISABLE_REGISTRATION = true", "REQUIRE_SIGNIN_VIEW = false",
			"ENABLE_NOTIFY_MAIL = false", "DEFAULT_KEEP_EMAIL_PRIVATE = true"}},
		{"mailer", []string{"ENABLED = false"}},
		{"webhook", []string{"ALLOWED_HOST_LIST = loopback", "DELIVER_TIMEOUT = 10", "SKIP_TLS_VERIFY = true"}},
		// Gitea's default is one worker per two CPUs: on a small machine
		// every test's deliveries would queue behind one another.
		{"queue", []string{"TYPE = channel", "MAX_WORKERS = 8"}},
		{"indexer", []string{"ISSUE_INDEXER_TYPE = db", "REPO_INDEXER_ENABLED = false"}},
		{"session", []string{"PROVIDER = memory"}},
		{"cache", []string{"ADAPTER = memory"}},
		{"picture", []string{"DISABLE_GRAVATAR = true", "ENABLE_FEDERATED_AVATAR = false"}},
		{"cron", []string{"ENABLED = false"}},
		{"cron.update_checker", []string{"ENABLED = false"}},
		{"log", []string{"MODE = file", "LEVEL = Warn", "ROOT_PATH = " + filepath.Join(s.Dir, "log")}},
		{"api", []string{"ENABLE_SWAGGER = false"}},
	}
	var b strings.Builder
	for _, sec := range sections {
		if sec.name != "" {
			fmt.Fprintf(&b, "\n[%s]\n", sec.name)
		}
		for _, l := range sec.lines {
			b.WriteString(l + "\n")
		}
		for _, l := range extra[sec.name] {
			b.WriteString(l + "\n")
		}
	}
	for name, lines := range extra {
		if !slices.ContainsFunc(sections, func(s section) bool { return s.name == name }) {
			fmt.Fprintf(&b, "\n[%s]\n%s\n", name, strings.Join(lines, "\n"))
		}
	}
	if err := os.MkdirAll(filepath.Join(s.Dir, "data"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(s.configPath(), []byte(b.String()), 0o600)
}

// section is one [section] of app.ini.
type section struct {
	name  string
	lines []string
}

// env is the environment of Gitea's processes.
func (s *Server) env() []string {
	env := []string{
		"HOME=" + filepath.Join(s.Dir, "home"),
		"GITEA_WORK_DIR=" + s.Dir,
		"GITEA_CUSTOM=" + filepath.Join(s.Dir, "custom"),
		"USER=" + os.Getenv("USER"),
		"PATH=" + os.Getenv("PATH"),
		"TMPDIR=" + os.TempDir(),
	}
	return env
}

// run starts `gitea web` and waits until its API answers.
func (s *Server) run(ctx context.Context) error {
	if err := os.MkdirAll(filepath.Join(s.Dir, "home"), 0o700); err != nil {
		return err
	}
	logPath := filepath.Join(s.Dir, "stdout.log")
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command(s.Install.Binary, "web", "--config", s.configPath())
	cmd.Dir = s.Dir
	cmd.Env = s.env()
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, killed with it; and dead when the test
	// binary dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.Install.Binary, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()

	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case <-exited:
			log := s.logTail(logPath)
			if strings.Contains(log, "address already in use") {
				return errPortTaken
			}
			return fmt.Errorf("gitea web exited at start: %s", log)
		case <-ctx.Done():
			s.kill()
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if s.answers() {
			return nil
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("gitea web did not answer on %s within 2 minutes: %s", s.URL, s.logTail(logPath))
		}
	}
}

func (s *Server) answers() bool {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(s.URL + "/api/v1/version")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// logTail is the end of Gitea's output and log, for an error message.
func (s *Server) logTail(stdout string) string {
	var b []byte
	for _, p := range []string{stdout, filepath.Join(s.Dir, "log", "gitea.log")} {
		if data, err := os.ReadFile(p); err == nil {
			b = append(b, data...)
		}
	}
	return lastLines(b, 15)
}

var tokenLineRE = regexp.MustCompile(`Access token was successfully created\.\.\. (\S+)`)

// createAdmin makes the administrator with `gitea admin user create` and
// returns its token.
func (s *Server) createAdmin(ctx context.Context) (string, error) {
	out, err := s.Admin(ctx, "admin", "user", "create", "--admin", "--username", AdminLogin,
		"--password", s.AdminPassword, "--email", AdminLogin+"@example.test", "--must-change-password=false",
		"--access-token", "--access-token-name", "mozi-tests", "--access-token-scopes", "all")
	if err != nil {
		return "", err
	}
	m := tokenLineRE.FindStringSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("gitea admin user create printed no token: %s", firstLine([]byte(out)))
	}
	return m[1], nil
}

// Admin runs a gitea command against this server's configuration
// (`gitea admin user list`, …) and returns its output.
func (s *Server) Admin(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.Install.Binary, append(args, "--config", s.configPath())...)
	cmd.Dir = s.Dir
	cmd.Env = s.env()
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return buf.String(), fmt.Errorf("gitea %s: %w: %s", strings.Join(args[:min(3, len(args))], " "), err, lastLines(buf.Bytes(), 5))
	}
	return buf.String(), nil
}

// Stop ends Gitea (SIGTERM, then SIGKILL after 10 s). The server can be
// started again with Resume, on the same port and data.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
}

func (s *Server) kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-exited
}

// Resume starts a stopped server again on its port, with its data.
func (s *Server) Resume(ctx context.Context) error {
	s.mu.Lock()
	running := s.cmd != nil
	s.mu.Unlock()
	if running {
		return nil
	}
	return s.run(ctx)
}

// EnvKeep keeps the servers' directories (logs, database) after Close,
// for a look after a failure.
const EnvKeep = "MOZI_TEST_GITEA_KEEP"

// Close stops the server and removes its directory (unless EnvKeep is
// set).
func (s *Server) Close() {
	s.Stop()
	if os.Getenv(EnvKeep) != "" {
		fmt.Fprintf(os.Stderr, "realgitea: %s kept\n", s.Dir)
		return
	}
	_ = os.RemoveAll(s.Dir)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
