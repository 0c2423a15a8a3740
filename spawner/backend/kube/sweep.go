package kube

import (
	"context"
	"fmt"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/moziplus/mozi/spawner/backend"
)

// Sweep implements backend.Backend: it deletes this scope's Jobs that no run
// holds (their task's lease is gone, or the task is unknown to the ledger)
// and those of an attempt or a lease owner that is no longer the task's (a
// dead replica's), with their pods;
// and Secrets a start left without a Job. A live Job of the running
// attempt and owner is never touched, whichever replica owns it.
func (b *Backend) Sweep(ctx context.Context, l backend.Ledger) (backend.SweepResult, error) {
	var res backend.SweepResult
	sel := metav1.ListOptions{LabelSelector: backend.LabelScope + "=" + labelValue(b.cfg.Scope)}
	jobs, err := b.cs.BatchV1().Jobs(b.cfg.Namespace).List(ctx, sel)
	if err != nil {
		return res, apiError(ctx, "list jobs to sweep", err)
	}
	secrets, err := b.cs.CoreV1().Secrets(b.cfg.Namespace).List(ctx, sel)
	if err != nil {
		return res, apiError(ctx, "list secrets to sweep", err)
	}
	var ids []int64
	for _, j := range jobs.Items {
		if id, err := strconv.ParseInt(j.Labels[backend.LabelTask], 10, 64); err == nil {
			ids = append(ids, id)
		}
	}
	for _, s := range secrets.Items {
		if id, err := strconv.ParseInt(s.Labels[backend.LabelTask], 10, 64); err == nil && len(s.OwnerReferences) == 0 {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return res, nil
	}
	ends, err := l.TaskEnds(ctx, ids)
	if err != nil {
		return res, fmt.Errorf("sweep kubernetes jobs: %w", err)
	}
	bg := metav1.DeletePropagationBackground
	for _, j := range jobs.Items {
		if !stale(j.Labels, ends) {
			continue
		}
		err := b.cs.BatchV1().Jobs(b.cfg.Namespace).Delete(ctx, j.Name, metav1.DeleteOptions{PropagationPolicy: &bg})
		if err != nil && !apierrors.IsNotFound(err) {
			return res, apiError(ctx, "delete job "+j.Name, err)
		}
		if finished(&j) {
			res.Removed++
		} else {
			res.Ended++
			b.cfg.Logger.Info("kubernetes job of a dead run deleted", "job", j.Name, "task_id", j.Labels[backend.LabelTask],
				"attempt", j.Labels[backend.LabelAttempt], "owner", j.Labels[backend.LabelOwner])
		}
	}
	for _, s := range secrets.Items {
		if len(s.OwnerReferences) != 0 || !stale(s.Labels, ends) {
			continue
		}
		err := b.cs.CoreV1().Secrets(b.cfg.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return res, apiError(ctx, "delete secret "+s.Name, err)
		}
		res.Removed++
	}
	return res, nil
}

// stale: what carries these labels belongs to no live run.
func stale(l map[string]string, ends map[int64]backend.TaskEnd) bool {
	id, err := strconv.ParseInt(l[backend.LabelTask], 10, 64)
	if err != nil {
		return false // not mozi's to judge
	}
	e, ok := ends[id]
	if !ok || e.LeaseOwner == "" {
		return true // its task is gone, or no run holds it
	}
	// A run whose task ended meanwhile (merged while its agent was still
	// posting) keeps its lease until its outcome is recorded: it is live.
	return l[backend.LabelAttempt] != strconv.Itoa(e.RunningAttempt) || l[backend.LabelOwner] != labelValue(e.LeaseOwner)
}

func finished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == "True" {
			return true
		}
	}
	return false
}
