package embedded

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeBinDir makes dir/bin with executable initdb and postgres stubs.
func fakeBinDir(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	for _, name := range []string{"initdb", "postgres"} {
		require.NoError(t, os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), 0o755))
	}
	return bin
}

func TestFindBinDirPrefersPathThenNewestDebianVersion(t *testing.T) {
	root := t.TempDir()
	for _, v := range []string{"9.6", "13", "16", "notaversion"} {
		fakeBinDir(t, filepath.Join(root, v))
	}
	old := debianRoot
	debianRoot = root
	t.Cleanup(func() { debianRoot = old })

	t.Setenv("PATH", t.TempDir())
	dir, err := findBinDir("")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(root, "16", "bin"), dir, "newest major first, 16 > 13 > 9.6")

	onPath := fakeBinDir(t, t.TempDir())
	t.Setenv("PATH", onPath)
	dir, err = findBinDir("")
	require.NoError(t, err)
	assert.Equal(t, onPath, dir, "PATH wins")
}

func TestMissingBinariesSayWhatToInstall(t *testing.T) {
	old := debianRoot
	debianRoot = t.TempDir()
	t.Cleanup(func() { debianRoot = old })
	t.Setenv("PATH", t.TempDir())

	state := reachableDir(t)
	_, err := Start(context.Background(), Options{StateDir: state})
	require.ErrorIs(t, err, ErrNoBinaries)
	assert.Contains(t, err.Error(), "apt-get install postgresql")
	assert.Contains(t, err.Error(), "MOZI_DATABASE_URL")
}

func TestSecondLockOnAStateDirFails(t *testing.T) {
	// Not parallel: a process forked by another test holds a copy of every
	// descriptor, the lock's too, until it execs and close-on-exec drops it.
	dir := t.TempDir()
	first, err := lockStateDir(dir)
	require.NoError(t, err)
	_, err = lockStateDir(dir)
	require.ErrorIs(t, err, ErrInUse)
	assert.Contains(t, err.Error(), "pass a different --data-dir")
	require.NoError(t, first.Close())
	var again *os.File
	require.Eventually(t, func() bool {
		again, err = lockStateDir(dir)
		return err == nil
	}, 5*time.Second, 10*time.Millisecond, "the lock is free once its holder closes it")
	again.Close()
}

func TestStateDirResolution(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if os.Geteuid() == 0 {
		// As root the per-user default moves when postgres cannot reach it;
		// an explicit directory is always kept.
		dir, _, err := StateDir("/srv/mozi-state", env(nil), "")
		require.NoError(t, err)
		assert.Equal(t, "/srv/mozi-state", dir)
		return
	}
	dir, note, err := StateDir("", env(map[string]string{"XDG_STATE_HOME": "/x/state", "HOME": "/home/u"}), "")
	require.NoError(t, err)
	assert.Equal(t, "/x/state/mozi", dir)
	assert.Empty(t, note)
	dir, _, err = StateDir("", env(map[string]string{"HOME": "/home/u"}), "")
	require.NoError(t, err)
	assert.Equal(t, "/home/u/.local/state/mozi", dir)
	dir, _, err = StateDir("/srv/mozi-state", env(nil), "")
	require.NoError(t, err)
	assert.Equal(t, "/srv/mozi-state", dir)
}

func TestRootStateDirMovesWhenUnreachable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root runs PostgreSQL as another user")
	}
	if _, err := resolveRunUser(""); err != nil {
		t.Skip("no postgres user on this machine")
	}
	home := t.TempDir() // 0700, like /root
	dir, note, err := StateDir("", func(k string) string {
		if k == "HOME" {
			return home
		}
		return ""
	}, "")
	require.NoError(t, err)
	assert.Equal(t, SystemStateDir, dir)
	assert.Contains(t, note, "not reachable by user postgres")
}

func TestVersionMismatchIsExplained(t *testing.T) {
	if testing.Short() {
		t.Skip("runs postgres --version")
	}
	state := reachableDir(t)
	data := filepath.Join(state, "postgres", "data")
	require.NoError(t, os.MkdirAll(data, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(data, "PG_VERSION"), []byte("9\n"), 0o600))
	_, err := Start(context.Background(), Options{StateDir: state})
	if err != nil && !assert.NotErrorIs(t, err, ErrNoBinaries) {
		return
	}
	require.Error(t, err)
	assert.Contains(t, err.Error(), "was created by PostgreSQL 9")
}

// reachableDir is a temporary directory that an unprivileged postgres user
// can traverse when the tests run as root (t.TempDir's parent is 0700).
func reachableDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mozi-embedded-test-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
