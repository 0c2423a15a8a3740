package kube

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/moziplus/mozi/spawner/backend"
)

const (
	agentContainerName    = "agent"
	checkoutContainerName = "checkout"
	workspaceVolume       = "workspace"
	moziVolume            = "mozi"

	secretPromptKey = "prompt"
	secretStdinKey  = "stdin"
)

// hostOnly are environment variables that describe mozi's host, not the
// pod: the image's own values apply instead.
var hostOnly = map[string]bool{"PATH": true, "HOME": true, "PWD": true, "OLDPWD": true, "TMPDIR": true, "SHLVL": true, "_": true}

// tokenVars are what the checkout's credential helper reads.
var tokenVars = map[string]bool{"GITEA_TOKEN": true, "GITEA_USER": true}

func labels(cfg Config, task int64, attempt int) map[string]string {
	return map[string]string{
		backend.LabelTask:    strconv.FormatInt(task, 10),
		backend.LabelAttempt: strconv.Itoa(attempt),
		backend.LabelOwner:   labelValue(cfg.Owner),
		backend.LabelScope:   labelValue(cfg.Scope),
	}
}

// objects builds the Secret and the Job of one attempt, both named name.
// Every value of the step's environment goes into the Secret and reaches
// the containers by secretKeyRef, so that neither spec shows one.
func (b *Backend) objects(name string, p *place, s backend.Step) (*corev1.Secret, *batchv1.Job, error) {
	image := s.Agent.Image
	if image == "" {
		image = b.cfg.Image
	}
	if image == "" {
		return nil, nil, fmt.Errorf("task %d: the agent names no image", s.TaskID)
	}
	if len(s.Argv) == 0 {
		return nil, nil, fmt.Errorf("task %d: no command", s.TaskID)
	}
	lab := labels(b.cfg, s.TaskID, s.Attempt)
	data := map[string][]byte{secretPromptKey: []byte(s.Prompt)}
	items := []corev1.KeyToPath{{Key: secretPromptKey, Path: strings.TrimPrefix(promptFile, moziDir+"/")}}
	if s.Stdin != nil {
		data[secretStdinKey] = s.Stdin
		items = append(items, corev1.KeyToPath{Key: secretStdinKey, Path: strings.TrimPrefix(stdinFile, moziDir+"/")})
	}

	// The last of duplicate names wins, as in os/exec.
	last := map[string]int{}
	for i, kv := range s.Env {
		k, _, _ := strings.Cut(kv, "=")
		last[k] = i
	}
	var env, tokenEnv []corev1.EnvVar
	for i, kv := range s.Env {
		k, v, _ := strings.Cut(kv, "=")
		if k == "" || last[k] != i || hostOnly[k] {
			continue
		}
		key := "env." + strconv.Itoa(i)
		data[key] = []byte(v)
		ev := corev1.EnvVar{Name: k, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}}}
		env = append(env, ev)
		if tokenVars[k] {
			tokenEnv = append(tokenEnv, ev)
		}
	}

	argv := s.Argv
	if s.Stdin != nil {
		// Kubernetes gives a container's stdin only to an attached client;
		// the image's shell redirects it from the Secret's file instead.
		argv = append([]string{"/bin/sh", "-c", `exec "$@" <` + stdinFile, "mozi-stdin"}, s.Argv...)
	}
	grace := int64(math.Ceil(s.KillGrace.Seconds()))
	agent := corev1.Container{
		Name:            agentContainerName,
		Image:           image,
		ImagePullPolicy: b.cfg.PullPolicy,
		Command:         argv,
		Env:             env,
		WorkingDir:      workspaceDir,
		VolumeMounts: []corev1.VolumeMount{
			{Name: workspaceVolume, MountPath: workspaceDir},
			{Name: moziVolume, MountPath: moziDir, ReadOnly: true},
		},
		Resources: resources(s.Agent.Limits),
	}
	mode := int32(0o444)
	pod := corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		// The agent gets no credentials for the cluster it runs in.
		AutomountServiceAccountToken:  new(false),
		EnableServiceLinks:            new(false),
		HostNetwork:                   b.cfg.HostNetwork,
		TerminationGracePeriodSeconds: &grace,
		Containers:                    []corev1.Container{agent},
		Volumes: []corev1.Volume{
			{Name: workspaceVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: moziVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: name, Items: items, DefaultMode: &mode}}},
		},
	}
	if b.cfg.HostNetwork {
		pod.DNSPolicy = corev1.DNSClusterFirstWithHostNet
	}
	if p.run.Agent.Worktree {
		pod.InitContainers = []corev1.Container{b.checkoutContainer(p.run, image, tokenEnv)}
	}
	ttl := int32(b.cfg.TTLAfterFinished.Seconds())
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.cfg.Namespace, Labels: lab},
		Spec: batchv1.JobSpec{
			BackoffLimit:            new(int32(0)),
			Parallelism:             new(int32(1)),
			Completions:             new(int32(1)),
			TTLSecondsAfterFinished: &ttl,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lab},
				Spec:       pod,
			},
		},
	}
	if s.Timeout > 0 {
		job.Spec.ActiveDeadlineSeconds = new(int64(math.Ceil((s.Timeout + b.cfg.DeadlineGrace).Seconds())))
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.cfg.Namespace, Labels: lab},
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
	return secret, job, nil
}

// resources maps what Kubernetes can bound of an agent's limits: memory.
// CPU time, processes and open files have no per-container field.
func resources(l backend.Limits) corev1.ResourceRequirements {
	if l.MemoryBytes <= 0 {
		return corev1.ResourceRequirements{}
	}
	m := *resource.NewQuantity(l.MemoryBytes, resource.BinarySI)
	// Requesting what the limit allows keeps the scheduler from placing a
	// pod where its memory is not there: a full cluster holds the task.
	return corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{corev1.ResourceMemory: m},
		Requests: corev1.ResourceList{corev1.ResourceMemory: m},
	}
}
