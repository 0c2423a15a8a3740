package kube

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/moziplus/mozi/spawner/backend"
)

// jobName is unique per start, so that a retried start of one attempt
// never meets what an earlier try left (the sweep removes that).
func jobName(task int64, attempt int) string {
	const letters = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = letters[int(b[i])%len(letters)]
	}
	return fmt.Sprintf("mozi-%d-%d-%s", task, attempt, b)
}

// Start implements backend.Backend: it makes the attempt's Secret and Job
// and returns once the pod is placed on a node. A pod that stays
// unschedulable past ScheduleWait, like an API server that does not
// answer, is backend.ErrUnavailable, and what was made is deleted.
func (b *Backend) Start(ctx context.Context, p backend.Place, s backend.Step, out io.Writer) (backend.Process, error) {
	pl, ok := p.(*place)
	if !ok {
		return nil, fmt.Errorf("start task %d: place %T is not the kubernetes backend's", s.TaskID, p)
	}
	name := jobName(s.TaskID, s.Attempt)
	secret, job, err := b.objects(name, pl, s)
	if err != nil {
		return nil, fmt.Errorf("start task %d: %w", s.TaskID, err)
	}
	ns := b.cfg.Namespace
	rctx, cancel := context.WithTimeout(ctx, b.cfg.RequestTimeout)
	_, err = b.cs.CoreV1().Secrets(ns).Create(rctx, secret, metav1.CreateOptions{})
	cancel()
	if err != nil {
		return nil, apiError(ctx, fmt.Sprintf("create secret %s/%s for task %d", ns, name, s.TaskID), err)
	}
	rctx, cancel = context.WithTimeout(ctx, b.cfg.RequestTimeout)
	created, err := b.cs.BatchV1().Jobs(ns).Create(rctx, job, metav1.CreateOptions{})
	cancel()
	if err != nil {
		b.remove(name, false)
		return nil, apiError(ctx, fmt.Sprintf("create job %s/%s for task %d", ns, name, s.TaskID), err)
	}
	if err := b.ownSecret(ctx, created); err != nil {
		b.remove(name, true)
		return nil, apiError(ctx, fmt.Sprintf("hand secret %s/%s to its job for task %d", ns, name, s.TaskID), err)
	}
	pod, err := b.waitScheduled(ctx, created)
	if err != nil {
		b.remove(name, true)
		return nil, fmt.Errorf("start task %d: %w", s.TaskID, err)
	}
	b.cfg.Logger.Info("kubernetes job started", "task_id", s.TaskID, "attempt", s.Attempt, "job", name, "node", pod.Spec.NodeName)
	pr := newProcess(b, created, pod.Name, s, out)
	go pr.run()
	return pr, nil
}

// ownSecret makes the Job the Secret's owner, so that the garbage
// collector deletes the Secret with the Job (after its TTL, or a Stop).
func (b *Backend) ownSecret(ctx context.Context, job *batchv1.Job) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": []metav1.OwnerReference{{
		APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID,
	}}}})
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, b.cfg.RequestTimeout)
	defer cancel()
	_, err = b.cs.CoreV1().Secrets(job.Namespace).Patch(rctx, job.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// remove deletes what a failed start made, on its own deadline: the
// start's context may be what ended.
func (b *Backend) remove(name string, job bool) {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.RequestTimeout)
	defer cancel()
	bg := metav1.DeletePropagationBackground
	if job {
		err := b.cs.BatchV1().Jobs(b.cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg})
		if err != nil && !apierrors.IsNotFound(err) {
			b.cfg.Logger.Warn("delete job after a failed start", "job", name, "err", err)
		}
	}
	err := b.cs.CoreV1().Secrets(b.cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		b.cfg.Logger.Warn("delete secret after a failed start", "job", name, "err", err)
	}
}

// waitScheduled waits until the Job's pod is on a node (or already over).
func (b *Backend) waitScheduled(ctx context.Context, job *batchv1.Job) (*corev1.Pod, error) {
	wctx, cancel := context.WithTimeout(ctx, b.cfg.ScheduleWait)
	defer cancel()
	var found *corev1.Pod
	var lastErr error
	opts := metav1.ListOptions{LabelSelector: batchv1.ControllerUidLabel + "=" + string(job.UID)}
	err := b.followPods(wctx, opts, func(pods map[string]*corev1.Pod) bool {
		for _, p := range pods {
			found = p
			if p.Spec.NodeName != "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				return true
			}
		}
		return false
	}, func(err error) { lastErr = err })
	if err == nil {
		return found, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		return nil, err
	}
	wait := b.cfg.ScheduleWait.Round(time.Second)
	switch {
	case lastErr != nil:
		return nil, fmt.Errorf("%w: the API server did not answer for %s: %w", backend.ErrUnavailable, wait, lastErr)
	case found == nil:
		return nil, fmt.Errorf("%w: job %s made no pod in %s", backend.ErrUnavailable, job.Name, wait)
	}
	why := "not scheduled"
	for _, c := range found.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
			why = c.Reason + ": " + c.Message
		}
	}
	return nil, fmt.Errorf("%w: pod %s not on a node after %s (%s)", backend.ErrUnavailable, found.Name, wait, why)
}
