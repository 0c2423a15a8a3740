package sandbox_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/spawner/backend"
	"github.com/moziplus/mozi/spawner/backend/local"
	"github.com/moziplus/mozi/spawner/backend/local/sandbox"
)

// EnvRequire makes a missing bwrap a failure instead of a skip (CI).
const EnvRequire = "MOZI_REQUIRE_SANDBOX"

// openDir is a temporary directory every user can traverse, as mozi's
// state directory is for the agents' user (t.TempDir is private to root).
func openDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mozi-sandbox-test-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func newSandbox(t *testing.T) *sandbox.Sandbox {
	t.Helper()
	sb, err := sandbox.New("", openDir(t))
	if err != nil {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("%s=1 but: %v", EnvRequire, err)
		}
		t.Skipf("no sandbox on this machine: %v", err)
	}
	return sb
}

// agentUser is who the agent runs as: as root, an unprivileged user (as
// mozi does); else mozi's own user.
func agentUser() *syscall.Credential {
	if os.Geteuid() != 0 {
		return nil
	}
	return &syscall.Credential{Uid: 65534, Gid: 65534, NoSetGroups: true}
}

// world is what mozi has on disk that an agent must not reach.
type world struct {
	dataDir   string // mozi's state: database, logs, other worktrees
	config    string // mozi's configuration file
	socket    string // a database socket
	ownTree   string // the agent's own worktree
	otherTree string
	home      string
}

