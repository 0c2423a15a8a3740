package embedded

import (
	"io"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A stop signal that reaches postgres before it installs its handlers is
// lost when postgres inherited it ignored; the stop sends it again rather
// than waiting out the whole fast-shutdown wait and escalating.
func TestStopResendsASignalLostDuringStartUp(t *testing.T) {
	ready := t.TempDir() + "/ready"
	// Like an early postmaster: SIGINT ignored at first, handled once
	// "started" (the file tells the test the ignoring phase has begun).
	cmd := exec.Command("sh", "-c", `trap '' INT; : > "$1"; sleep 1; trap 'exit 0' INT; while :; do sleep 0.1; done`, "sh", ready)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	pm := &postmaster{cmd: cmd, exited: make(chan struct{})}
	go func() { pm.err = cmd.Wait(); close(pm.exited) }()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-pm.exited })
	require.Eventually(t, func() bool { _, err := os.Stat(ready); return err == nil },
		10*time.Second, 10*time.Millisecond)

	c := &Cluster{pm: pm, logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	require.True(t, c.signalUntilExit(cmd.Process.Pid, syscall.SIGINT, 20*time.Second),
		"the first SIGINT was ignored; a later one stops it within the fast-shutdown wait")
}
