package kube_test

import (
	"context"
	"crypto/md5"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/moziplus/mozi/spawner/backend"
	"github.com/moziplus/mozi/spawner/backend/backendtest"
	"github.com/moziplus/mozi/spawner/backend/kube"
	"github.com/moziplus/mozi/spawner/backend/kube/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

type env struct {
	c   *kubetest.Cluster
	git *kubetest.GitServer
}

const token = "tok-0123456789abcdef"

func setup(t *testing.T) env {
	t.Helper()
	c := kubetest.Start(t)
	return env{c: c, git: kubetest.ServeGit(t, token)}
}

func (e env) backend(t *testing.T, owner string, tweak ...func(*kube.Config)) *kube.Backend {
	t.Helper()
	cfg := kube.Config{
		Kubeconfig: e.c.Kubeconfig, Namespace: e.c.Namespace, Owner: owner, Scope: t.Name(),
		RemoteURL: func(repo string) string { return e.git.URL + "/" + repo + ".git" },
		Image:     e.c.Image, PullPolicy: "Never", HostNetwork: true, DeadlineGrace: time.Second,
	}
	for _, f := range tweak {
		f(&cfg)
	}
	b, err := kube.New(cfg)
	require.NoError(t, err)
	return b
}

var nextTask struct {
	sync.Mutex
	n int64
}

func taskID() int64 {
	nextTask.Lock()
	defer nextTask.Unlock()
	nextTask.n++
	return nextTask.n
}

// start prepares and starts argv for a fresh task; the process is stopped
// when the test ends.
func start(t *testing.T, b *kube.Backend, r backend.Run, s backend.Step) (backend.Process, *backendtest.Output) {
	t.Helper()
	if r.TaskID == 0 {
		r.TaskID = taskID()
	}
	r.Attempt = max(r.Attempt, 1)
	r.Repo = "owner/repo"
	p, err := b.Prepare(t.Context(), r)
	require.NoError(t, err)
	s.TaskID, s.Attempt, s.Repo, s.Agent = r.TaskID, r.Attempt, r.Repo, r.Agent
	s.KillGrace = max(s.KillGrace, time.Second)
	out := &backendtest.Output{}
	proc, err := b.Start(t.Context(), p, s, out)
	require.NoError(t, err)
	t.Cleanup(func() { proc.Stop(0) })
	return proc, out
}

func wait(t *testing.T, p backend.Process) backend.Exit {
	t.Helper()
	select {
	case <-p.Done():
		return p.Exit()
	case <-time.After(3 * time.Minute):
		t.Fatal("the process did not end")
		return backend.Exit{}
	}
}

// eventually polls cond until it holds or a minute passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after a minute", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func sh(script string) backend.Step { return backend.Step{Argv: []string{"/bin/sh", "-c", script}} }

func TestExitZeroStreamsOutputInOrder(t *testing.T) {
	t.Parallel()
	e := setup(t)
	proc, out := start(t, e.backend(t, "a"), backend.Run{}, sh(`i=1; while [ $i -le 300 ]; do echo "line $i"; i=$((i+1)); done; echo err >&2`))
	exit := wait(t, proc)
	require.Equal(t, backend.Exit{Code: 0}, exit)
	var want strings.Builder
	for i := 1; i <= 300; i++ {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	// stdout keeps its order; stderr is another pipe, which the container
	// runtime's log interleaves by arrival: its line is there once,
	// anywhere.
	got := out.String()
	require.Equal(t, 1, strings.Count(got, "err\n"), got)
	require.Equal(t, want.String(), strings.Replace(got, "err\n", "", 1))
}

func TestExitNonZero(t *testing.T) {
	t.Parallel()
	e := setup(t)
	proc, out := start(t, e.backend(t, "a"), backend.Run{}, sh(`echo bye; exit 7`))
	exit := wait(t, proc)
	require.Equal(t, 7, exit.Code)
	require.Equal(t, "exited with status 7", exit.Why)
	require.Equal(t, "bye\n", out.String())
}

func TestStdinAndPromptFile(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := sh(`cat; echo; cat /mozi/prompt.md`)
	s.Argv = append(s.Argv, "agent")
	s.Stdin = []byte("from stdin")
	s.Prompt = "the prompt"
	proc, out := start(t, e.backend(t, "a"), backend.Run{}, s)
	require.Equal(t, 0, wait(t, proc).Code)
	require.Equal(t, "from stdin\nthe prompt", out.String())
}

func TestDeletedMidRun(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := taskID()
	proc, out := start(t, e.backend(t, "a"), backend.Run{TaskID: id}, sh(`echo started; sleep 300`))
	eventually(t, "output", func() bool { return out.String() == "started\n" })
	// As an operator would: kubectl delete job.
	jobs := e.c.Client.BatchV1().Jobs(e.c.Namespace)
	list, err := jobs.List(t.Context(), metav1.ListOptions{LabelSelector: fmt.Sprintf("%s=%d", backend.LabelTask, id)})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	bg := metav1.DeletePropagationBackground
	require.NoError(t, jobs.Delete(t.Context(), list.Items[0].Name, metav1.DeleteOptions{PropagationPolicy: &bg}))
	exit := wait(t, proc)
	require.Equal(t, backend.Exit{Code: -1, Why: "the Job was deleted"}, exit)
}

func TestStopDeletesTheJobAndItsSecret(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := taskID()
	proc, out := start(t, e.backend(t, "a"), backend.Run{TaskID: id}, sh(`echo started; sleep 300`))
	eventually(t, "output", func() bool { return out.String() == "started\n" })
	proc.Stop(time.Second)
	exit := wait(t, proc)
	require.Equal(t, backend.Exit{Code: -1, Why: "stopped: the Job was deleted"}, exit)
	sel := metav1.ListOptions{LabelSelector: fmt.Sprintf("%s=%d", backend.LabelTask, id)}
	eventually(t, "job, pod and secret gone", func() bool {
		j, err1 := e.c.Client.BatchV1().Jobs(e.c.Namespace).List(t.Context(), sel)
		p, err2 := e.c.Client.CoreV1().Pods(e.c.Namespace).List(t.Context(), sel)
		s, err3 := e.c.Client.CoreV1().Secrets(e.c.Namespace).List(t.Context(), sel)
		return err1 == nil && err2 == nil && err3 == nil && len(j.Items)+len(p.Items)+len(s.Items) == 0
	})
}

func TestDeadline(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := sh(`echo started; sleep 300`)
	s.Timeout = time.Second // activeDeadlineSeconds 2 with the test's grace
	proc, _ := start(t, e.backend(t, "a"), backend.Run{}, s)
	exit := wait(t, proc)
	require.True(t, exit.Deadline, "%+v", exit)
	require.Equal(t, -1, exit.Code)
	require.Contains(t, exit.Why, "deadline")
}

type ledger map[int64]backend.TaskEnd

func (l ledger) TaskEnds(_ context.Context, ids []int64) (map[int64]backend.TaskEnd, error) {
	m := map[int64]backend.TaskEnd{}
	for _, id := range ids {
		if e, ok := l[id]; ok {
			m[id] = e
		}
	}
	return m, nil
}

func TestSweepDeletesADeadReplicasJob(t *testing.T) {
	t.Parallel()
	e := setup(t)
	dead, live := taskID(), taskID()
	a, b := e.backend(t, "replica-a"), e.backend(t, "replica-b")
	procA, outA := start(t, a, backend.Run{TaskID: dead}, sh(`echo started; sleep 300`))
	procB, outB := start(t, b, backend.Run{TaskID: live}, sh(`echo started; sleep 300`))
	eventually(t, "both started", func() bool { return outA.String() == "started\n" && outB.String() == "started\n" })

	// replica-a died: the ledger gave task dead's attempt to replica-b.
	l := ledger{
		dead: {RunningAttempt: 1, LeaseOwner: "replica-b"},
		live: {RunningAttempt: 1, LeaseOwner: "replica-b"},
	}
	res, err := b.Sweep(t.Context(), l)
	require.NoError(t, err)
	require.Equal(t, 1, res.Ended)
	require.Equal(t, backend.Exit{Code: -1, Why: "the Job was deleted"}, wait(t, procA))
	select {
	case <-procB.Done():
		t.Fatalf("the live run's job was swept: %+v", procB.Exit())
	default:
	}

	// Its task ended while its run goes on (still holding the lease): kept.
	l[live] = backend.TaskEnd{Terminal: true, RunningAttempt: 1, LeaseOwner: "replica-b"}
	res, err = a.Sweep(t.Context(), l)
	require.NoError(t, err)
	require.Equal(t, 0, res.Ended, "a run of an ended task that still holds its lease is live")
	select {
	case <-procB.Done():
		t.Fatalf("the live run's job was swept: %+v", procB.Exit())
	default:
	}

	// Its run's outcome recorded (the lease dropped), it goes too.
	l[live] = backend.TaskEnd{Terminal: true}
	res, err = a.Sweep(t.Context(), l)
	require.NoError(t, err)
	require.Equal(t, 1, res.Ended)
	require.Equal(t, -1, wait(t, procB).Code)
}

func TestCheckout(t *testing.T) {
	t.Parallel()
	e := setup(t)
	main := e.git.Branch(t, "owner/repo", "main")
	feature := e.git.Branch(t, "owner/repo", "feature")
	tests := []struct {
		name  string
		co    backend.Checkout
		token string
		want  string // output, or Why with failure
		fail  bool
	}{
		{"new branch from the default branch", backend.Checkout{Mode: backend.NewBranch, Branch: "mozi/new"}, token, "mozi/new " + main + " main", false},
		{"new branch that origin has", backend.Checkout{Mode: backend.NewBranch, Branch: "feature"}, token, "feature " + feature + " feature", false},
		{"existing branch", backend.Checkout{Mode: backend.ExistingBranch, Branch: "feature"}, token, "feature " + feature + " feature", false},
		{"existing branch gone", backend.Checkout{Mode: backend.ExistingBranch, Branch: "gone"}, token, "checkout failed: branch gone is not on the remote", true},
		{"detached at the default branch", backend.Checkout{Mode: backend.Detached}, token, "HEAD " + main + " main", false},
		{"detached at a branch", backend.Checkout{Mode: backend.Detached, Ref: "feature"}, token, "HEAD " + feature + " feature", false},
		{"detached at a commit", backend.Checkout{Mode: backend.Detached, Ref: main}, token, "HEAD " + main + " main", false},
		{"a refused token", backend.Checkout{Mode: backend.NewBranch, Branch: "x"}, "wrong", "checkout failed: ", true},
	}
	b := e.backend(t, "a")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := sh(`echo "$(git rev-parse --abbrev-ref HEAD) $(git rev-parse HEAD) $(cat README)"`)
			s.Env = []string{"GITEA_TOKEN=" + tt.token}
			proc, out := start(t, b, backend.Run{Agent: backend.Agent{Worktree: true}, Checkout: tt.co}, s)
			exit := wait(t, proc)
			if tt.fail {
				require.Equal(t, -1, exit.Code)
				require.True(t, strings.HasPrefix(exit.Why, tt.want), exit.Why)
				require.NotContains(t, exit.Why, tt.token)
				return
			}
			require.Equal(t, backend.Exit{Code: 0}, exit)
			require.Equal(t, tt.want+"\n", out.String())
		})
	}
}

