package kube

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/moziplus/mozi/spawner/backend"
)

// TestConcludeAKillAtTheDeadline: the Job controller's kill at
// activeDeadlineSeconds can reach the pod's status before its deletion
// does; the Job's condition says it was the deadline, not the agent.
func TestConcludeAKillAtTheDeadline(t *testing.T) {
	t.Parallel()
	deadlineCondition := []batchv1.JobCondition{{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue,
		Reason: batchv1.JobReasonDeadlineExceeded}}
	tests := []struct {
		name       string
		exitCode   int32
		conditions []batchv1.JobCondition
		want       backend.Exit
	}{
		{"killed, the Job past its deadline", 137, deadlineCondition,
			backend.Exit{Code: -1, Deadline: true, Why: "the Job's deadline of 2s passed"}},
		{"terminated, the Job past its deadline", 143, deadlineCondition,
			backend.Exit{Code: -1, Deadline: true, Why: "the Job's deadline of 2s passed"}},
		{"killed, no deadline on the Job", 137, nil, backend.Exit{Code: 137, Why: "exited with status 137"}},
		{"the agent's own failure", 3, deadlineCondition, backend.Exit{Code: 3, Why: "exited with status 3"}},
		{"the agent's success", 0, nil, backend.Exit{Code: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "mozi-1-1-abcde", Namespace: "mozi"},
				Spec: batchv1.JobSpec{ActiveDeadlineSeconds: new(int64(2))}, Status: batchv1.JobStatus{Conditions: tt.conditions}}
			b := &Backend{cfg: Config{RequestTimeout: 5 * time.Second}, cs: fake.NewClientset(job)}
			p := newProcess(b, job, "mozi-1-1-abcde-xyz", backend.Step{}, nil)
			pod := &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
				Name: agentContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
					ExitCode: tt.exitCode, FinishedAt: metav1.Now()}}}}}}
			assert.Equal(t, tt.want, p.conclude(pod, false, ""))
		})
	}
}
