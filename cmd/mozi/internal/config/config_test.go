package config

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/spawner"
)

func noEnv(string) string { return "" }

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

const validAgents = `
agents:
  - login: coder1
    preset: claude-code
    workdir: /srv/agents/coder1
    token_env: CODER1_GITEA_TOKEN
    role_files: [roles/coder1/SOUL.md]
    skills: [go, sql]
  - login: lead
    lead: true
    command: ["lead-agent", "--prompt-file", "{prompt_file}"]
    workdir: lead
`

func TestLoadErrorsNameFileLineAndKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		want string
	}{
		{
			name: "unknown top-level key with suggestion",
			body: "listen: 127.0.0.1:9000\n\n\n\n\n\n\n\n\n\n\nagnets: []\n",
			want: `mozi.yaml:12: unknown field "agnets" (did you mean "agents"?)`,
		},
		{
			name: "unknown nested key",
			body: "gitea:\n  url: http://g:3000\n  tokn: x\n",
			want: `mozi.yaml:3: unknown field "tokn" in gitea (did you mean "token"?)`,
		},
		{
			name: "unknown key inside an agent",
			body: "agents:\n  - login: a\n    preset: codex\n    workdir: /w\n    concurrency: 2\n",
			want: `mozi.yaml:5: unknown field "concurrency" in agents[0]`,
		},
		{
			name: "wrong scalar type",
			body: "database:\n  max_conns: lots\n",
			want: `mozi.yaml:2: database.max_conns: invalid value "lots": want an integer`,
		},
		{
			name: "bad duration",
			body: "gitea:\n  timeout: soon\n",
			want: `mozi.yaml:2: gitea.timeout: invalid value "soon": want a duration such as 30s or 5m`,
		},
		{
			name: "list where a mapping belongs",
			body: "gitea:\n  - url\n",
			want: `mozi.yaml:2: gitea: want a mapping of keys, got a list`,
		},
		{
			name: "yaml syntax error",
			body: "listen: a\n  bad: [\n",
			want: `mozi.yaml:2: mapping values are not allowed in this context`,
		},
		{
			name: "unknown preset",
			body: "agents:\n  - login: a\n    workdir: /w\n    preset: claud\n",
			want: `mozi.yaml:4: agents[0].preset: unknown preset "claud" (want one of aider, claude-code, codex, goose, openclaw, opencode, shell)`,
		},
		{
			name: "preset and command",
			body: "agents:\n  - login: a\n    workdir: /w\n    preset: codex\n    command: [x]\n",
			want: `mozi.yaml:5: agents[0].command: agent a has both a preset and a command: keep one`,
		},
		{
			name: "neither preset nor command",
			body: "agents:\n  - login: a\n    workdir: /w\n",
			want: `mozi.yaml:2: agents[0]: agent a needs a preset or a command`,
		},
		{
			name: "duplicate login",
			body: "agents:\n  - {login: a, preset: codex, workdir: /w}\n  - {login: A, preset: codex, workdir: /w}\n",
			want: `mozi.yaml:3: agents[1].login: "A" is already declared by agents[0]`,
		},
		{
			name: "two leads",
			body: "agents:\n  - {login: a, preset: codex, workdir: /w, lead: true}\n  - {login: b, preset: codex, workdir: /w, lead: true}\n",
			want: `mozi.yaml:3: agents[1].lead: both a and b are lead: at most one agent leads`,
		},
		{
			name: "workdir with a worktree per task",
			body: "agents:\n  - login: a\n    preset: codex\n    workspace: auto\n    workdir: /w\n",
			want: `mozi.yaml:5: agents[0].workdir: agent a works in a worktree per task (workspace: auto): workdir is for workspace: none`,
		},
		{
			name: "credentials in gitea.url are refused, not echoed",
			body: "gitea:\n  url: https://mozi:hunter2-secret@gitea.example\n",
			want: `mozi.yaml:2: gitea.url: holds credentials (user:password@): give mozi its token in MOZI_GITEA_TOKEN, not in the URL (agents see the URL)`,
		},
		{
			name: "credentials in workspace.remote",
			body: "workspace:\n  remote: https://bot:hunter2-secret@gitea.example/{repo}.git\n",
			want: `mozi.yaml:2: workspace.remote: holds credentials (user:password@): mozi and the agents authenticate with their Gitea tokens; the URL is visible to agents`,
		},
		{
			name: "workspace.remote without the repository",
			body: "workspace:\n  remote: https://gitea.example/acme/widget.git\n",
			want: `mozi.yaml:2: workspace.remote: "https://gitea.example/acme/widget.git" has no {repo} (owner/name) in it`,
		},
		{
			name: "checkouts per repository",
			body: "workspace:\n  checkouts_per_repo: -2\n",
			want: `mozi.yaml:2: workspace.checkouts_per_repo: must be at least 1, or -1 for no cap, got -2`,
		},
		{
			name: "unknown sandbox",
			body: "agents:\n  - {login: a, preset: codex, sandbox: docker}\n",
			want: `mozi.yaml:2: agents[0].sandbox: "docker" is not bwrap or none`,
		},
		{
			name: "pass_env of another agent's token",
			body: "agents:\n  - {login: a, preset: codex, token_env: A_TOKEN}\n  - {login: b, preset: codex, pass_env: [A_TOKEN]}\n",
			want: `mozi.yaml:3: agents[1].pass_env[0]: "A_TOKEN" cannot be passed to an agent: it holds agent a's Gitea token`,
		},
		{
			name: "pass_env of a PostgreSQL variable",
			body: "agents:\n  - {login: a, preset: codex, pass_env: [PGPASSWORD]}\n",
			want: `mozi.yaml:2: agents[0].pass_env[0]: "PGPASSWORD" cannot be passed to an agent: PG* variables configure PostgreSQL connections`,
		},
		{
			name: "env setting mozi's secret",
			body: "agents:\n  - login: a\n    preset: codex\n    env: {MOZI_GITEA_TOKEN: x}\n",
			want: `mozi.yaml:4: agents[0].env.MOZI_GITEA_TOKEN: "MOZI_GITEA_TOKEN" cannot be set for an agent: MOZI_* variables are mozi's own configuration and secrets`,
		},
		{
			name: "a size that is not one",
			body: "agents:\n  - login: a\n    preset: codex\n    limits: {memory: lots}\n",
			want: `mozi.yaml:4: agents[0].limits.memory: "lots" is not a size (write e.g. 512MiB, 8GiB or a number of bytes)`,
		},
		{
			name: "bad token env",
			body: "agents:\n  - {login: a, preset: codex, workdir: /w, token_env: 'my token'}\n",
			want: `mozi.yaml:2: agents[0].token_env: "my token" is not an environment variable name`,
		},
		{
			name: "agent named like the bot",
			body: "agents:\n  - {login: mozi, preset: codex, workdir: /w}\n",
			want: `mozi.yaml:2: agents[0].login: "mozi" is mozi's own bot user (gitea.bot_user)`,
		},
		{
			name: "bad listen",
			body: "listen: 8080\n",
			want: `mozi.yaml:1: listen: "8080" is not host:port`,
		},
		{
			name: "bad locale",
			body: "templates:\n  locale: fr\n",
			want: `mozi.yaml:2: templates.locale: unknown locale "fr" (want en or zh)`,
		},
		{
			name: "gitea url without scheme",
			body: "gitea:\n  url: gitea:3000\n",
			want: `mozi.yaml:2: gitea.url: "gitea:3000" is not an http(s) URL`,
		},
		{
			name: "shell preset without script",
			body: "agents:\n  - {login: a, preset: shell, workdir: /w}\n",
			want: `mozi.yaml:2: agents[0].script: the shell preset needs a script`,
		},
		{
			name: "args without a preset",
			body: "agents:\n  - login: a\n    workdir: /w\n    command: [my-agent]\n    args: [--fast]\n",
			want: `mozi.yaml:5: agents[0].args: args extend a preset's command: put them in command itself`,
		},
		{
			name: "args with the shell preset",
			body: "agents:\n  - login: a\n    workdir: /w\n    preset: shell\n    script: run-it\n    args: [--fast]\n",
			want: `mozi.yaml:6: agents[0].args: the shell preset takes no args: put them in its script`,
		},
		{
			name: "empty arg",
			body: "agents:\n  - login: a\n    workdir: /w\n    preset: codex\n    args:\n      - -m\n      - ''\n",
			want: `mozi.yaml:7: agents[0].args[1]: is empty`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("mozi.yaml", []byte(tt.body))
			require.Error(t, err)
			assert.Equal(t, tt.want, err.Error())
		})
	}
}

