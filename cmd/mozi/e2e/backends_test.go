//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/spawner/backend/container/podmantest"
	"github.com/moziplus/mozi/spawner/backend/kube/kubetest"
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

// TestE2EKubernetesBackendReviewRoundThenMerge is the same review round
// with every agent's run a Job of a real one-node Kubernetes cluster: the
// checkout made in the pod by its init step with the agent's token, the
// output from the pod's log, each Job labelled with its task and attempt.
func TestE2EKubernetesBackendReviewRoundThenMerge(t *testing.T) {
	t.Parallel()
	c := kubetest.Start(t)
	// The agents are this test binary, in the image at its own path.
	self, err := os.Executable()
	require.NoError(t, err)
	image := kubetest.ImageWith(t, "docker.io/mozi/e2e-agent:1", self)
	w := newWorld(t, worldOptions{agents: reviewRoundAgents(""), tune: func(cfg map[string]any) {
		section(cfg, "backend")["kind"] = "kubernetes"
		section(cfg, "backend")["kubernetes"] = map[string]any{"kubeconfig": c.Kubeconfig, "namespace": c.Namespace,
			"image": image, "pull_policy": "Never", "host_network": true, "ttl_after_finished": "1h"}
		for _, a := range cfg["agents"].([]any) {
			a.(map[string]any)["command"] = []string{self}
		}
	}})
	w.reviewRoundThenMerge("Add a farewell", "Please add a farewell file.", 5*time.Minute)
	w.waitRunsRecorded()
	w.checkAttemptsApart()

	// Every run was a Job: mozi says so as it starts each, each attempt's
	// log is the pod's output, and the sweep removes the Jobs of the
	// finished tasks.
	starts := strings.Count(w.mozi.log.String(), `msg="agent started"`)
	assert.Equal(t, starts, strings.Count(w.mozi.log.String(), "backend=kubernetes dir=/workspace"), "every run on the cluster")
	for _, tk := range w.tasks() {
		for _, a := range w.attemptsOf(tk.ID) {
			log, err := os.ReadFile(a.LogPath)
			require.NoError(t, err)
			assert.Contains(t, string(log), "e2e agent "+tk.Agent, "task %d attempt %d: the pod's output", tk.ID, a.Attempt)
		}
	}
	w.eventually("the finished tasks' Jobs swept", time.Minute, func() (bool, string) {
		jobs, err := c.Client.BatchV1().Jobs(c.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "mozi.task"})
		if err != nil {
			return false, err.Error()
		}
		var left []string
		for _, j := range jobs.Items {
			if len(j.Spec.Template.Spec.Containers) > 0 && j.Spec.Template.Spec.Containers[0].Image == image {
				left = append(left, j.Name)
			}
		}
		return len(left) == 0, strings.Join(left, ", ")
	})
}
