// Package embedded runs mozi's default database: a private PostgreSQL
// cluster started from the machine's own server binaries, listening on a
// unix socket only, and stopped when mozi stops.
//
// Layout of a state directory S:
//
//	S/mozi.lock          flock held by the mozi process that owns the cluster
//	S/postgres/data      the cluster (PGDATA)
//	S/postgres/run       the unix socket directory
//	S/postgres/postgres.log
//
// Start returns a running cluster, or an error after stopping what it
// started and releasing the lock; it never panics.
//
// initdb and postgres get a minimal environment (PATH, HOME, TZ, LANG,
// LC_*): never mozi's secrets, never PG* variables.
//
// When mozi runs as root, PostgreSQL (which refuses to run as root) runs as
// an unprivileged user, "postgres" by default, and S/postgres belongs to it.
package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Superuser is the role initdb creates; mozi connects as it.
const Superuser = "mozi"

// maxSocketPath is the longest unix socket path the kernel accepts (sun_path
// is 108 bytes including the terminating NUL).
const maxSocketPath = 107

// port names the cluster's socket (.s.PGSQL.5432). It is given to postgres
// and in every URL, so that a PGPORT in mozi's environment changes neither.
const port = "5432"

// Options configure a cluster.
type Options struct {
	// StateDir holds the lock, the cluster and its log (required).
	StateDir string
	// Database is created on first start when missing (default "mozi").
	Database string
	// RunAs is the unprivileged user PostgreSQL runs as when mozi is root
	// (default "postgres"). Ignored when mozi is not root.
	RunAs string
	// Settings are extra postgres -c settings (tests turn fsync off).
	Settings map[string]string
	// NoSync makes initdb skip fsync (tests only).
	NoSync bool
	// StartTimeout bounds initdb plus start-up (default 60s).
	StartTimeout time.Duration
	Logger       *slog.Logger

	// testHook, when set, is called at each step of Start (the step*
	// constants) so that tests can interrupt a start exactly there.
	testHook func(step string)
}

// Steps of Start, in order, as passed to Options.testHook.
const (
	stepLocked          = "locked"           // the state lock is held
	stepInitdbRunning   = "initdb-running"   // initdb runs
	stepInitialised     = "initialised"      // initdb has finished
	stepPostgresStarted = "postgres-started" // the postmaster was started
	stepReady           = "ready"            // it accepts connections
	stepDatabaseCreated = "database-created" // Options.Database exists
)

// errStartTimeout is the cause of Start's context when StartTimeout passes,
// telling it apart from the caller's own cancellation or deadline.
var errStartTimeout = errors.New("start timeout")

// Cluster is a running private PostgreSQL.
type Cluster struct {
	opts      Options
	logger    *slog.Logger
	binDir    string
	dataDir   string
	socketDir string
	tempSock  bool
	user      *runUser
	lock      *os.File
	cmd       *exec.Cmd
	exited    chan struct{}
	waitErr   error
}

// Start takes the state directory's lock, initialises the cluster on first
// use, and starts PostgreSQL. The caller must call Stop. On error, nothing
// is left running and the lock is free.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.StateDir == "" {
		return nil, errors.New("embedded postgres: state dir is empty")
	}
	if opts.Database == "" {
		opts.Database = "mozi"
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 60 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	stateDir, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, fmt.Errorf("embedded postgres: resolve state dir: %w", err)
	}
	opts.StateDir = stateDir
	user, err := resolveRunUser(opts.RunAs)
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		opts:    opts,
		logger:  opts.Logger,
		user:    user,
		dataDir: filepath.Join(stateDir, "postgres", "data"),
		exited:  make(chan struct{}),
	}
	// A named result would be nil by the time deferred clean-ups ran on
	// an error return; clean up here, from the one place that fails.
	if err := c.boot(ctx); err != nil {
		// Stop undoes whatever boot got to: postgres, the temporary socket
		// directory, the lock.
		if serr := c.Stop(); serr != nil {
			c.logger.Error("stop embedded PostgreSQL after a failed start", "error", serr)
		}
		return nil, err
	}
	return c, nil
}

