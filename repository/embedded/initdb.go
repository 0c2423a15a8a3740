package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
)

// tempDataPrefix names the directories initdb works in, next to PGDATA. One
// found by Start was left by an interrupted first start: no postgres server
// ever ran on it, so it never held data.
const tempDataPrefix = "data.initdb-"

// msgHalfMade is the one line Start logs before recreating a cluster.
const msgHalfMade = "found a half-made PostgreSQL cluster that never held data: recreating it"

// dataState is what Start finds in S/postgres/data before starting postgres.
type dataState int

const (
	dataMissing  dataState = iota // never initialised
	dataHalfMade                  // provably never held data: to recreate
	dataComplete                  // initdb finished, as far as files tell
)

// halfMadeError is a half-made cluster that only a running server could
// recognise (see checkNoPostgresDatabase). Start recreates it.
type halfMadeError struct{ found string }

func (e *halfMadeError) Error() string { return "embedded postgres: half-made cluster: " + e.found }

// ensureInitialised makes S/postgres/data a complete cluster: it removes
// what an interrupted first start left and runs initdb when needed.
func (c *Cluster) ensureInitialised(ctx context.Context) error {
	state, leftovers, found, err := c.inspect()
	if err != nil {
		return err
	}
	if len(found) > 0 {
		msg := msgHalfMade
		if state == dataComplete {
			// Only by hand: Start makes a data.initdb-* directory only while
			// PGDATA is missing. Never say "recreating" wrongly.
			msg = "removing what an interrupted first start of PostgreSQL left"
		}
		c.logger.Warn(msg, "data_dir", c.dataDir, "found", strings.Join(found, "; "))
	}
	for _, dir := range leftovers {
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("embedded postgres: remove %s left by an interrupted first start: %w", dir, err)
		}
	}
	switch state {
	case dataComplete:
		return nil
	case dataHalfMade:
		if err := os.RemoveAll(c.dataDir); err != nil {
			return fmt.Errorf("embedded postgres: remove half-made cluster %s: %w", c.dataDir, err)
		}
	}
	return c.initdb(ctx)
}

// recreate replaces a stopped, half-made cluster with a new one.
func (c *Cluster) recreate(ctx context.Context, found string) error {
	c.logger.Warn(msgHalfMade, "data_dir", c.dataDir, "found", found)
	if err := os.RemoveAll(c.dataDir); err != nil {
		return fmt.Errorf("embedded postgres: remove half-made cluster %s: %w", c.dataDir, err)
	}
	return c.initdb(ctx)
}

// inspect looks at S/postgres without starting anything. found says, for
// the log, what was left half-made; an error means a data directory that
// is neither complete nor provably half-made, which Start leaves alone.
func (c *Cluster) inspect() (state dataState, leftovers, found []string, err error) {
	leftovers, err = filepath.Glob(filepath.Join(c.pgRoot, tempDataPrefix+"*"))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("embedded postgres: look for leftover initdb directories: %w", err)
	}
	for _, dir := range leftovers {
		found = append(found, "leftover initdb directory "+filepath.Base(dir)+" of an interrupted first start")
	}
	if _, err := os.Lstat(c.dataDir); errors.Is(err, fs.ErrNotExist) {
		return dataMissing, leftovers, found, nil
	} else if err != nil {
		return 0, nil, nil, fmt.Errorf("embedded postgres: %w", err)
	}

	version := readPGVersion(c.dataDir)
	if version == "" {
		// PG_VERSION is the first file initdb writes: before it, there are
		// only directories, and no server can start without it.
		file, err := firstFile(c.dataDir)
		if err != nil {
			return 0, nil, nil, fmt.Errorf("embedded postgres: inspect %s: %w", c.dataDir, err)
		}
		if file != "" {
			return 0, nil, nil, fmt.Errorf("embedded postgres: %s has no PG_VERSION but holds files (%s): it is no cluster mozi made, so mozi leaves it alone: move it away to start a new cluster",
				c.dataDir, file)
		}
		return dataHalfMade, leftovers, append(found, "a data directory with no PG_VERSION and no file (initdb stopped before writing any)"), nil
	}
	if major, err := binMajor(c.binDir); err == nil && major != version {
		return 0, nil, nil, fmt.Errorf("embedded postgres: the cluster in %s was created by PostgreSQL %s but only PostgreSQL %s binaries were found (%s): install PostgreSQL %s server binaries, or move the directory away to start a new cluster",
			c.dataDir, version, major, c.binDir, version)
	}
	if _, err := os.Stat(filepath.Join(c.dataDir, "base", "1", "PG_VERSION")); err == nil {
		return dataComplete, leftovers, found, nil
	}
	// initdb writes base/1/PG_VERSION once bootstrap has made template1;
	// without it nobody can connect, so no database can have been made —
	// unless base holds one, which is then no bootstrap that stopped.
	entries, err := os.ReadDir(filepath.Join(c.dataDir, "base"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, nil, nil, fmt.Errorf("embedded postgres: inspect %s: %w", c.dataDir, err)
	}
	for _, e := range entries {
		if e.Name() != "1" {
			return 0, nil, nil, fmt.Errorf("embedded postgres: the cluster in %s is damaged: base/1/PG_VERSION is missing (template1) but it holds databases: mozi leaves it alone: move it away to start a new cluster",
				c.dataDir)
		}
	}
	return dataHalfMade, leftovers, append(found, "PG_VERSION but no template1 (base/1/PG_VERSION): initdb stopped during bootstrap"), nil
}

