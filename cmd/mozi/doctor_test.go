package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository/gitea"
	"github.com/moziplus/mozi/repository/gitea/giteatest"
	"github.com/moziplus/mozi/repository/pgtest"
)

const publicURL = "http://mozi.test:8080/webhooks/gitea"

// doctorSetup is a correct installation: a database, a fake Gitea whose
// acme/widget has mozi's webhook, one agent whose command and token exist.
type doctorSetup struct {
	gitea   *giteatest.Server
	dbURL   string
	token   string
	command string
	workdir string
	env     map[string]string
	config  string // replaces the generated file when set
	extra   string // more top-level configuration
	agent   string // more keys of the agent's entry
	secret  string
}

func newDoctorSetup(t *testing.T) *doctorSetup {
	t.Helper()
	s := &doctorSetup{gitea: giteatest.New(), dbURL: pgtest.URL(t), token: giteatest.Token, command: "/bin/sh", secret: testSecret,
		workdir: t.TempDir(), env: map[string]string{"CODER1_TOKEN": "token-coder1"}}
	t.Cleanup(s.gitea.Close)
	s.gitea.AddUser("token-coder1", "coder1")
	return s
}

func (s *doctorSetup) write(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mozi.yaml")
	body := s.config
	command := ""
	if s.command != "" {
		command = fmt.Sprintf("command: [%q], ", s.command)
	}
	if body == "" {
		body = fmt.Sprintf(`database: {url: %q}
gitea: {url: %q, token: %q, repos: [%s]}
webhook: {secrets: [%s], public_url: %q}
%s
agents:
  - {login: coder1, %sworkspace: none, workdir: %q, token_env: CODER1_TOKEN%s}
`, s.dbURL, s.gitea.URL, s.token, s.gitea.Repo(), s.secret, publicURL, s.extra, command, s.workdir, s.agent)
	}
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

func (s *doctorSetup) run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cfg := s.write(t)
	var out, errOut bytes.Buffer
	err := run(context.Background(), append(args, "--config", cfg), func(k string) string { return s.env[k] }, &out, &errOut)
	return out.String() + errOut.String(), err
}

func failLines(out string) []string {
	var fails []string
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "FAIL") {
			fails = append(fails, strings.TrimSpace(line))
		}
	}
	return fails
}

func TestWebhookInstallThenDoctorPasses(t *testing.T) {
	s := newDoctorSetup(t)
	out, err := s.run(t, "webhook", "install")
	require.NoError(t, err, out)
	assert.Contains(t, out, "acme/widget: webhook 1 created → "+publicURL)
	out, err = s.run(t, "webhook", "install")
	require.NoError(t, err, out)
	assert.Contains(t, out, "acme/widget: webhook 2 created, replacing webhook 1",
		"a second install replaces the hook: Gitea cannot change a hook's secret in place")

	hooks := s.gitea.Hooks("acme/widget")
	require.Len(t, hooks, 1)
	cfg := hooks[0]["config"].(map[string]any)
	assert.Equal(t, publicURL, cfg["url"])
	assert.Equal(t, "json", cfg["content_type"])
	assert.Equal(t, testSecret, cfg["secret"], "Gitea signs with mozi's secret")
	assert.Empty(t, gitea.Hook{Events: hooks[0]["events"].([]string)}.MissingEvents(gitea.Forge{}),
		"Gitea keeps every event mozi needs, under its own names")
	assert.Equal(t, true, hooks[0]["active"])

	out, err = s.run(t, "doctor")
	require.NoError(t, err, out)
	assert.Empty(t, failLines(out))
	for _, want := range []string{"ok    configuration", "ok    database", "ok    gitea ", "ok    gitea token            acts as mozi",
		"ok    acme/widget            webhook 2", "ok    agent coder1", "0 failed"} {
		assert.Contains(t, out, want)
	}
}