func newWorld(t testing.TB) world {
	base := openDir(t)
	w := world{dataDir: filepath.Join(base, "state"), config: filepath.Join(base, "etc", "mozi.yaml")}
	w.ownTree = filepath.Join(w.dataDir, "workspaces", "trees", "acme", "widget", "1")
	w.otherTree = filepath.Join(w.dataDir, "workspaces", "trees", "acme", "gadget", "2")
	w.home = filepath.Join(w.dataDir, "agents", "coder1", "home")
	for _, d := range []string{w.ownTree, w.otherTree, w.home, filepath.Dir(w.config), filepath.Join(w.dataDir, "postgres", "run")} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	require.NoError(t, os.WriteFile(w.config, []byte("gitea: {token: s3cret-gitea-token}\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(w.otherTree, "secret.go"), []byte("package other\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(w.dataDir, "postgres", "postgres.log"), []byte("log\n"), 0o644))
	w.socket = filepath.Join(w.dataDir, "postgres", "run", ".s.PGSQL.5432")
	l, err := net.Listen("unix", w.socket)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	require.NoError(t, os.Chmod(w.socket, 0o777))
	if cred := agentUser(); cred != nil {
		for _, d := range []string{w.ownTree, w.home} {
			require.NoError(t, os.Chown(d, int(cred.Uid), int(cred.Gid)))
		}
	}
	return w
}

func (w world) spec() sandbox.Spec {
	return sandbox.Spec{Chdir: w.ownTree, Writable: []string{w.ownTree, w.home}, Hide: []string{w.dataDir, w.config}}
}

func runIn(t *testing.T, sb *sandbox.Sandbox, spec sandbox.Spec, limits sandbox.Limits, script string, env ...string) (string, error) {
	t.Helper()
	argv, err := sb.Command(spec, limits, []string{"/bin/sh", "-c", script})
	require.NoError(t, err)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp"}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: agentUser()}
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// An agent tries to read mozi's secrets: its environment through /proc,
// its configuration file, its data directory, another agent's worktree,
// the database socket. Each attempt fails.
func TestAgentCannotReachMozi(t *testing.T) {
	t.Setenv("MOZI_GITEA_TOKEN", "s3cret-gitea-token")
	t.Setenv("MOZI_WEBHOOK_SECRET", "s3cret-webhook")
	sb := newSandbox(t)
	w := newWorld(t)
	probes := []struct {
		name, script string
	}{
		{"mozi's environment by pid", fmt.Sprintf("cat /proc/%d/environ", os.Getpid())},
		{"the parent's environment", "cat /proc/$PPID/environ | tr '\\0' '\\n' | grep MOZI_"},
		{"any process's environment", "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep s3cret"},
		{"mozi's configuration file", "cat " + w.config},
		{"the data directory", "cat " + filepath.Join(w.dataDir, "postgres", "postgres.log")},
		{"another agent's worktree", "cat " + filepath.Join(w.otherTree, "secret.go")},
		{"the database socket", "test -S " + w.socket},
		{"the database socket by /proc", "ls /proc/1/root" + w.socket},
	}
	for _, p := range probes {
		t.Run(p.name, func(t *testing.T) {
			out, err := runIn(t, sb, w.spec(), sandbox.Limits{}, "echo sandbox-up; "+p.script, "GITEA_TOKEN=agent-own-token")
			require.True(t, strings.HasPrefix(out, "sandbox-up"), "the sandbox did not start: %s", out)
			assert.Error(t, err, "the probe succeeded: %s", out)
			assert.NotContains(t, out, "s3cret")
		})
	}

	t.Run("what the agent may do still works", func(t *testing.T) {
		out, err := runIn(t, sb, w.spec(), sandbox.Limits{},
			"echo ok > "+filepath.Join(w.ownTree, "f.txt")+" && echo home > $AGENT_HOME/x && echo tmp > /tmp/x && cat /etc/hostname >/dev/null; "+
				"test ! -w /usr && id -u && hostname",
			"AGENT_HOME="+w.home)
		require.NoError(t, err, out)
		assert.FileExists(t, filepath.Join(w.ownTree, "f.txt"))
		assert.Contains(t, out, "mozi-agent")
		if os.Geteuid() == 0 {
			assert.Contains(t, out, "65534", "as root, mozi never runs an agent as root")
		}
	})
}

// A run that times out takes every process it started with it, even one
// that left the process group with setsid; the sandbox dies with mozi's
// runner as well.
func TestTimeoutKillsEvenSetsidGrandchildren(t *testing.T) {
	sb := newSandbox(t)
	w := newWorld(t)
	marker := fmt.Sprintf("%06d", time.Now().UnixNano()%1000000)
	argv, err := sb.Command(w.spec(), sandbox.Limits{}, []string{"/bin/sh", "-c",
		"setsid sleep 1000." + marker + " & sleep 1001." + marker})
	require.NoError(t, err)
	stopped := runFor(t, agentUser(), w.ownTree, argv, []string{"PATH=/usr/bin:/bin", "HOME=" + w.home}, 700*time.Millisecond)
	assert.True(t, stopped, "the run was still going at its time limit")
	require.Eventually(t, func() bool { return !processWith(marker) }, 5*time.Second, 20*time.Millisecond,
		"a process of the run outlived it")

	// The control: without the sandbox, the same run leaves its setsid
	// grandchild behind (the group kill cannot reach it).
	bare := fmt.Sprintf("%06d", (time.Now().UnixNano()+1)%1000000)
	stopped = runFor(t, nil, w.ownTree, []string{"/bin/sh", "-c", "setsid sleep 1000." + bare + " & sleep 1001." + bare},
		[]string{"PATH=/usr/bin:/bin"}, 700*time.Millisecond)
	assert.True(t, stopped, "the control run was still going at its time limit")
	assert.True(t, processWith("1000."+bare), "the control run's grandchild should have survived")
	_ = exec.Command("pkill", "-f", "sleep 1000."+bare).Run()
}

// runFor runs argv (already wrapped in its sandbox, or not) on the local
// backend as user in dir, and stops it with a short grace after d, as the
// spawner does at a time limit. It reports whether the run was stopped.
func runFor(t *testing.T, user *syscall.Credential, dir string, argv, env []string, d time.Duration) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return runUntil(t, user, dir, argv, env, ctx.Done(), 200*time.Millisecond)
}

// runUntil runs argv on the local backend until it exits or stop closes;
// then it is stopped with grace. It reports whether it was stopped.
func runUntil(t *testing.T, user *syscall.Credential, dir string, argv, env []string, stop <-chan struct{}, grace time.Duration) bool {
	t.Helper()
	b := local.New(local.Config{StateDir: t.TempDir(), RunAs: user})
	run := backend.Run{TaskID: 1, Attempt: 1, Agent: backend.Agent{Login: "coder1", Workdir: dir}}
	pl, err := b.Prepare(context.Background(), run)
	require.NoError(t, err)
	defer pl.Release()
	proc, err := b.Start(context.Background(), pl, backend.Step{TaskID: 1, Attempt: 1, Agent: run.Agent, Argv: argv, Env: env,
		KillGrace: grace}, io.Discard)
	require.NoError(t, err)
	select {
	case <-proc.Done():
		return false
	case <-stop:
	}
	proc.Stop(grace)
	<-proc.Done()
	return true
}

// processWith reports whether a process whose command line contains s runs.
func processWith(s string) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), s) {
			stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if i := strings.LastIndexByte(string(stat), ')'); i > 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
				continue // a zombie is dead
			}
			return true
		}
	}
	return false
}