// args extend a preset's argv and keep its usage format.
func TestAgentArgs(t *testing.T) {
	t.Parallel()
	cfg, err := Parse("mozi.yaml", []byte("agents:\n  - login: a\n    workdir: /w\n    preset: codex\n    args: [-m, gpt-5.5]\n"))
	require.NoError(t, err)
	a := cfg.Agents[0]
	require.Equal(t, []string{"-m", "gpt-5.5"}, a.Args)
	r, err := spawner.ResolveAgent(a.Preset, a.Command, a.Script, a.Args)
	require.NoError(t, err)
	require.Equal(t, []string{"codex", "exec", "--json", "--dangerously-bypass-approvals-and-sandbox", "-m", "gpt-5.5", "-"}, r.Argv)
	require.Equal(t, spawner.UsageCodexJSON, r.Usage)
}

func TestLoadValidFile(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "mozi.yaml", `
listen: 0.0.0.0:9090
gitea: {url: "http://gitea:3000", bot_user: mozi-bot, timeout: 5s}
webhook: {secrets: [old, new]}
templates: {locale: zh}
`+validAgents)
	cfg, err := Load(path, noEnv)
	require.NoError(t, err)
	assert.Equal(t, path, cfg.Source)
	assert.Equal(t, "0.0.0.0:9090", cfg.Listen)
	assert.Equal(t, 5*time.Second, cfg.Gitea.Timeout)
	assert.Equal(t, []Secret{"old", "new"}, cfg.Webhook.Secrets)
	require.Len(t, cfg.Agents, 2)
	coder := cfg.Agents[0]
	assert.Equal(t, 1, coder.MaxConcurrency, "default concurrency")
	assert.Equal(t, 30*time.Minute, coder.Timeout, "default timeout")
	dir := filepath.Dir(path)
	assert.Equal(t, filepath.Join(dir, "roles/coder1/SOUL.md"), coder.RoleFiles[0], "relative to the file")
	assert.Equal(t, filepath.Join(dir, "lead"), cfg.Agents[1].Workdir)
	lead, ok := cfg.Agent("LEAD")
	require.True(t, ok)
	assert.True(t, lead.Lead)
}

