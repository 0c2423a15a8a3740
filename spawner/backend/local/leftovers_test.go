package local

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A process a run left behind — here one that left its group and session,
// as a sandbox's inner process may when mozi dies at its start — is ended
// by the next start of the same mozi, and a process of another mozi's
// runs is not.
func TestEndLeftoverRunsEndsThisMozisRunsOnly(t *testing.T) {
	scope, other := RunScope(t.TempDir()), RunScope(t.TempDir())
	spawn := func(s string) int {
		pidFile := t.TempDir() + "/pid"
		// setsid and a double fork: the process outlives its parent in a
		// session of its own, reparented to init.
		cmd := exec.Command("/bin/sh", "-c", `setsid /bin/sh -c 'echo $$ > "$0"; exec sleep 60' "$1" &`, "sh", pidFile)
		cmd.Env = []string{"PATH=/usr/bin:/bin", RunEnv + "=" + runMark(s, 7, 1)}
		require.NoError(t, cmd.Run())
		var pid int
		require.Eventually(t, func() bool {
			data, err := os.ReadFile(pidFile)
			pid, _ = strconv.Atoi(strings.TrimSpace(string(data)))
			return err == nil && pid > 0
		}, 10*time.Second, 10*time.Millisecond)
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
		return pid
	}
	mine, theirs := spawn(scope), spawn(other)

	ended, err := EndLeftoverRuns(scope)
	require.NoError(t, err)
	assert.Equal(t, []int{mine}, ended)
	require.Eventually(t, func() bool { return !alive(mine) }, 10*time.Second, 10*time.Millisecond, "ended")
	assert.True(t, alive(theirs), "another mozi's run is left alone")
}

// alive reports whether pid is a live process (not gone, not a zombie).
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}