// A hook an operator made with another secret is replaced, not edited:
// Gitea ignores a secret in an edit, and every delivery would stay
// rejected while the install said it was fixed.
func TestWebhookInstallReplacesAHookWithAnotherSecret(t *testing.T) {
	s := newDoctorSetup(t)
	s.gitea.AddHook("acme/widget", publicURL, "json", []string{"push"}, true) // no secret: made by hand
	s.gitea.AddHook("acme/widget", "http://elsewhere/hook", "json", []string{"push"}, true)
	out, err := s.run(t, "webhook", "install")
	require.NoError(t, err, out)
	assert.Contains(t, out, "replacing webhook 1")

	hooks := s.gitea.Hooks("acme/widget")
	require.Len(t, hooks, 2, "another service's hook stays")
	var ours map[string]any
	for _, h := range hooks {
		if h["config"].(map[string]any)["url"] == publicURL {
			ours = h
		}
	}
	require.NotNil(t, ours)
	assert.Equal(t, testSecret, ours["config"].(map[string]any)["secret"])
}

func TestWebhookInstallOnAnOrganization(t *testing.T) {
	s := newDoctorSetup(t)
	out, err := s.run(t, "webhook", "install", "--org", "acme")
	require.NoError(t, err, out)
	require.Len(t, s.gitea.Hooks("org:acme"), 1)
	assert.Empty(t, s.gitea.Hooks("acme/widget"))
	out, err = s.run(t, "doctor")
	require.NoError(t, err, out, "an organization webhook serves the organization's repositories")
}

