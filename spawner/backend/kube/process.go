package kube

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/moziplus/mozi/spawner/backend"
)

// cannotStart are the waiting reasons of a container that will not start
// however long one waits.
var cannotStart = map[string]bool{
	"ErrImageNeverPull": true, "InvalidImageName": true, "ErrImagePull": true, "ImagePullBackOff": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
}

// process is one attempt's Job, followed through its pod.
type process struct {
	b       *Backend
	job     *batchv1.Job
	pod     string
	step    backend.Step
	out     io.Writer
	done    chan struct{}
	exit    backend.Exit
	ctx     context.Context // ends the following when the process is given up
	cancel  context.CancelFunc
	mu      sync.Mutex
	stopped bool
	stopOne sync.Once
}

func newProcess(b *Backend, job *batchv1.Job, pod string, s backend.Step, out io.Writer) *process {
	ctx, cancel := context.WithCancel(context.Background())
	return &process{b: b, job: job, pod: pod, step: s, out: out, done: make(chan struct{}), ctx: ctx, cancel: cancel}
}

func (p *process) Done() <-chan struct{} { return p.done }

func (p *process) Exit() backend.Exit { return p.exit }

// Stop implements backend.Process: the pod is deleted with grace (the
// Job's deletion alone would give its pod the default grace) and the Job
// with it. When the API server cannot be reached to stop it, the process
// is given up after grace and a margin, with Why saying so.
func (p *process) Stop(grace time.Duration) {
	p.stopOne.Do(func() {
		p.mu.Lock()
		p.stopped = true
		p.mu.Unlock()
		go p.stop(grace)
	})
}

func (p *process) stop(grace time.Duration) {
	secs := int64(math.Ceil(grace.Seconds()))
	bg := metav1.DeletePropagationBackground
	giveUp := time.NewTimer(grace + 30*time.Second)
	defer giveUp.Stop()
	for {
		// Not p.ctx: following ends as soon as the pod is gone, and the
		// Job's deletion must still go through.
		ctx, cancel := context.WithTimeout(context.Background(), p.b.cfg.RequestTimeout)
		err := p.b.cs.CoreV1().Pods(p.job.Namespace).Delete(ctx, p.pod, metav1.DeleteOptions{GracePeriodSeconds: &secs})
		if err == nil || apierrors.IsNotFound(err) {
			err = p.b.cs.BatchV1().Jobs(p.job.Namespace).Delete(ctx, p.job.Name, metav1.DeleteOptions{
				GracePeriodSeconds: &secs, PropagationPolicy: &bg})
		}
		cancel()
		if err == nil || apierrors.IsNotFound(err) {
			return
		}
		p.b.cfg.Logger.Warn("stop kubernetes job", "task_id", p.step.TaskID, "job", p.job.Name, "err", err)
		select {
		case <-p.done:
			return
		case <-giveUp.C:
			p.giveUp(fmt.Sprintf("stopped, but the API server did not answer to delete job %s: %v", p.job.Name, err))
			return
		case <-time.After(time.Second):
		}
	}
}

// giveUp ends the following with why.
func (p *process) giveUp(why string) {
	p.mu.Lock()
	if p.exit.Why == "" {
		p.exit = backend.Exit{Code: -1, Why: why}
	}
	p.mu.Unlock()
	p.cancel()
}

func (p *process) wasStopped() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopped
}

// run follows the pod to its end, streaming the agent's log into out
// once its container has started.
func (p *process) run() {
	defer close(p.done)
	defer p.cancel()
	var (
		last      *corev1.Pod
		gone      bool
		streaming bool
		streamEnd = make(chan struct{})
		failing   string
		warned    bool
	)
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", p.pod).String()}
	err := p.b.followPods(p.ctx, opts, func(pods map[string]*corev1.Pod) bool {
		pod, ok := pods[p.pod]
		if !ok {
			gone = true
			return true
		}
		last = pod
		if !streaming && agentStarted(pod) {
			streaming = true
			go p.stream(streamEnd)
		}
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			return true
		}
		if why := stuck(pod); why != "" && failing == "" && pod.DeletionTimestamp == nil {
			failing = why
			p.Stop(0)
		}
		return false
	}, func(err error) {
		if !warned {
			warned = true
			p.b.cfg.Logger.Warn("follow kubernetes pod", "task_id", p.step.TaskID, "pod", p.pod, "err", err)
		}
	})
	if streaming {
		// The log stream ends with the container; a pod deleted under it
		// may leave the stream waiting on a kubelet that is gone.
		select {
		case <-streamEnd:
		case <-time.After(30 * time.Second):
			p.cancel()
			<-streamEnd
		}
	}
	p.mu.Lock()
	givenUp := p.exit.Why != ""
	p.mu.Unlock()
	if err != nil || givenUp {
		if !givenUp {
			p.giveUp(fmt.Sprintf("following pod %s failed: %v", p.pod, err))
		}
		return
	}
	exit := p.conclude(last, gone, failing)
	p.mu.Lock()
	p.exit = exit
	p.mu.Unlock()
}

// stream copies the agent container's log into out.
func (p *process) stream(end chan<- struct{}) {
	defer close(end)
	req := p.b.cs.CoreV1().Pods(p.job.Namespace).GetLogs(p.pod, &corev1.PodLogOptions{Container: agentContainerName, Follow: true})
	rc, err := req.Stream(p.ctx)
	if err != nil {
		if p.ctx.Err() == nil {
			p.b.cfg.Logger.Warn("stream kubernetes pod log", "task_id", p.step.TaskID, "pod", p.pod, "err", err)
		}
		return
	}
	defer func() { _ = rc.Close() }()
	if _, err := io.Copy(p.out, rc); err != nil && p.ctx.Err() == nil {
		p.b.cfg.Logger.Warn("stream kubernetes pod log", "task_id", p.step.TaskID, "pod", p.pod, "err", err)
	}
}