func (c *Cluster) boot(ctx context.Context) error {
	ctx, cancel := context.WithTimeoutCause(ctx, c.opts.StartTimeout, errStartTimeout)
	defer cancel()
	existingMajor := readPGVersion(c.dataDir)
	var err error
	if c.binDir, err = findBinDir(existingMajor); err != nil {
		return err
	}
	if existingMajor != "" {
		if major, verr := binMajor(c.binDir); verr == nil && major != existingMajor {
			return fmt.Errorf("embedded postgres: the cluster in %s was created by PostgreSQL %s but only PostgreSQL %s binaries were found (%s): install PostgreSQL %s server binaries, or move the directory away to start a new cluster",
				c.dataDir, existingMajor, major, c.binDir, existingMajor)
		}
	}
	if err := c.prepareDirs(); err != nil {
		return err
	}
	if c.lock, err = lockStateDir(c.opts.StateDir); err != nil {
		return err
	}
	c.hook(stepLocked)
	if c.user != nil {
		c.logger.Info("running as root: PostgreSQL runs as an unprivileged user",
			"user", c.user.name, "data_dir", c.dataDir)
	}
	if existingMajor == "" {
		if err := c.initdb(ctx); err != nil {
			return err
		}
	}
	if err := c.stopOrphan(ctx); err != nil {
		return err
	}
	if err := c.start(ctx); err != nil {
		return err
	}
	c.hook(stepPostgresStarted)
	if err := c.waitReady(ctx); err != nil {
		return err
	}
	c.hook(stepReady)
	if err := c.ensureDatabase(ctx); err != nil {
		return err
	}
	c.hook(stepDatabaseCreated)
	c.logger.Info("embedded PostgreSQL ready", "data_dir", c.dataDir, "socket_dir", c.socketDir,
		"binaries", c.binDir, "pid", c.cmd.Process.Pid)
	return nil
}

func (c *Cluster) hook(step string) {
	if c.opts.testHook != nil {
		c.opts.testHook(step)
	}
}

// interrupted explains why ctx ended during a step of Start: the start
// timeout, or the caller giving up (Ctrl-C), whose error it wraps.
func (c *Cluster) interrupted(ctx context.Context, during string) error {
	if errors.Is(context.Cause(ctx), errStartTimeout) {
		return fmt.Errorf("embedded postgres: %s not done after %s (StartTimeout): %w: %s",
			during, c.opts.StartTimeout, context.DeadlineExceeded, c.logTail())
	}
	return fmt.Errorf("embedded postgres: %s interrupted: %w", during, ctx.Err())
}

// URL is the connection string of the cluster's database.
func (c *Cluster) URL() string { return c.DatabaseURL(c.opts.Database) }

// DatabaseURL is the connection string of database name on this cluster.
func (c *Cluster) DatabaseURL(name string) string {
	q := url.Values{}
	q.Set("host", c.socketDir)
	q.Set("port", port)
	q.Set("sslmode", "disable")
	return (&url.URL{
		Scheme:   "postgres",
		User:     url.User(Superuser),
		Path:     "/" + name,
		RawQuery: q.Encode(),
	}).String()
}

// DataDir is the cluster's PGDATA.
func (c *Cluster) DataDir() string { return c.dataDir }

// Stop shuts PostgreSQL down (fast shutdown, then harder signals if it does
// not exit) and releases the state directory. Safe to call twice.
func (c *Cluster) Stop() error {
	err := c.stopPostgres()
	if c.tempSock {
		_ = os.RemoveAll(c.socketDir)
	}
	c.releaseLock()
	return err
}

func (c *Cluster) releaseLock() {
	if c.lock != nil {
		_ = c.lock.Close() // closing the descriptor drops the flock
		c.lock = nil
	}
}

// prepareDirs creates the state directory and the postgres subtree owned by
// the user PostgreSQL runs as, and checks that user can reach it.
func (c *Cluster) prepareDirs() error {
	stateDir := c.opts.StateDir
	// The state dir only holds the lock and the postgres subtree, which has
	// its own 0700; 0755 lets an unprivileged postgres user traverse it.
	mode := os.FileMode(0o700)
	if c.user != nil {
		mode = 0o755
	}
	if err := os.MkdirAll(stateDir, mode); err != nil {
		return fmt.Errorf("embedded postgres: create state dir: %w", err)
	}
	pgRoot := filepath.Join(stateDir, "postgres")
	for _, dir := range []string{pgRoot, c.dataDir, filepath.Join(pgRoot, "run")} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("embedded postgres: create %s: %w", dir, err)
		}
		if c.user != nil {
			if err := os.Chown(dir, c.user.uid, c.user.gid); err != nil {
				return fmt.Errorf("embedded postgres: give %s to user %s: %w", dir, c.user.name, err)
			}
		}
	}
	if c.user != nil {
		if err := c.user.canReach(pgRoot); err != nil {
			return fmt.Errorf("embedded postgres: %w: choose a state directory that user %s can reach with --data-dir (e.g. /var/lib/mozi)", err, c.user.name)
		}
	}
	c.socketDir = filepath.Join(pgRoot, "run")
	if len(c.socketDir)+len("/.s.PGSQL."+port) > maxSocketPath {
		dir, err := os.MkdirTemp("", "mozi-pg-")
		if err != nil {
			return fmt.Errorf("embedded postgres: create socket dir: %w", err)
		}
		c.socketDir, c.tempSock = dir, true
		if c.user != nil {
			if err := os.Chown(dir, c.user.uid, c.user.gid); err != nil {
				return fmt.Errorf("embedded postgres: give %s to user %s: %w", dir, c.user.name, err)
			}
		}
	}
	return nil
}

