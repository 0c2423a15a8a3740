// Package embedded runs mozi's default database: a private PostgreSQL
// cluster started from the machine's own server binaries, listening on a
// unix socket only, and stopped when mozi stops.
//
// Layout of a state directory S:
//
//	S/mozi.lock               flock held by the mozi process that owns the cluster
//	S/postgres/data           the cluster (PGDATA)
//	S/postgres/data.initdb-*  a cluster being made, during a first start only
//	S/postgres/run            the unix socket directory
//	S/postgres/postgres.log
//
// Invariants:
//
//   - Only the holder of S/mozi.lock creates, starts or removes anything
//     under S/postgres.
//   - S/postgres/data appears complete or not at all: initdb runs in a
//     data.initdb-* directory next to it, which is renamed into place once
//     initdb has finished (and synced it). What follows — the first start
//     and CREATE DATABASE — is crash-safe through PostgreSQL's own WAL and
//     done again by every start, so no marker file is needed.
//   - Start recreates a half-made cluster only when it provably never held
//     data: a leftover data.initdb-* directory, or (left by mozi versions
//     that ran initdb in place) a data directory without PG_VERSION and
//     without a single file, without template1, or without the postgres
//     database and any database besides the templates. It logs one line
//     saying what it found. Anything else is left alone and reported.
//   - Start returns a running cluster, or an error in one line after
//     stopping what it started and releasing the lock; it never panics,
//     and it does not wait out its timeout when postgres exits or answers
//     with an error that retrying cannot cure.
//   - initdb and postgres get a minimal environment (PATH, HOME, TZ, LANG,
//     LC_*): never mozi's secrets, never PG* variables.
//
// When mozi runs as root, PostgreSQL (which refuses to run as root) runs as
// an unprivileged user, "postgres" by default, and S/postgres belongs to it.
package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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
	"github.com/jackc/pgx/v5/pgconn"
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
	stepInitdbRunning   = "initdb-running"   // initdb runs in a data.initdb-* directory
	stepInitdbDone      = "initdb-done"      // initdb exited, the cluster is not in place yet
	stepInitialised     = "initialised"      // the new cluster is S/postgres/data
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
	pgRoot    string // S/postgres
	dataDir   string
	socketDir string
	tempSock  bool
	user      *runUser
	lock      *os.File
	pm        *postmaster // nil until postgres was started
	attached  bool        // another mozi process owns it (Attach)
}

// postmaster is one run of the postgres server process.
type postmaster struct {
	cmd     *exec.Cmd
	exited  chan struct{} // closed when it has exited; err is set before
	err     error
	logPath string
	logFrom int64 // where this run's lines begin in logPath
}

