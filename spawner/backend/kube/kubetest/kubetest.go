// Package kubetest gives tests a real Kubernetes cluster: the one-node
// cluster of .ci/kube-cluster, started once per test binary (or one
// already up, named by MOZI_TEST_KUBECONFIG), with a test image imported
// and a namespace of the binary's own.
//
// Without a cluster the tests skip with the reason; under CI=true or
// MOZI_REQUIRE_KUBERNETES=1 they fail instead.
package kubetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Cluster is a running cluster for tests.
type Cluster struct {
	// Kubeconfig is the path of an admin kubeconfig.
	Kubeconfig string
	// Namespace is this test binary's namespace.
	Namespace string
	// Image has busybox (/bin/sh and its applets) and git with its HTTP
	// transport; pull policy Never.
	Image  string
	Client kubernetes.Interface
}

var (
	once        sync.Once
	cluster     *Cluster
	startErr    error
	startedHere bool
	script      string
)

// Start returns the cluster, starting it on the first call.
func Start(t testing.TB) *Cluster {
	t.Helper()
	once.Do(func() { cluster, startErr = start() })
	if startErr != nil {
		if os.Getenv("CI") == "true" || os.Getenv("MOZI_REQUIRE_KUBERNETES") == "1" {
			t.Fatalf("kubernetes cluster: %v", startErr)
		}
		t.Skipf("no kubernetes cluster (MOZI_REQUIRE_KUBERNETES=1 makes this fail): %v", startErr)
	}
	return cluster
}

// Main runs the tests and stops the cluster afterwards if this binary
// started it (MOZI_KUBE_KEEP=1 leaves it up for the next run).
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Stop stops the cluster if this binary started it (MOZI_KUBE_KEEP=1
// leaves it up), else removes this binary's namespace. For a TestMain
// that cannot use Main.
func Stop() {
	if startedHere && os.Getenv("MOZI_KUBE_KEEP") != "1" {
		cmd := exec.Command(script, "down")
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "kubetest: stop the cluster: %v\n", err)
		}
	} else if cluster != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = cluster.Client.CoreV1().Namespaces().Delete(ctx, cluster.Namespace, metav1.DeleteOptions{})
		cancel()
	}
}

func start() (*Cluster, error) {
	var err error
	script, err = findScript()
	if err != nil {
		return nil, err
	}
	kubeconfig := os.Getenv("MOZI_TEST_KUBECONFIG")
	if kubeconfig == "" {
		if kubeconfig, err = up(); err != nil {
			return nil, err
		}
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", kubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	image := os.Getenv("MOZI_TEST_KUBE_IMAGE")
	if image == "" {
		if image, err = importImage(); err != nil {
			return nil, err
		}
	}
	ns, err := namespace(cs)
	if err != nil {
		return nil, err
	}
	return &Cluster{Kubeconfig: kubeconfig, Namespace: ns, Image: image, Client: cs}, nil
}

func findScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, ".ci", "kube-cluster")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New(".ci/kube-cluster not found above the working directory")
		}
		dir = parent
	}
}

// up runs `.ci/kube-cluster up`; its last line is the kubeconfig's path.
func up() (string, error) {
	var out bytes.Buffer
	cmd := exec.Command(script, "up")
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s up: %w", script, err)
	}
	startedHere = true
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return lines[len(lines)-1], nil
}

// namespace makes this binary's namespace and waits for its default
// service account, without which pods are refused.
func namespace(cs kubernetes.Interface) (string, error) {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	name := "mozi-test-" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("create namespace %s: %w", name, err)
	}
	for {
		_, err := cs.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return name, nil
		}
		if !apierrors.IsNotFound(err) {
			return "", fmt.Errorf("service account of namespace %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("namespace %s has no default service account: %w", name, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