func TestLimitsApplyToEveryProcess(t *testing.T) {
	sb := newSandbox(t)
	w := newWorld(t)
	out, err := runIn(t, sb, w.spec(), sandbox.Limits{MemoryBytes: 512 << 20, CPUTime: 90 * time.Second, OpenFiles: 256},
		"ulimit -d; sh -c 'ulimit -t; ulimit -n'")
	require.NoError(t, err, out)
	assert.Equal(t, []string{fmt.Sprint(512 << 10), "90", "256"}, strings.Fields(out))
}

func TestMissingBwrapIsOneClearError(t *testing.T) {
	_, err := sandbox.New("/nonexistent/bwrap", t.TempDir())
	require.ErrorIs(t, err, sandbox.ErrUnavailable)
	assert.Contains(t, err.Error(), "apt-get install bubblewrap")
	assert.NotContains(t, err.Error(), "\n")
}

// A path the agents' user cannot reach anyway (inside root's own 0700
// home, say) needs no hiding: bwrap, running as that user, could not even
// mount over it, and the sandbox must still start.
func TestUnreachablePathsNeedNoHiding(t *testing.T) {
	cred := agentUser()
	if cred == nil {
		t.Skip("mozi runs agents as itself here: everything it hides is reachable")
	}
	sb := newSandbox(t)
	w := newWorld(t)
	private := filepath.Join(t.TempDir(), "home") // t.TempDir is 0700, root's
	require.NoError(t, os.MkdirAll(filepath.Join(private, ".ssh"), 0o700))
	spec := w.spec()
	spec.RunAs = cred
	spec.Hide = append(spec.Hide, filepath.Join(private, ".ssh"))
	out, err := runIn(t, sb, spec, sandbox.Limits{}, "echo up; ls "+private)
	assert.True(t, strings.HasPrefix(out, "up"), "the sandbox starts: %s", out)
	assert.Error(t, err, "and the private home is still out of reach: %s", out)
}

// A sandboxed agent that is stopped gets SIGTERM and its grace period, like
// an unsandboxed one: bwrap, the group's leader, would die of the group's
// SIGTERM and take the whole PID namespace with it at once (a git commit
// cut off that way leaves index.lock in the reused worktree). A setsid
// grandchild that ignores SIGTERM is still gone afterwards.
func TestStoppedSandboxedAgentGetsSIGTERM(t *testing.T) {
	sb := newSandbox(t)
	w := newWorld(t)
	marker := fmt.Sprintf("%06d", time.Now().UnixNano()%1000000)
	ready, stopped := filepath.Join(w.ownTree, "ready"), filepath.Join(w.ownTree, "stopped")
	script := "trap 'echo cleaned up > " + stopped + "; exit 0' TERM; " +
		"setsid sh -c 'trap \"\" TERM; sleep 1000." + marker + "' & " +
		"touch " + ready + "; sleep 1001." + marker + " & wait"
	argv, err := sb.Command(w.spec(), sandbox.Limits{}, []string{"/bin/sh", "-c", script})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Stop the run once its trap is set: no guess at how long bwrap
		// takes to start.
		for ctx.Err() == nil {
			if _, err := os.Stat(ready); err == nil {
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	// A grace period long enough for the trap; the run ends as soon as
	// the agent does.
	interrupted := runUntil(t, agentUser(), w.ownTree, argv, []string{"PATH=/usr/bin:/bin", "HOME=" + w.home}, ctx.Done(), 10*time.Second)
	assert.True(t, interrupted, "the run ended before it was stopped")
	data, err := os.ReadFile(stopped)
	require.NoError(t, err, "the agent never got SIGTERM")
	assert.Equal(t, "cleaned up\n", string(data))
	require.Eventually(t, func() bool { return !processWith(marker) }, 5*time.Second, 20*time.Millisecond,
		"a process of the run outlived it")
}