// Start takes the state directory's lock, initialises the cluster on first
// use (or recreates a half-made one), and starts PostgreSQL. The caller
// must call Stop. On error, nothing is left running and the lock is free.
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
		pgRoot:  filepath.Join(stateDir, "postgres"),
		dataDir: filepath.Join(stateDir, "postgres", "data"),
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
	var err error
	if c.binDir, err = findBinDir(readPGVersion(c.dataDir)); err != nil {
		return err
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
	if err := c.stopOrphan(ctx); err != nil {
		return err
	}
	if err := c.ensureInitialised(ctx); err != nil {
		return err
	}
	for recreated := false; ; recreated = true {
		if err := c.startPostgres(); err != nil {
			return err
		}
		c.hook(stepPostgresStarted)
		err := c.waitReady(ctx)
		var half *halfMadeError
		if !recreated && errors.As(err, &half) {
			// A half-made cluster that only a running server could
			// recognise: stop it, then make it again, once.
			if err := c.stopPostgres(); err != nil {
				return err
			}
			if err := c.recreate(ctx, half.found); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		break
	}
	c.hook(stepReady)
	if err := c.ensureDatabase(ctx); err != nil {
		return err
	}
	c.hook(stepDatabaseCreated)
	c.logger.Info("embedded PostgreSQL ready", "data_dir", c.dataDir, "socket_dir", c.socketDir,
		"binaries", c.binDir, "pid", c.pm.cmd.Process.Pid)
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
		detail := ""
		if c.pm != nil && !c.pm.hasExited() {
			detail = ": " + c.pm.relevantLog()
		}
		return fmt.Errorf("embedded postgres: %s not done after %s (StartTimeout): %w%s",
			during, c.opts.StartTimeout, context.DeadlineExceeded, detail)
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
// the user PostgreSQL runs as, and checks that user can reach it. The data
// directory itself only ever comes from initdb (see initdb).
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
	for _, dir := range []string{c.pgRoot, filepath.Join(c.pgRoot, "run")} {
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
		if err := c.user.canReach(c.pgRoot); err != nil {
			return fmt.Errorf("embedded postgres: %w: choose a state directory that user %s can reach with --data-dir (e.g. /var/lib/mozi)", err, c.user.name)
		}
	}
	c.socketDir = filepath.Join(c.pgRoot, "run")
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

func (c *Cluster) startPostgres() error {
	logPath := filepath.Join(c.pgRoot, "postgres.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("embedded postgres: open log: %w", err)
	}
	var logFrom int64
	if st, err := logFile.Stat(); err == nil {
		logFrom = st.Size()
	}
	args := []string{"-D", c.dataDir, "-k", c.socketDir, "-p", port,
		"-c", "listen_addresses=", "-c", "unix_socket_permissions=0700"}
	for k, v := range c.opts.Settings {
		args = append(args, "-c", k+"="+v)
	}
	// Not CommandContext: the cluster must outlive the start-up context.
	// SIGINT when mozi dies is PostgreSQL's fast shutdown.
	cmd := c.command(exec.Command(filepath.Join(c.binDir, "postgres"), args...), syscall.SIGINT)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("embedded postgres: start %s: %w", cmd.Path, err)
	}
	pm := &postmaster{cmd: cmd, exited: make(chan struct{}), logPath: logPath, logFrom: logFrom}
	go func() {
		pm.err = cmd.Wait()
		logFile.Close()
		close(pm.exited)
	}()
	c.pm = pm
	return nil
}

// waitReady waits until postgres accepts connections to the postgres
// database. It gives up at once when postgres exits or refuses with an
// error that waiting does not cure; only "starting up" and "no socket
// yet" (while postgres does not say it is ready) are waited out.
func (c *Cluster) waitReady(ctx context.Context) error {
	for {
		// Read before connecting: a server that said it was ready before
		// the attempt and still does not answer will not answer later.
		ready := c.postmasterReady()
		conn, err := pgx.Connect(ctx, c.DatabaseURL("postgres"))
		if err == nil {
			conn.Close(ctx)
			return nil
		}
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr) && pgErr.Code == "57P03": // cannot_connect_now: starting up or recovering
		case errors.As(err, &pgErr) && pgErr.Code == "3D000": // invalid_catalog_name: no postgres database
			return c.checkNoPostgresDatabase(ctx)
		case errors.As(err, &pgErr):
			return fmt.Errorf("embedded postgres: connect to the cluster in %s: %w", c.dataDir, err)
		case ready && ctx.Err() == nil:
			return fmt.Errorf("embedded postgres: postgres says it is ready but does not answer on %s: %w", c.socketDir, err)
		}
		select {
		case <-c.pm.exited:
			return fmt.Errorf("embedded postgres: postgres exited during start-up (%v): %s", c.pm.err, c.pm.relevantLog())
		case <-ctx.Done():
			return c.interrupted(ctx, "start-up")
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// postmasterReady reports whether our postmaster has written "ready" in
// postmaster.pid (line 1 its pid, line 8 its status).
func (c *Cluster) postmasterReady() bool {
	data, err := os.ReadFile(filepath.Join(c.dataDir, "postmaster.pid"))
	if err != nil {
		return false
	}
	lines := strings.Split(string(data), "\n")
	if len(lines) < 8 {
		return false
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(lines[0]))
	return pid == c.pm.cmd.Process.Pid && strings.TrimSpace(lines[7]) == "ready"
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
	if c.pm == nil {
		return nil
	}
	pid := c.pm.cmd.Process.Pid
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
		case <-c.pm.exited:
			return nil
		default:
		}
		if c.signalUntilExit(target, step.sig, step.wait) {
			c.logger.Info("embedded PostgreSQL stopped", "data_dir", c.dataDir)
			return nil
		}
		c.logger.Warn("embedded PostgreSQL did not stop in time, escalating", "signal", step.sig.String())
	}
	return fmt.Errorf("embedded postgres: pid %d did not exit", pid)
}

// signalUntilExit sends sig, again each second, until the postmaster exits
// or wait passes. Again, because a signal that arrives while postgres is
// still starting, before it installs its handlers, is lost when it
// inherited the signal ignored (mozi started in the background by a
// shell without job control): a stop would then wait the whole wait.
func (c *Cluster) signalUntilExit(target int, sig syscall.Signal, wait time.Duration) bool {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	again := time.NewTicker(time.Second)
	defer again.Stop()
	for {
		_ = syscall.Kill(target, sig)
		select {
		case <-c.pm.exited:
			return true
		case <-deadline.C:
			return false
		case <-again.C:
		}
	}
}

func (pm *postmaster) hasExited() bool {
	select {
	case <-pm.exited:
		return true
	default:
		return false
	}
}

// relevantLog is what this run of postgres wrote to its log, in one line:
// its FATAL, PANIC and ERROR lines with their DETAIL and HINT, or its last
// lines when it wrote none of those. Earlier runs' lines are left out.
func (pm *postmaster) relevantLog() string {
	f, err := os.Open(pm.logPath)
	if err != nil {
		return "(no postgres.log: " + err.Error() + ")"
	}
	defer f.Close()
	data, err := io.ReadAll(io.NewSectionReader(f, pm.logFrom, 1<<20))
	if err != nil {
		return "(postgres.log unreadable: " + err.Error() + ")"
	}
	var all, picked []string
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.Join(strings.Fields(line), " ")
		if line == "" {
			continue
		}
		all = append(all, line)
		for _, severity := range []string{"FATAL:", "PANIC:", "ERROR:", "DETAIL:", "HINT:"} {
			if i := strings.Index(line, severity); i >= 0 {
				picked = append(picked, line[i:]) // without the timestamp and pid
				break
			}
		}
	}
	if len(picked) == 0 {
		picked = all
	}
	if len(picked) == 0 {
		return "postgres.log has nothing from this start"
	}
	return lastLines(strings.Join(picked, "\n"), 5)
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

// lastLines joins the last n lines of s into one line.
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
		pgRoot:    filepath.Join(stateDir, "postgres"),
		dataDir:   dataDir,
		socketDir: socketDir,
		attached:  true,
	}, nil
}

// Attached reports whether another mozi process owns the cluster: it was
// not started by this one but attached to (Attach).
func (c *Cluster) Attached() bool { return c.attached }

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