func agentStarted(pod *corev1.Pod) bool {
	for _, c := range pod.Status.ContainerStatuses {
		if c.Name == agentContainerName && (c.State.Running != nil || c.State.Terminated != nil) {
			return true
		}
	}
	return false
}

// stuck says why a container of pod will never start ("" when it may).
func stuck(pod *corev1.Pod) string {
	all := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	for _, c := range all {
		if w := c.State.Waiting; w != nil && cannotStart[w.Reason] {
			return fmt.Sprintf("container %s cannot start: %s: %s", c.Name, w.Reason, w.Message)
		}
	}
	return ""
}

// conclude says how the attempt ended from the last state of its pod.
func (p *process) conclude(pod *corev1.Pod, gone bool, failing string) backend.Exit {
	if failing != "" {
		return backend.Exit{Code: -1, Why: failing}
	}
	var deadline backend.Exit
	if pod != nil {
		for _, c := range pod.Status.InitContainerStatuses {
			if t := c.State.Terminated; c.Name == checkoutContainerName && t != nil && t.ExitCode != 0 {
				return backend.Exit{Code: -1, Why: "checkout failed: " + p.checkoutTail()}
			}
		}
		if t := agentTerminated(pod); t != nil && !deletedBefore(pod, t) && !(killed(t) && p.deadlineExit(&deadline)) {
			return exitOf(t)
		}
	}
	if deadline.Deadline || p.deadlineExit(&deadline) {
		return deadline
	}
	if p.wasStopped() {
		return backend.Exit{Code: -1, Why: "stopped: the Job was deleted"}
	}
	if gone || pod != nil && pod.DeletionTimestamp != nil {
		return backend.Exit{Code: -1, Why: "the Job was deleted"}
	}
	return backend.Exit{Code: -1, Why: fmt.Sprintf("pod %s ended (%s) without the agent's exit status", p.pod, pod.Status.Phase)}
}

func agentTerminated(pod *corev1.Pod) *corev1.ContainerStateTerminated {
	for _, c := range pod.Status.ContainerStatuses {
		if c.Name == agentContainerName && c.State.Terminated != nil {
			return c.State.Terminated
		}
	}
	return nil
}

// deletedBefore: the pod's deletion was asked for before the container
// ended, so its status is that of a kill, not of the agent.
func deletedBefore(pod *corev1.Pod, t *corev1.ContainerStateTerminated) bool {
	if pod.DeletionTimestamp == nil {
		return false
	}
	asked := pod.DeletionTimestamp.Time
	if pod.DeletionGracePeriodSeconds != nil {
		asked = asked.Add(-time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second)
	}
	// Container times have a second's precision.
	return !t.FinishedAt.Time.Before(asked.Add(-time.Second))
}

func exitOf(t *corev1.ContainerStateTerminated) backend.Exit {
	e := backend.Exit{Code: int(t.ExitCode)}
	switch {
	case t.Reason == "OOMKilled":
		e.Code, e.Why = -1, "killed: out of memory (the agent's memory limit)"
	case t.ExitCode != 0:
		e.Why = fmt.Sprintf("exited with status %d", t.ExitCode)
	}
	return e
}

// killed: the agent ended by SIGKILL or SIGTERM. The Job controller's
// kill at activeDeadlineSeconds can be seen in the pod before its
// deletion is (seen in CI under load), so such an exit asks the Job.
func killed(t *corev1.ContainerStateTerminated) bool { return t.ExitCode == 137 || t.ExitCode == 143 }

// deadlineExit fills e when the Job's deadline ended the run.
func (p *process) deadlineExit(e *backend.Exit) bool {
	ok, secs := p.deadlinePassed()
	if ok {
		*e = backend.Exit{Code: -1, Deadline: true, Why: fmt.Sprintf("the Job's deadline of %ds passed", secs)}
	}
	return ok
}

// deadlinePassed reads the Job's conditions: the Job controller deletes
// the pod of a Job past its activeDeadlineSeconds and says so there.
func (p *process) deadlinePassed() (bool, int64) {
	if p.job.Spec.ActiveDeadlineSeconds == nil {
		return false, 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.b.cfg.RequestTimeout)
	defer cancel()
	j, err := p.b.cs.BatchV1().Jobs(p.job.Namespace).Get(ctx, p.job.Name, metav1.GetOptions{})
	if err != nil {
		return false, 0
	}
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobFailed || c.Type == batchv1.JobFailureTarget) && c.Status == corev1.ConditionTrue &&
			c.Reason == batchv1.JobReasonDeadlineExceeded {
			return true, *p.job.Spec.ActiveDeadlineSeconds
		}
	}
	return false, 0
}

// checkoutTail is the last lines the checkout step wrote: git's error and
// the script's own line.
func (p *process) checkoutTail() string {
	ctx, cancel := context.WithTimeout(context.Background(), p.b.cfg.RequestTimeout)
	defer cancel()
	tail := int64(5)
	b, err := p.b.cs.CoreV1().Pods(p.job.Namespace).GetLogs(p.pod, &corev1.PodLogOptions{
		Container: checkoutContainerName, TailLines: &tail}).DoRaw(ctx)
	if err != nil {
		return fmt.Sprintf("(its log could not be read: %v)", err)
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return "(it printed nothing)"
	}
	return strings.Join(lines, "; ")
}