func TestDefaultsWithoutFile(t *testing.T) {
	t.Chdir(t.TempDir())
	cfg, err := Load("", noEnv)
	require.NoError(t, err)
	assert.Empty(t, cfg.Source)
	assert.Equal(t, "127.0.0.1:8080", cfg.Listen)
	assert.Empty(t, cfg.Database.URL, "no URL means the embedded database")
	assert.Equal(t, int64(10<<20), cfg.Webhook.MaxBodyBytes)
	assert.Equal(t, "en", cfg.Templates.Locale)
}

func TestFileDiscoveryOrder(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	require.NoError(t, os.WriteFile(DefaultFile, []byte("listen: 127.0.0.1:1111\n"), 0o600))
	other := writeFile(t, "other.yaml", "listen: 127.0.0.1:2222\n")
	flagFile := writeFile(t, "flag.yaml", "listen: 127.0.0.1:3333\n")

	cfg, err := Load("", noEnv)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:1111", cfg.Listen, "./mozi.yaml when nothing else is named")

	cfg, err = Load("", envOf(map[string]string{EnvConfig: other}))
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:2222", cfg.Listen, "$MOZI_CONFIG beats ./mozi.yaml")

	cfg, err = Load(flagFile, envOf(map[string]string{EnvConfig: other}))
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:3333", cfg.Listen, "--config beats $MOZI_CONFIG")

	_, err = Load(filepath.Join(dir, "missing.yaml"), noEnv)
	require.EqualError(t, err, filepath.Join(dir, "missing.yaml")+": config file not found")
}

func TestEnvironmentOverrides(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "mozi.yaml", `
listen: 127.0.0.1:1
database: {url: "postgres://file"}
gitea: {url: "http://file:3000", token: file-token}
webhook: {secrets: [file-secret]}
`)
	cfg, err := Load(path, envOf(map[string]string{
		EnvDatabaseURL:   "postgres://env/mozi",
		EnvListen:        "127.0.0.1:2",
		EnvGiteaURL:      "https://env.example",
		EnvGiteaToken:    "env-token",
		EnvWebhookSecret: "env-secret",
	}))
	require.NoError(t, err)
	assert.Equal(t, "postgres://env/mozi", cfg.Database.URL.Value())
	assert.Equal(t, "127.0.0.1:2", cfg.Listen)
	assert.Equal(t, "https://env.example", cfg.Gitea.URL)
	assert.Equal(t, "env-token", cfg.Gitea.Token.Value())
	assert.Equal(t, []Secret{"env-secret"}, cfg.Webhook.Secrets)
}

func TestSecretsNeverPrint(t *testing.T) {
	t.Parallel()
	cfg, err := Parse("mozi.yaml", []byte(`gitea: {token: tok-123}
webhook: {secrets: [hook-456]}
database: {url: "postgres://u:pw-789@h/db"}`))
	require.NoError(t, err)
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "cfg", cfg, "token", cfg.Gitea.Token)
	printed := fmt.Sprintf("%v %+v %#v %s", cfg, cfg, cfg, logs.String())
	for _, secret := range []string{"tok-123", "hook-456", "pw-789"} {
		assert.NotContains(t, printed, secret)
	}
	assert.Equal(t, "tok-123", cfg.Gitea.Token.Value())
}

func TestExampleConfigIsValid(t *testing.T) {
	t.Parallel()
	cfg, err := Load(filepath.Join("..", "..", "..", "..", "deploy", "mozi.example.yaml"), noEnv)
	require.NoError(t, err)
	assert.NotEmpty(t, cfg.Agents, "the example declares agents")
}

