//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/spawner/backend/container/podmantest"
)

// TestE2EContainerBackendReviewRoundThenMerge is the review round of
// TestE2EReviewRoundThenMerge with every agent's run in a container of a
// real podman: the worktree mounted at its path, the agent's own token
// only, its output, exit and usage handled as the local backend's.
func TestE2EContainerBackendReviewRoundThenMerge(t *testing.T) {
	t.Parallel()
	socket := podmantest.Start(t)
	// The agents are this test binary (in their homes, which are mounted):
	// the image holds its libraries and git.
	self, err := os.Executable()
	require.NoError(t, err)
	gitCore, err := exec.Command("git", "--exec-path").Output()
	require.NoError(t, err)
	image := podmantest.HostImage(t, socket, "localhost/mozi-e2e-agent:1", self, "git", strings.TrimSpace(string(gitCore)), "/bin/sh")
	w := newWorld(t, worldOptions{agents: reviewRoundAgents(""), tune: func(cfg map[string]any) {
		section(cfg, "backend")["kind"] = "container"
		section(cfg, "backend")["container"] = map[string]any{"socket": socket, "image": image}
	}})
	w.reviewRoundThenMerge("Add a farewell", "Please add a farewell file.", 4*time.Minute)
	w.checkRuns()
	w.waitRunsRecorded()
	w.checkAttemptsApart()
	for _, a := range w.agents {
		for _, line := range strings.Split(w.runsOf(a), "\n") {
			if strings.HasPrefix(line, "start ") {
				assert.Contains(t, line, "in=container", "agent %s ran outside its container", a.Login)
			}
		}
	}
	w.eventually("no container left", time.Minute, func() (bool, string) {
		left := podmantest.Containers(t, socket, "mozi.task")
		return len(left) == 0, strings.Join(left, ", ")
	})
}
