package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/gitea/giteatest"
	"github.com/moziplus/mozi/repository/pgtest"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/spawner/backend/local/sandbox"
	"github.com/moziplus/mozi/spawner/backend/local/workspace/workspacetest"
	"github.com/moziplus/mozi/webhook"
	"github.com/moziplus/mozi/webhook/recording"
)

// `mozi prompt render` prints exactly the prompt `mozi serve` hands the
// agent for the same task: the task waits while its agent is disabled,
// the prompt is rendered, then the agent is enabled and copies the prompt
// it is given (into its worktree, inside the sandbox) for comparison.
func TestPromptRenderIsWhatServeHandsTheAgent(t *testing.T) {
	if _, err := sandbox.New("", t.TempDir()); err != nil {
		if os.Getenv("MOZI_REQUIRE_SANDBOX") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	dir := filepath.Dir(stateDir(t))
	gitea := giteatest.New()
	t.Cleanup(gitea.Close)
	git := workspacetest.New(t, []string{giteatest.Token}, nil)
	git.NewRepo(t, "acme/widget", map[string]string{"README.md": "widget\n"})
	dbURL := pgtest.URL(t)
	cfgPath := filepath.Join(dir, "mozi.yaml")
	writeConfig := func(disabled bool) {
		cfg := fmt.Sprintf(`listen: 127.0.0.1:0
gitea: {url: %q, token: %s}
workspace: {remote: "%s/{repo}.git"}
webhook: {secrets: [%s], discussion_grace: 100000h}
dispatcher: {poll_interval: 200ms}
agents:
  - {login: coder2, disabled: %t, preset: shell, script: 'cp "$MOZI_PROMPT_FILE" handed.md', skills: [go]}
`, gitea.URL, giteatest.Token, git.Server.URL, testSecret, disabled)
		require.NoError(t, os.WriteFile(cfgPath, []byte(cfg), 0o600))
	}
	env := map[string]string{"PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME"), "MOZI_DATABASE_URL": dbURL}
	getenv := func(k string) string { return env[k] }
	serve := func() (url string, stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		logs := &syncBuffer{}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("mozi serve log:\n%s", logs.String())
			}
		})
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, []string{"serve", "--config", cfgPath, "--data-dir", filepath.Join(dir, "state")}, getenv, &bytes.Buffer{}, logs)
		}()
		waitFor(t, "mozi serving", 30*time.Second, func() bool {
			m := servingLineRE.FindStringSubmatch(logs.String())
			if m != nil {
				url = "http://" + m[1]
			}
			return m != nil
		})
		return url, func() {
			cancel()
			require.NoError(t, <-done, logs.String())
		}
	}
	store, err := repository.Open(context.Background(), dbURL, repository.Options{})
	require.NoError(t, err)
	t.Cleanup(store.Close)

	writeConfig(true)
	url, stop := serve()
	assigned := recording.Find(recording.MustLoad(), "009") // #3 assigned to coder2
	req, err := assigned.Request(url+webhook.Path, map[string]string{"X-Gitea-Signature": webhook.Sign(assigned.Body, testSecret)})
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	var tk task.Task
	waitFor(t, "the task", 10*time.Second, func() bool {
		tasks, err := store.ListTasks(context.Background(), repository.TaskFilter{Agent: "coder2"})
		if err == nil && len(tasks) == 1 {
			tk = tasks[0]
		}
		return tk.ID != 0
	})
	var rendered, errOut bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"prompt", "render", "--config", cfgPath, "--data-dir",
		filepath.Join(dir, "state"), "--repo", "acme/widget", "--issue", "3", "--agent", "coder2"}, getenv, &rendered, &errOut), errOut.String())
	stop()

	writeConfig(false)
	_, stop = serve()
	defer stop()
	var handed []byte
	t.Cleanup(func() {
		if attempts, err := store.Attempts(context.Background(), tk.ID); err == nil && t.Failed() {
			for _, a := range attempts {
				t.Logf("attempt %d: %s: %s\n%s", a.Attempt, a.Outcome, a.Error, a.OutputTail)
			}
		}
	})
	waitFor(t, "the agent's copy of its prompt", 30*time.Second, func() bool {
		matches, _ := filepath.Glob(filepath.Join(dir, "state", "workspaces", "trees", "acme", "widget", fmt.Sprint(tk.ID), "handed.md"))
		if len(matches) == 1 {
			handed, _ = os.ReadFile(matches[0])
		}
		return len(handed) > 0
	})
	assert.Equal(t, string(handed), rendered.String())
	assert.True(t, strings.Contains(rendered.String(), "worktree of acme/widget") && strings.Contains(rendered.String(), "/3-"),
		"the prompt says where the agent works:\n%s", rendered.String())
}