// Secrets may come from files (Docker and systemd secrets), named by
// MOZI_*_FILE; the variable itself wins; a missing or empty file is an
// error that does not show the secret.
func TestSecretsFromFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	token := writeFile(t, "token", "gitea-token-123\n")
	empty := writeFile(t, "empty", "")
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	cfg, err := Load("", env(map[string]string{"MOZI_CONFIG": writeFile(t, "mozi.yaml", "listen: 127.0.0.1:1\n"),
		"MOZI_GITEA_TOKEN_FILE": token, "MOZI_WEBHOOK_SECRET": "from-env", "MOZI_WEBHOOK_SECRET_FILE": token}))
	require.NoError(t, err)
	assert.Equal(t, "gitea-token-123", cfg.Gitea.Token.Value(), "one trailing newline dropped")
	assert.Equal(t, "from-env", cfg.Webhook.Secrets[0].Value(), "the variable wins over its file")
	assert.Equal(t, []string{token}, cfg.SecretFiles)

	_, err = Load("", env(map[string]string{"MOZI_GITEA_TOKEN_FILE": filepath.Join(dir, "missing")}))
	require.ErrorContains(t, err, "MOZI_GITEA_TOKEN_FILE")
	_, err = Load("", env(map[string]string{"MOZI_DATABASE_URL_FILE": empty}))
	require.ErrorContains(t, err, "is empty")
}

func TestByteSizes(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]ByteSize{"512": 512, "1KiB": 1024, "8GiB": 8 << 30, "2GB": 2e9, "1.5MiB": 3 << 19} {
		got, err := ParseByteSize(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "lots", "-1", "5 parsecs"} {
		_, err := ParseByteSize(bad)
		assert.Error(t, err, bad)
	}
}

// Validation reports every problem at once, one per line, in the order of
// their keys in the file, however often it runs.
func TestValidationReportsEveryErrorInFileOrder(t *testing.T) {
	t.Parallel()
	body := `listen: 8080
webhook:
  max_attempts: -1
  deploy_context: "("
  task_budget_per_hour: -2
dispatcher:
  lease_ttl: 1s
  max_concurrency: -1
ticker:
  sweep_every: -1s
agents:
  - {login: a, preset: claud}
  - {login: A, preset: codex, sandbox: docker}
`
	want := `mozi.yaml:1: listen: "8080" is not host:port
mozi.yaml:3: webhook.max_attempts: must be at least 1, got -1
mozi.yaml:4: webhook.deploy_context: "(" is not a regular expression: error parsing regexp: missing closing ): ` + "`(`" + `
mozi.yaml:5: webhook.task_budget_per_hour: must be at least 1, got -2
mozi.yaml:7: dispatcher.lease_ttl: must be at least 3s (heartbeats renew it every third), got 1s
mozi.yaml:8: dispatcher.max_concurrency: must be at least 1, got -1
mozi.yaml:10: ticker.sweep_every: must be positive, got -1s
mozi.yaml:12: agents[0].preset: unknown preset "claud" (want one of aider, claude-code, codex, goose, openclaw, opencode, shell)
mozi.yaml:13: agents[1].login: "A" is already declared by agents[0]
mozi.yaml:13: agents[1].sandbox: "docker" is not bwrap or none`
	for range 20 {
		_, err := Parse("mozi.yaml", []byte(body))
		require.Error(t, err)
		require.Equal(t, want, err.Error())
	}
}

func TestMemorySettings(t *testing.T) {
	t.Parallel()
	cfg, err := Parse("mozi.yaml", []byte("listen: 127.0.0.1:1\n"))
	require.NoError(t, err)
	assert.Equal(t, ByteSize(256<<20), cfg.MemoryLimit, "default")
	assert.Equal(t, ByteSize(64<<20), cfg.Webhook.MaxPendingBytes, "default")

	cfg, err = Parse("mozi.yaml", []byte("memory_limit: 1GiB\nwebhook: {max_pending_bytes: 128MiB}\n"))
	require.NoError(t, err)
	assert.Equal(t, ByteSize(1<<30), cfg.MemoryLimit)
	assert.Equal(t, ByteSize(128<<20), cfg.Webhook.MaxPendingBytes)

	_, err = Parse("mozi.yaml", []byte("memory_limit: 10MiB\nwebhook:\n  max_body_bytes: 104857600\n"))
	require.EqualError(t, err, `mozi.yaml:1: memory_limit: must be at least 64MiB, got 10485760 bytes
mozi.yaml:2: webhook.max_pending_bytes: must be at least webhook.max_body_bytes (104857600), got 67108864`)
	_, err = Parse("mozi.yaml", []byte("memory_limit: lots\n"))
	require.EqualError(t, err, `mozi.yaml:1: memory_limit: "lots" is not a size (write e.g. 512MiB, 8GiB or a number of bytes)`)
}
