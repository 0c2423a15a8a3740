package kube_test

import (
	"bufio"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/moziplus/mozi/spawner/backend"
	"github.com/moziplus/mozi/spawner/backend/kube"
)

// TestTheRoleIsEnough runs the backend as deploy/kubernetes/rbac.yaml's
// service account (impersonated), in the test namespace: a checkout, an
// exit, a stop and a sweep need nothing more.
func TestTheRoleIsEnough(t *testing.T) {
	t.Parallel()
	e := setup(t)
	f, err := os.Open("../../../deploy/kubernetes/rbac.yaml")
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	dec := utilyaml.NewYAMLReader(bufio.NewReader(f))
	var sa string
	for {
		doc, err := dec.Read()
		if err != nil {
			break
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		require.NoError(t, err)
		ns := e.c.Namespace
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			o.Namespace, sa = ns, o.Name
			_, err = e.c.Client.CoreV1().ServiceAccounts(ns).Create(t.Context(), o, metav1.CreateOptions{})
		case *rbacv1.Role:
			o.Namespace = ns
			_, err = e.c.Client.RbacV1().Roles(ns).Create(t.Context(), o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			o.Namespace = ns
			for i := range o.Subjects {
				o.Subjects[i].Namespace = ns
			}
			_, err = e.c.Client.RbacV1().RoleBindings(ns).Create(t.Context(), o, metav1.CreateOptions{})
		}
		require.NoError(t, err)
	}
	require.NotEmpty(t, sa)

	cfg, err := clientcmd.LoadFromFile(e.c.Kubeconfig)
	require.NoError(t, err)
	for _, u := range cfg.AuthInfos {
		u.Impersonate = "system:serviceaccount:" + e.c.Namespace + ":" + sa
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, kc))
	b := e.backend(t, "rbac", func(c *kube.Config) { c.Kubeconfig = kc })

	s := sh(`cat README`)
	s.Env = []string{"GITEA_TOKEN=" + token}
	proc, out := start(t, b, backend.Run{Agent: backend.Agent{Worktree: true}, Checkout: backend.Checkout{Mode: backend.NewBranch, Branch: "r"}}, s)
	require.Equal(t, backend.Exit{Code: 0}, wait(t, proc))
	require.Equal(t, "main\n", out.String())

	id := taskID()
	proc, out = start(t, b, backend.Run{TaskID: id}, sh(`echo started; sleep 300`))
	eventually(t, "started", func() bool { return out.String() == "started\n" })
	proc.Stop(time.Second)
	require.Equal(t, "stopped: the Job was deleted", wait(t, proc).Why)

	_, err = b.Sweep(t.Context(), ledger{})
	require.NoError(t, err)
}