// Each failure mode is one FAIL line naming what is wrong, and doctor
// exits non-zero.
func TestDoctorReportsEachFailureInOneLine(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, s *doctorSetup)
		want  string
	}{
		{"broken configuration", func(t *testing.T, s *doctorSetup) { s.config = "agnets: []\n" },
			`mozi.yaml:1: unknown field "agnets"`},
		{"database unreachable", func(t *testing.T, s *doctorSetup) {
			s.dbURL = "postgres://mozi@127.0.0.1:1/mozi?connect_timeout=2"
		}, "database"},
		{"gitea down", func(t *testing.T, s *doctorSetup) { s.gitea.Close() }, "gitea  "},
		{"gitea answers 500", func(t *testing.T, s *doctorSetup) {
			s.gitea.Fail = func(w http.ResponseWriter, r *http.Request) bool {
				w.WriteHeader(http.StatusInternalServerError)
				return true
			}
		}, "gitea  "},
		{"token not valid", func(t *testing.T, s *doctorSetup) { s.token = "wrong" }, "gitea token            get the token's user: the token was refused (401)"},
		{"token of another user", func(t *testing.T, s *doctorSetup) { s.token = "token-coder1" }, "acts as coder1, but gitea.bot_user is mozi"},
		{"token without write:issue", func(t *testing.T, s *doctorSetup) {
			s.gitea.Scopes = []string{"read:repository", "write:repository", "read:user"}
		}, "write:issue"},
		{"no webhook", func(t *testing.T, s *doctorSetup) {}, "no webhook points at " + publicURL},
		{"webhook sends form data", func(t *testing.T, s *doctorSetup) {
			s.gitea.AddHook("acme/widget", publicURL, "form", gitea.HookEvents, true)
		}, `sends "form", not json`},
		{"webhook misses events", func(t *testing.T, s *doctorSetup) {
			s.gitea.AddHook("acme/widget", publicURL, "json", []string{"push", "issues_only", "issue_comment", "pull_request"}, true)
		}, "does not send issue_assign, issue_label"},
		{"webhook inactive", func(t *testing.T, s *doctorSetup) {
			s.gitea.AddHook("acme/widget", publicURL, "json", gitea.HookEvents, false)
		}, "is not active"},
		{"agent command missing", func(t *testing.T, s *doctorSetup) { s.command = "no-such-agent-cli" }, `agent coder1           command "no-such-agent-cli" not found`},
		{"agent token missing", func(t *testing.T, s *doctorSetup) { delete(s.env, "CODER1_TOKEN") }, "CODER1_TOKEN is not set"},
		{"agent workdir not writable", func(t *testing.T, s *doctorSetup) {
			s.workdir = "/proc/mozi-doctor/work"
		}, "working directory /proc/mozi-doctor/work"},
		{"the example configuration's secret", func(t *testing.T, s *doctorSetup) { s.secret = "demo-secret-change-me" },
			"webhook secret         secret 1 is the example configuration's"},
		{"a short secret", func(t *testing.T, s *doctorSetup) { s.secret = "hunter2" },
			"webhook secret         secret 1 has 7 characters"},
		{"bubblewrap missing", func(t *testing.T, s *doctorSetup) {
			s.extra = "sandbox: {bwrap: /nonexistent/bwrap}"
		}, "sandbox                sandbox unavailable: bubblewrap (/nonexistent/bwrap) not found"},
		{"agent command hidden by its sandbox", func(t *testing.T, s *doctorSetup) {
			s.command = filepath.Join(t.TempDir(), "my-agent")
			require.NoError(t, os.WriteFile(s.command, []byte("#!/bin/sh\n"), 0o755))
		}, "cannot be seen inside its sandbox (/tmp is hidden there)"},
		{"agent's preset CLI missing", func(t *testing.T, s *doctorSetup) {
			s.command, s.agent = "", ", preset: goose"
		}, `agent coder1           command "goose" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newDoctorSetup(t)
			if tt.name != "no webhook" && !strings.HasPrefix(tt.name, "webhook ") {
				s.gitea.AddHook("acme/widget", publicURL, "json", gitea.HookEvents, true)
			}
			tt.setup(t, s)
			out, err := s.run(t, "doctor")
			require.Error(t, err, out)
			fails := failLines(out)
			require.Len(t, fails, 1, "exactly one failure reported:\n%s", out)
			assert.Contains(t, fails[0], tt.want)
			assert.NotContains(t, out, giteatest.Token, "no secret in the report")
			assert.NotContains(t, out, s.secret, "no secret in the report")
		})
	}
}

// mozi doctor runs each preset's CLI with --version the way mozi would run
// the agent (its user, its sandbox) and reports what it printed.
func TestDoctorReportsEachCLIVersion(t *testing.T) {
	if _, err := exec.LookPath("codex"); err != nil {
		if os.Getenv("MOZI_REQUIRE_AGENT_CLIS") == "1" {
			t.Fatal("MOZI_REQUIRE_AGENT_CLIS=1 but codex is not installed (.ci/install-agent-clis)")
		}
		t.Skip("codex is not installed: .ci/install-agent-clis installs the agent CLIs")
	}
	s := newDoctorSetup(t)
	s.gitea.AddHook("acme/widget", publicURL, "json", gitea.HookEvents, true)
	s.command, s.agent = "", ", preset: codex"
	out, err := s.run(t, "doctor")
	require.NoError(t, err, out)
	assert.Regexp(t, `ok    agent coder1 +\S*codex \(codex-cli \d+\.\d+\.\d+\), in \S+, sandboxed`, out)
}

// mozi doctor --json prints one document a script can read.
func TestDoctorJSON(t *testing.T) {
	s := newDoctorSetup(t)
	s.gitea.AddHook("acme/widget", publicURL, "json", gitea.HookEvents, true)
	delete(s.env, "CODER1_TOKEN")
	out, err := s.run(t, "doctor", "--json")
	require.Error(t, err)
	var report struct {
		Checks []struct {
			Verdict, Check, Found, Hint string
		}
		Failed, Warnings int
	}
	require.NoError(t, json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &report), out)
	assert.Equal(t, 1, report.Failed)
	var failed []string
	for _, c := range report.Checks {
		if c.Verdict == "fail" {
			failed = append(failed, c.Check+": "+c.Found)
		}
	}
	assert.Equal(t, []string{"agent coder1: CODER1_TOKEN is not set"}, failed)
}

// useForgejo makes the setup's fake a Forgejo 10 (its recorded answers).
func (s *doctorSetup) useForgejo(t *testing.T) {
	t.Helper()
	s.gitea.Close()
	s.gitea = giteatest.NewFrom(giteatest.RecordingDir("forgejo-10.0.0-dev"))
	t.Cleanup(s.gitea.Close)
	s.gitea.AddUser("token-coder1", "coder1")
}

// On a Forgejo, which has no commit status webhook, mozi webhook install
// and mozi doctor agree that the hook needs no "status" (doctor used to
// ask for it, and install to recreate the same hook, for ever), and both
// say where CI failures come from instead.
func TestForgejoHookHasNoStatusEvent(t *testing.T) {
	const poll = "mozi learns of CI failures from its status poll, every 2m0s (ticker.status_poll_every)"
	s := newDoctorSetup(t)
	s.useForgejo(t)
	repo := s.gitea.Repo()
	out, err := s.run(t, "webhook", "install")
	require.NoError(t, err, out)
	assert.Contains(t, out, "Forgejo 10.0.0-dev-456d05998231+gitea-1.22.0: Forgejo sends no commit status webhooks: "+poll)
	assert.Contains(t, out, repo+": webhook 1 created → "+publicURL)
	hooks := s.gitea.Hooks(repo)
	require.Len(t, hooks, 1)
	assert.NotContains(t, hooks[0]["events"], "status", "Forgejo drops it")

	out, err = s.run(t, "doctor")
	require.NoError(t, err, out)
	assert.Empty(t, failLines(out))
	assert.Contains(t, out, "ok    gitea                  "+s.gitea.URL+": Forgejo 10.0.0-dev-456d05998231+gitea-1.22.0")
	assert.Contains(t, out, "ok    ci failures            Forgejo sends no commit status webhooks: "+poll)
	assert.Contains(t, out, "ok    "+repo)

	out, err = s.run(t, "webhook", "install")
	require.NoError(t, err, out)
	assert.Contains(t, out, "webhook 2 created, replacing webhook 1", "install is idempotent: the same hook again")
	out, err = s.run(t, "doctor")
	require.NoError(t, err, out)
	assert.Empty(t, failLines(out))
}

// doctor judges a hook by what the forge can send.
func TestDoctorJudgesHooksByForge(t *testing.T) {
	withoutStatus := slices.DeleteFunc(slices.Clone(gitea.HookEvents), func(e string) bool { return e == "status" })
	tests := []struct {
		name     string
		forgejo  bool
		hookType string
		events   []string
		fail     string // "": no failure
	}{
		{"Gitea: every event", false, "gitea", gitea.HookEvents, ""},
		{"Gitea: no status", false, "gitea", withoutStatus, "does not send status"},
		{"Gitea: a slack hook", false, "slack", gitea.HookEvents, `is of type "slack", not gitea (or forgejo)`},
		{"Forgejo: a gitea hook", true, "gitea", gitea.HookEvents, ""},
		{"Forgejo: a forgejo hook", true, "forgejo", withoutStatus, ""},
		// "issues" stands for every issue event: issues_only is the event alone.
		{"Forgejo: no issue_comment", true, "forgejo", []string{"issues_only", "issue_assign", "issue_label", "pull_request"},
			"does not send issue_comment"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newDoctorSetup(t)
			if tt.forgejo {
				s.useForgejo(t)
			}
			s.gitea.AddHookOfType(s.gitea.Repo(), tt.hookType, publicURL, "json", tt.events, true)
			out, err := s.run(t, "doctor")
			fails := failLines(out)
			if tt.fail == "" {
				require.NoError(t, err, out)
				assert.Empty(t, fails)
				return
			}
			require.Error(t, err, out)
			require.Len(t, fails, 1, out)
			assert.Contains(t, fails[0], tt.fail)
			if tt.forgejo {
				assert.NotContains(t, fails[0], "status", "Forgejo cannot send it")
			}
		})
	}
}
