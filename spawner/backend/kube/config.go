package kube

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Config configures the Kubernetes backend.
type Config struct {
	// Kubeconfig is the path of a kubeconfig file ("": the in-cluster
	// service account's credentials).
	Kubeconfig string
	// Namespace is where Jobs, pods and Secrets are made (default: the
	// namespace of the in-cluster service account, else "default").
	Namespace string
	// Owner is this replica's id, as the ledger names lease owners.
	// Required.
	Owner string
	// Scope is this mozi's run scope: Sweep touches only Jobs of its
	// scope. Required.
	Scope string
	// RemoteURL is a repository's clone URL as pods reach it, without
	// credentials (e.g. http://gitea:3000/owner/name.git). Required.
	RemoteURL func(repo string) string
	// Image is the agent image for agents that name none.
	Image string
	// CheckoutImage runs the init step that clones the repository; it
	// needs /bin/sh and git (default: the agent's image).
	CheckoutImage string
	// PullPolicy of both images (default IfNotPresent).
	PullPolicy corev1.PullPolicy
	// HostNetwork runs pods in the node's network namespace (default
	// false).
	HostNetwork bool
	// TTLAfterFinished is how long a finished Job stays for inspection
	// (default 10m).
	TTLAfterFinished time.Duration
	// DeadlineGrace is added to a step's timeout for the Job's
	// activeDeadlineSeconds, so that mozi's own timeout acts first
	// (default 30s).
	DeadlineGrace time.Duration
	// ScheduleWait is how long a pod may stay unschedulable before Start
	// gives up with backend.ErrUnavailable (default 20s).
	ScheduleWait time.Duration
	// RequestTimeout bounds each API request that is not a stream
	// (default 15s).
	RequestTimeout time.Duration
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

func (c Config) withDefaults() Config {
	if c.Namespace == "" && c.Kubeconfig == "" {
		if b, err := os.ReadFile(serviceAccountNamespace); err == nil {
			c.Namespace = strings.TrimSpace(string(b))
		}
	}
	c.Namespace = cmp.Or(c.Namespace, "default")
	c.PullPolicy = cmp.Or(c.PullPolicy, corev1.PullIfNotPresent)
	c.TTLAfterFinished = cmp.Or(c.TTLAfterFinished, 10*time.Minute)
	c.DeadlineGrace = cmp.Or(c.DeadlineGrace, 30*time.Second)
	c.ScheduleWait = cmp.Or(c.ScheduleWait, 20*time.Second)
	c.RequestTimeout = cmp.Or(c.RequestTimeout, 15*time.Second)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.Owner == "" {
		errs = append(errs, errors.New("kubernetes backend: owner (this replica's id) is required"))
	}
	if c.Scope == "" {
		errs = append(errs, errors.New("kubernetes backend: scope is required"))
	}
	if c.RemoteURL == nil {
		errs = append(errs, errors.New("kubernetes backend: a remote URL function is required"))
	}
	switch c.PullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		errs = append(errs, fmt.Errorf("kubernetes backend: pull policy %q is not Always, IfNotPresent or Never", c.PullPolicy))
	}
	return errors.Join(errs...)
}

// restConfig loads the kubeconfig, or the in-cluster credentials when none
// is named.
func (c Config) restConfig() (*rest.Config, error) {
	if c.Kubeconfig == "" {
		rc, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("kubernetes backend: no kubeconfig given and not in a cluster: %w", err)
		}
		return rc, nil
	}
	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes backend: load kubeconfig %s: %w", c.Kubeconfig, err)
	}
	return rc, nil
}

// New returns the backend for cfg. It does not contact the cluster: an API
// server that is down at mozi's start makes runs wait, not mozi fail.
func New(cfg Config) (*Backend, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	rc, err := cfg.restConfig()
	if err != nil {
		return nil, err
	}
	rc.UserAgent = "mozi"
	// client-go's default (5/s, bursts of 10) is for controllers; each
	// run here makes a handful of requests at its start and end.
	rc.QPS, rc.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes backend: client: %w", err)
	}
	return &Backend{cfg: cfg, cs: cs}, nil
}