func TestAgentPushesWithItsToken(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := sh(`git commit -q --allow-empty -m work && git push -q origin HEAD 2>&1 && git rev-parse HEAD`)
	s.Env = []string{"GITEA_TOKEN=" + token, "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.invalid",
		"GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.invalid"}
	proc, out := start(t, e.backend(t, "a"), backend.Run{Agent: backend.Agent{Worktree: true},
		Checkout: backend.Checkout{Mode: backend.NewBranch, Branch: "mozi/pushed"}}, s)
	require.Equal(t, backend.Exit{Code: 0}, wait(t, proc), out.String())
	require.Equal(t, strings.TrimSpace(out.String()), e.git.Branch(t, "owner/repo", "mozi/pushed"))
}

func TestNoSecretInTheJobOrPod(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := taskID()
	const apiKey = "sk-test-9f8e7d6c5b4a"
	// The values reach the agent; the script names none of them.
	s := sh(`echo "$API_KEY $GITEA_TOKEN" | md5sum; sleep 300`)
	s.Env = []string{"GITEA_TOKEN=" + token, "API_KEY=" + apiKey}
	s.Prompt = "prompt-marker-31337"
	proc, out := start(t, e.backend(t, "a"), backend.Run{TaskID: id, Agent: backend.Agent{Worktree: true},
		Checkout: backend.Checkout{Mode: backend.NewBranch, Branch: "mozi/s"}}, s)
	sum := fmt.Sprintf("%x  -\n", md5.Sum([]byte(apiKey+" "+token+"\n")))
	eventually(t, "the agent saw its environment", func() bool { return out.String() == sum })

	sel := metav1.ListOptions{LabelSelector: fmt.Sprintf("%s=%d", backend.LabelTask, id)}
	jobs, err := e.c.Client.BatchV1().Jobs(e.c.Namespace).List(t.Context(), sel)
	require.NoError(t, err)
	pods, err := e.c.Client.CoreV1().Pods(e.c.Namespace).List(t.Context(), sel)
	require.NoError(t, err)
	require.Len(t, jobs.Items, 1)
	require.Len(t, pods.Items, 1)
	for _, obj := range []any{jobs.Items[0], pods.Items[0]} {
		js, err := json.Marshal(obj)
		require.NoError(t, err)
		for _, secret := range []string{token, apiKey, s.Prompt} {
			require.NotContains(t, string(js), secret)
		}
	}
	secret, err := e.c.Client.CoreV1().Secrets(e.c.Namespace).Get(t.Context(), jobs.Items[0].Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, secret.OwnerReferences, 1)
	require.Equal(t, jobs.Items[0].UID, secret.OwnerReferences[0].UID, "the secret goes with its job")
	proc.Stop(0)
	wait(t, proc)
}