func (c *Cluster) initdb(ctx context.Context) error {
	args := []string{"-D", c.dataDir, "-U", Superuser, "--auth=trust", "--encoding=UTF8",
		"--locale=C", "--no-instructions"}
	if c.opts.NoSync {
		args = append(args, "--no-sync")
	}
	// SIGKILL when mozi dies: an interrupted initdb's cluster is no use.
	cmd := c.command(exec.CommandContext(ctx, filepath.Join(c.binDir, "initdb"), args...), syscall.SIGKILL)
	cmd.Cancel = func() error {
		// The whole group: initdb and the postgres backends it runs.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	c.logger.Info("initialising PostgreSQL cluster", "data_dir", c.dataDir, "binaries", c.binDir)
	if err := cmd.Start(); err != nil {
		if ctx.Err() != nil {
			return c.interrupted(ctx, "initdb")
		}
		return fmt.Errorf("embedded postgres: start %s: %w", cmd.Path, err)
	}
	c.hook(stepInitdbRunning)
	if err := cmd.Wait(); err != nil {
		if ctx.Err() != nil {
			return c.interrupted(ctx, "initdb")
		}
		return fmt.Errorf("embedded postgres: initdb in %s failed: %w: %s", c.dataDir, err, lastLines(out.String(), 5))
	}
	c.hook(stepInitialised)
	return nil
}

// stopOrphan stops a postmaster that a previous, killed mozi left running on
// this data directory. We hold the state lock, so no live mozi owns it.
func (c *Cluster) stopOrphan(ctx context.Context) error {
	pid, _ := postmasterInfo(c.dataDir)
	if pid <= 0 || !processAlive(pid) || !isPostgresProcess(pid) {
		return nil
	}
	c.logger.Warn("stopping a PostgreSQL left running by a previous mozi", "pid", pid, "data_dir", c.dataDir)
	if err := syscall.Kill(pid, syscall.SIGINT); err != nil {
		return fmt.Errorf("embedded postgres: stop leftover postgres pid %d: %w", pid, err)
	}
	for processAlive(pid) {
		select {
		case <-ctx.Done():
			_ = syscall.Kill(pid, syscall.SIGQUIT)
			return fmt.Errorf("embedded postgres: leftover postgres pid %d did not stop: %w", pid, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

func (c *Cluster) start(ctx context.Context) error {
	logPath := filepath.Join(c.opts.StateDir, "postgres", "postgres.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("embedded postgres: open log: %w", err)
	}
	args := []string{"-D", c.dataDir, "-k", c.socketDir, "-p", port,
		"-c", "listen_addresses=", "-c", "unix_socket_permissions=0700"}
	for k, v := range c.opts.Settings {
		args = append(args, "-c", k+"="+v)
	}
	// Not CommandContext: the cluster must outlive the start-up context.
	// SIGINT when mozi dies is PostgreSQL's fast shutdown.
	c.cmd = c.command(exec.Command(filepath.Join(c.binDir, "postgres"), args...), syscall.SIGINT)
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	if err := c.cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("embedded postgres: start %s: %w", c.cmd.Path, err)
	}
	go func() {
		c.waitErr = c.cmd.Wait()
		logFile.Close()
		close(c.exited)
	}()
	_ = ctx
	return nil
}

func (c *Cluster) waitReady(ctx context.Context) error {
	adminURL := c.DatabaseURL("postgres")
	for {
		conn, err := pgx.Connect(ctx, adminURL)
		if err == nil {
			conn.Close(ctx)
			return nil
		}
		select {
		case <-c.exited:
			return fmt.Errorf("embedded postgres: postgres exited during start-up (%v): %s", c.waitErr, c.logTail())
		case <-ctx.Done():
			return c.interrupted(ctx, "start-up")
		case <-time.After(25 * time.Millisecond):
		}
	}
}

func (c *Cluster) ensureDatabase(ctx context.Context) error {
	if c.opts.Database == "postgres" {
		return nil
	}
	conn, err := pgx.Connect(ctx, c.DatabaseURL("postgres"))
	if err != nil {
		if ctx.Err() != nil {
			return c.interrupted(ctx, "creating database "+c.opts.Database)
		}
		return fmt.Errorf("embedded postgres: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`,
		c.opts.Database).Scan(&exists); err != nil {
		if ctx.Err() != nil {
			return c.interrupted(ctx, "creating database "+c.opts.Database)
		}
		return fmt.Errorf("embedded postgres: look up database %s: %w", c.opts.Database, err)
	}
	if exists {
		return nil
	}
	// CREATE DATABASE is transactional: interrupted, it leaves no database
	// behind, and the next start creates it.
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{c.opts.Database}.Sanitize()); err != nil {
		if ctx.Err() != nil {
			return c.interrupted(ctx, "creating database "+c.opts.Database)
		}
		return fmt.Errorf("embedded postgres: create database %s: %w", c.opts.Database, err)
	}
	return nil
}

// stopPostgres asks for a fast shutdown, escalating to an immediate one and
// then SIGKILL of the whole process group if PostgreSQL does not exit.
func (c *Cluster) stopPostgres() error {
	if c.cmd == nil || c.cmd.Process == nil {
		return nil
	}
	pid := c.cmd.Process.Pid
	steps := []struct {
		sig   syscall.Signal
		group bool
		wait  time.Duration
	}{
		{syscall.SIGINT, false, 30 * time.Second},
		{syscall.SIGQUIT, false, 5 * time.Second},
		{syscall.SIGKILL, true, 5 * time.Second},
	}
	for _, step := range steps {
		target := pid
		if step.group {
			target = -pid
		}
		select {
		case <-c.exited:
			return nil
		default:
		}
		_ = syscall.Kill(target, step.sig)
		select {
		case <-c.exited:
			c.logger.Info("embedded PostgreSQL stopped", "data_dir", c.dataDir)
			return nil
		case <-time.After(step.wait):
			c.logger.Warn("embedded PostgreSQL did not stop in time, escalating", "signal", step.sig.String())
		}
	}
	return fmt.Errorf("embedded postgres: pid %d did not exit", pid)
}

func (c *Cluster) logTail() string {
	data, err := os.ReadFile(filepath.Join(c.opts.StateDir, "postgres", "postgres.log"))
	if err != nil {
		return "(no log)"
	}
	return lastLines(string(data), 5)
}

func readPGVersion(dataDir string) string {
	data, err := os.ReadFile(filepath.Join(dataDir, "PG_VERSION"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func isPostgresProcess(pid int) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return true // no procfs: trust the pid file
	}
	return bytes.Contains(cmdline, []byte("postgres"))
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// Attach connects to the cluster that another mozi process runs in
// stateDir, for short-lived commands (mozi migrate, mozi tasks) run while
// mozi serve is up. It fails when no mozi holds the state directory.
func Attach(stateDir string) (*Cluster, error) {
	stateDir, err := filepath.Abs(stateDir)
	if err != nil {
		return nil, fmt.Errorf("embedded postgres: resolve state dir: %w", err)
	}
	dataDir := filepath.Join(stateDir, "postgres", "data")
	pid, socketDir := postmasterInfo(dataDir)
	if pid <= 0 || socketDir == "" || !processAlive(pid) {
		return nil, fmt.Errorf("embedded postgres: no running cluster in %s", dataDir)
	}
	return &Cluster{
		opts:      Options{StateDir: stateDir, Database: "mozi"},
		logger:    slog.New(slog.DiscardHandler),
		dataDir:   dataDir,
		socketDir: socketDir,
		exited:    make(chan struct{}),
	}, nil
}

// postmasterInfo reads the pid (line 1) and socket directory (line 5) of
// postmaster.pid.
func postmasterInfo(dataDir string) (pid int, socketDir string) {
	data, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0, ""
	}
	lines := strings.Split(string(data), "\n")
	if len(lines) < 5 {
		return 0, ""
	}
	pid, _ = strconv.Atoi(strings.TrimSpace(lines[0]))
	return pid, strings.TrimSpace(lines[4])
}