// checkNoPostgresDatabase explains a cluster without the postgres database.
// initdb creates that database last, so a cluster that has no database
// besides the templates is one whose initdb stopped before the end, where
// mozi cannot have stored anything: a halfMadeError. A cluster that holds
// other databases did hold data and is left alone.
func (c *Cluster) checkNoPostgresDatabase(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.DatabaseURL("template1"))
	if err != nil {
		return fmt.Errorf(`embedded postgres: the cluster in %s has no "postgres" database, and template1 does not answer: %w`, c.dataDir, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT datname FROM pg_database WHERE datname NOT IN ('template0', 'template1') ORDER BY datname`)
	if err != nil {
		return fmt.Errorf("embedded postgres: list the databases of %s: %w", c.dataDir, err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("embedded postgres: list the databases of %s: %w", c.dataDir, err)
	}
	if len(names) == 0 {
		return &halfMadeError{found: `no "postgres" database and none besides the templates (initdb stopped before its last step)`}
	}
	return fmt.Errorf(`embedded postgres: the cluster in %s has no "postgres" database but holds %s: mozi leaves it alone: create it again (as the cluster's user: echo 'CREATE DATABASE postgres' | %s --single -D %s template1), or move the directory away to start a new cluster`,
		c.dataDir, strings.Join(names, ", "), filepath.Join(c.binDir, "postgres"), c.dataDir)
}

// initdb makes a new cluster in a temporary directory next to PGDATA and
// renames it into place when initdb has finished, so that PGDATA is never
// half-made: an interrupted initdb leaves only a data.initdb-* directory,
// which the next start removes.
func (c *Cluster) initdb(ctx context.Context) (err error) {
	tmp, err := os.MkdirTemp(c.pgRoot, tempDataPrefix)
	if err != nil {
		return fmt.Errorf("embedded postgres: create initdb directory: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp) // best effort; the next start removes it otherwise
		}
	}()
	if c.user != nil {
		if err := os.Chown(tmp, c.user.uid, c.user.gid); err != nil {
			return fmt.Errorf("embedded postgres: give %s to user %s: %w", tmp, c.user.name, err)
		}
	}
	args := []string{"-D", tmp, "-U", Superuser, "--auth=trust", "--encoding=UTF8",
		"--locale=C", "--no-instructions"}
	if c.opts.NoSync {
		args = append(args, "--no-sync")
	}
	// SIGKILL when mozi dies: its cluster is to be discarded anyway.
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
		return fmt.Errorf("embedded postgres: initdb in %s failed: %w: %s", tmp, err, lastLines(out.String(), 5))
	}
	c.hook(stepInitdbDone)
	if err := os.Rename(tmp, c.dataDir); err != nil {
		return fmt.Errorf("embedded postgres: move the new cluster into place: %w", err)
	}
	if !c.opts.NoSync {
		if err := syncDir(c.pgRoot); err != nil {
			return fmt.Errorf("embedded postgres: sync %s: %w", c.pgRoot, err)
		}
	}
	c.hook(stepInitialised)
	return nil
}

// firstFile returns the first entry below dir that is not a directory, or
// "" when there is none.
func firstFile(dir string) (string, error) {
	var found string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			found, _ = filepath.Rel(dir, path)
			return fs.SkipAll
		}
		return nil
	})
	return found, err
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