func TestMissingImageFailsTheRun(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := sh(`true`)
	proc, _ := start(t, e.backend(t, "a"), backend.Run{Agent: backend.Agent{Image: "docker.io/mozi/absent:1"}}, s)
	exit := wait(t, proc)
	require.Equal(t, -1, exit.Code)
	require.Contains(t, exit.Why, "ErrImageNeverPull")
}

func TestUnschedulableIsUnavailable(t *testing.T) {
	t.Parallel()
	e := setup(t)
	b := e.backend(t, "a", func(c *kube.Config) { c.ScheduleWait = 3 * time.Second })
	id := taskID()
	r := backend.Run{TaskID: id, Attempt: 1, Repo: "owner/repo", Agent: backend.Agent{Limits: backend.Limits{MemoryBytes: 1 << 50}}}
	p, err := b.Prepare(t.Context(), r)
	require.NoError(t, err)
	s := sh(`true`)
	s.TaskID, s.Attempt, s.Agent = id, 1, r.Agent
	_, err = b.Start(t.Context(), p, s, &backendtest.Output{})
	require.ErrorIs(t, err, backend.ErrUnavailable)
	require.Contains(t, err.Error(), "Unschedulable")
	sel := metav1.ListOptions{LabelSelector: fmt.Sprintf("%s=%d", backend.LabelTask, id)}
	eventually(t, "nothing left", func() bool {
		j, err1 := e.c.Client.BatchV1().Jobs(e.c.Namespace).List(t.Context(), sel)
		s, err2 := e.c.Client.CoreV1().Secrets(e.c.Namespace).List(t.Context(), sel)
		return err1 == nil && err2 == nil && len(j.Items)+len(s.Items) == 0
	})
}

func TestUnreachableIsUnavailable(t *testing.T) {
	t.Parallel()
	// A kubeconfig naming a port nothing listens on; no cluster needed.
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600))
	b, err := kube.New(kube.Config{Kubeconfig: kc, Owner: "a", Scope: "s", Image: "i", RemoteURL: func(string) string { return "" }})
	require.NoError(t, err)
	r := backend.Run{TaskID: 1, Attempt: 1}
	p, err := b.Prepare(t.Context(), r)
	require.NoError(t, err)
	_, err = b.Start(t.Context(), p, backend.Step{TaskID: 1, Attempt: 1, Argv: []string{"true"}}, &backendtest.Output{})
	require.ErrorIs(t, err, backend.ErrUnavailable)
	_, err = b.Sweep(t.Context(), ledger{})
	require.ErrorIs(t, err, backend.ErrUnavailable)
}
