package kube

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/spawner/backend"
)

func TestLabelValue(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 70)
	tests := []struct {
		in   string
		same bool
	}{
		{"replica-1", true},
		{"host:4242/pid", false},
		{"-edge.", false},
		{long, false},
		{"", true},
	}
	for _, tt := range tests {
		got := labelValue(tt.in)
		require.LessOrEqual(t, len(got), 63, tt.in)
		require.Regexp(t, `^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$`, got, tt.in)
		require.Equal(t, tt.same, got == tt.in, "%q -> %q", tt.in, got)
		require.Equal(t, got, labelValue(tt.in), "deterministic")
	}
	require.NotEqual(t, labelValue("a:b"), labelValue("a/b"), "values that sanitise alike stay apart")
}

func testBackend(t *testing.T) *Backend {
	t.Helper()
	cfg := Config{Owner: "replica:1", Scope: "prod", Namespace: "ns", Image: "agent:1",
		RemoteURL: func(repo string) string { return "http://gitea/" + repo + ".git" }}.withDefaults()
	require.NoError(t, cfg.validate())
	return &Backend{cfg: cfg}
}

func TestObjectsKeepValuesOutOfTheJob(t *testing.T) {
	t.Parallel()
	b := testBackend(t)
	r := backend.Run{TaskID: 7, Attempt: 2, Repo: "o/r", Agent: backend.Agent{Worktree: true},
		Checkout: backend.Checkout{Mode: backend.NewBranch, Branch: "mozi/7"}}
	s := backend.Step{TaskID: 7, Attempt: 2, Repo: "o/r", Argv: []string{"codex", "exec", "-"},
		Env:   []string{"PATH=/host/bin", "GITEA_TOKEN=tok-secret", "API_KEY=key-secret", "API_KEY=key-secret-2", "HOME=/var/lib/mozi"},
		Stdin: []byte("stdin-secret"), Prompt: "prompt-secret", Timeout: time.Minute, KillGrace: 5 * time.Second,
		Agent: backend.Agent{Limits: backend.Limits{MemoryBytes: 1 << 30}}}
	secret, job, err := b.objects("mozi-7-2-x", &place{run: r}, s)
	require.NoError(t, err)

	js, err := json.Marshal(job)
	require.NoError(t, err)
	for _, v := range []string{"tok-secret", "key-secret", "stdin-secret", "prompt-secret", "/host/bin", "/var/lib/mozi"} {
		require.NotContains(t, string(js), v)
	}
	require.Equal(t, "tok-secret", string(secret.Data["env.1"]))
	require.Equal(t, "key-secret-2", string(secret.Data["env.3"]), "the last of duplicate names wins")
	require.NotContains(t, secret.Data, "env.2")
	require.Equal(t, "stdin-secret", string(secret.Data[secretStdinKey]))
	require.Equal(t, "prompt-secret", string(secret.Data[secretPromptKey]))

	spec := job.Spec
	require.Equal(t, int32(0), *spec.BackoffLimit)
	require.Equal(t, int64(90), *spec.ActiveDeadlineSeconds, "timeout plus the default grace")
	require.Equal(t, int32(600), *spec.TTLSecondsAfterFinished)
	require.Equal(t, "Never", string(spec.Template.Spec.RestartPolicy))
	require.False(t, *spec.Template.Spec.AutomountServiceAccountToken)
	require.Equal(t, int64(5), *spec.Template.Spec.TerminationGracePeriodSeconds)
	want := map[string]string{backend.LabelTask: "7", backend.LabelAttempt: "2", backend.LabelOwner: labelValue("replica:1"), backend.LabelScope: "prod"}
	require.Equal(t, want, job.Labels)
	require.Equal(t, want, spec.Template.Labels)
	require.Equal(t, want, secret.Labels)

	agent := spec.Template.Spec.Containers[0]
	require.Equal(t, []string{"/bin/sh", "-c", `exec "$@" </mozi/stdin`, "mozi-stdin", "codex", "exec", "-"}, agent.Command)
	require.Equal(t, "1Gi", agent.Resources.Limits.Memory().String())
	var names []string
	for _, e := range agent.Env {
		require.Empty(t, e.Value, e.Name)
		require.Equal(t, "mozi-7-2-x", e.ValueFrom.SecretKeyRef.Name)
		names = append(names, e.Name)
	}
	require.Equal(t, []string{"GITEA_TOKEN", "API_KEY"}, names, "host-only variables are left out")

	require.Len(t, spec.Template.Spec.InitContainers, 1)
	init := spec.Template.Spec.InitContainers[0]
	require.Equal(t, "agent:1", init.Image, "the checkout runs in the agent's image by default")
	env := map[string]string{}
	for _, e := range init.Env {
		if e.ValueFrom != nil {
			env[e.Name] = "secret:" + e.ValueFrom.SecretKeyRef.Key
			continue
		}
		env[e.Name] = e.Value
	}
	require.Equal(t, "http://gitea/o/r.git", env["MOZI_REMOTE"])
	require.Equal(t, "new", env["MOZI_MODE"])
	require.Equal(t, "mozi/7", env["MOZI_BRANCH"])
	require.Equal(t, "secret:env.1", env["GITEA_TOKEN"])
	require.NotContains(t, env, "API_KEY", "the checkout gets the token only")
}

func TestObjectsWithoutWorktreeStdinOrTimeout(t *testing.T) {
	t.Parallel()
	b := testBackend(t)
	s := backend.Step{TaskID: 1, Attempt: 1, Argv: []string{"true"}}
	_, job, err := b.objects("mozi-1-1-x", &place{}, s)
	require.NoError(t, err)
	require.Empty(t, job.Spec.Template.Spec.InitContainers)
	require.Nil(t, job.Spec.ActiveDeadlineSeconds)
	require.Equal(t, []string{"true"}, job.Spec.Template.Spec.Containers[0].Command)
	require.Empty(t, job.Spec.Template.Spec.Containers[0].Resources.Limits)
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	b := testBackend(t)
	tests := []struct {
		name     string
		co       backend.Checkout
		worktree bool
		branch   string
		ref      string
	}{
		{"new branch", backend.Checkout{Mode: backend.NewBranch, Branch: "mozi/1"}, true, "mozi/1", ""},
		{"existing branch", backend.Checkout{Mode: backend.ExistingBranch, Branch: "pr"}, true, "pr", ""},
		{"detached at a ref", backend.Checkout{Mode: backend.Detached, Ref: "v1"}, true, "", "v1"},
		{"detached at the default branch", backend.Checkout{Mode: backend.Detached}, true, "", "origin/HEAD"},
		{"no worktree", backend.Checkout{Mode: backend.NewBranch, Branch: "x"}, false, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := b.Describe(t.Context(), backend.Run{Checkout: tt.co, Agent: backend.Agent{Worktree: tt.worktree}})
			require.Equal(t, "/workspace", w.Dir)
			require.Equal(t, "/mozi/prompt.md", w.PromptFile)
			require.Equal(t, tt.branch, w.Branch)
			require.Equal(t, tt.ref, w.Ref)
			require.NotEmpty(t, w.Note)
		})
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	_, err := New(Config{})
	require.ErrorContains(t, err, "owner")
	require.ErrorContains(t, err, "scope")
	require.ErrorContains(t, err, "remote URL")
	_, err = New(Config{Owner: "o", Scope: "s", RemoteURL: func(string) string { return "" }, Kubeconfig: "/nonexistent/kubeconfig"})
	require.ErrorContains(t, err, "/nonexistent/kubeconfig")
}
