package spawner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moziplus/mozi/spawner/backend"
	"github.com/moziplus/mozi/spawner/backend/local"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// run runs c on the local backend, without a sandbox, in a directory of
// its own.
func run(t *testing.T, c Command, ctx context.Context) Result {
	t.Helper()
	return runIn(t, t.TempDir(), c, ctx)
}

// runIn runs c on the local backend, without a sandbox, in dir.
func runIn(t *testing.T, dir string, c Command, ctx context.Context) Result {
	t.Helper()
	if c.LogPath == "" {
		c.LogPath = filepath.Join(t.TempDir(), "logs", "run.log")
	}
	sp := New(Config{StateDir: t.TempDir(), KillGrace: 500 * time.Millisecond}, nil, local.New(local.Config{StateDir: t.TempDir()}), nil)
	r := backend.Run{TaskID: 1, Attempt: 1, Agent: backend.Agent{Login: "coder1", Workdir: dir}}
	pl, err := sp.backend.Prepare(ctx, r)
	require.NoError(t, err)
	defer pl.Release()
	return sp.execute(ctx, pl, r, c)
}

func sh(script string) []string { return []string{"/bin/sh", "-c", script} }

func TestProcessOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cmd     Command
		outcome string
		exit    int
		errPart string
		tail    string
	}{
		{"success", Command{Argv: sh("echo hello; echo oops >&2")}, OutcomeSucceeded, 0, "", "hello\noops\n"},
		{"failure", Command{Argv: sh("echo bad; exit 3")}, OutcomeFailed, 3, "exited with status 3", "bad\n"},
		{"no such command", Command{Argv: []string{"mozi-no-such-agent"}}, OutcomeSpawnError, -1, "executable file not found", ""},
		{"timeout", Command{Argv: sh("echo start; sleep 30"), Timeout: 300 * time.Millisecond}, OutcomeTimeout, -1, "time limit", "start\n"},
		{"cost budget", Command{Argv: sh(`echo 'MOZI_USAGE {"tokens_in":10,"tokens_out":5,"cost_usd":1.5}'; sleep 30`),
			MaxCostUSD: 1}, OutcomeBudget, -1, "cost $1.50 over its $1.00 budget", ""},
		{"token budget", Command{Argv: sh(`echo '{"type":"turn.completed","usage":{"input_tokens":900,"output_tokens":200}}'; sleep 30`),
			Usage: "codex-json", MaxTokens: 1000}, OutcomeBudget, -1, "1100 tokens over its 1000 budget", ""},
		{"tail is bounded", Command{Argv: sh("yes abcdefgh | head -c 100000"), TailBytes: 1024}, OutcomeSucceeded, 0, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := run(t, tt.cmd, context.Background())
			assert.Equal(t, tt.outcome, r.Outcome)
			assert.Equal(t, tt.exit, r.ExitCode)
			if tt.errPart != "" {
				assert.Contains(t, r.Err, tt.errPart)
			}
			if tt.tail != "" {
				assert.Equal(t, tt.tail, r.Tail)
			}
			assert.LessOrEqual(t, len(r.Tail), max(tt.cmd.TailBytes, 16<<10))
		})
	}
}

// A hung agent and everything it started are killed at the timeout: no
// process of its group is left.
func TestTimeoutKillsTheWholeGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pids")
	// The agent starts children that ignore SIGTERM, then hangs.
	script := `trap '' TERM; (trap '' TERM; sleep 60) & echo $! >> ` + pidFile + `; (sleep 60) & echo $$ >> ` + pidFile + `; sleep 60`
	r := runIn(t, dir, Command{Argv: sh(script), Timeout: 300 * time.Millisecond}, context.Background())
	require.Equal(t, OutcomeTimeout, r.Outcome)
	data, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pids := strings.Fields(string(data))
	require.Len(t, pids, 2)
	leader := pids[1]
	var pgid int
	_, err = fmtSscan(leader, &pgid)
	require.NoError(t, err)
	deadline := time.Now().Add(2 * time.Second)
	for !local.GroupGone(pgid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	assert.True(t, local.GroupGone(pgid), "a process of the agent's group survived")
}

func TestShutdownInterruptsAndLeaseLossStops(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	r := run(t, Command{Argv: sh("sleep 30")}, ctx)
	assert.Equal(t, OutcomeInterrupted, r.Outcome)

	lctx, lcancel := context.WithCancelCause(context.Background())
	time.AfterFunc(200*time.Millisecond, func() { lcancel(ErrLeaseLost) })
	r = run(t, Command{Argv: sh("sleep 30")}, lctx)
	assert.Equal(t, OutcomeLeaseLost, r.Outcome)
}

func TestPromptDelivery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	promptFile := filepath.Join(dir, "prompt.md")
	require.NoError(t, os.WriteFile(promptFile, []byte("the prompt"), 0o600))

	args, stdin := argv([]string{"agent", "--file", PlaceholderPromptFile}, promptFile, "the prompt")
	assert.Equal(t, []string{"agent", "--file", promptFile}, args)
	assert.False(t, stdin)
	args, stdin = argv([]string{"agent", "--message={prompt}"}, promptFile, "the prompt")
	assert.Equal(t, []string{"agent", "--message=the prompt"}, args)
	assert.False(t, stdin)
	_, stdin = argv([]string{"agent", "-p"}, promptFile, "the prompt")
	assert.True(t, stdin, "without a placeholder the prompt goes to stdin")

	r := run(t, Command{Argv: sh("cat"), Stdin: []byte("from stdin")}, context.Background())
	assert.Equal(t, OutcomeSucceeded, r.Outcome)
	assert.True(t, strings.HasPrefix(r.Tail, "from stdin"))
}

func TestEnvironmentIsMinimal(t *testing.T) {
	t.Parallel()
	parent := map[string]string{
		"PATH": "/usr/bin:/bin", "HOME": "/home/mozi",
		"MOZI_DATABASE_URL": "postgres://u:secret@db/mozi", "MOZI_WEBHOOK_SECRET": "hook-secret",
		"MOZI_GITEA_TOKEN": "mozi-own-token", "AWS_SECRET_ACCESS_KEY": "aws", "PGPASSWORD": "pg",
		"CODER1_GITEA_TOKEN": "coder1-token", "ANTHROPIC_API_KEY": "anthropic",
	}
	getenv := func(k string) string { return parent[k] }
	a := Agent{Agent: backend.Agent{Login: "coder1"}, TokenEnv: "CODER1_GITEA_TOKEN", PassEnv: []string{"ANTHROPIC_API_KEY", "MOZI_DATABASE_URL"},
		Env: map[string]string{"GOFLAGS": "-mod=mod", "MOZI_WEBHOOK_SECRET": "x"}}
	env := environment(a, Vars{TaskID: 7, Repo: "acme/widget", Issue: 3, Action: "issue_assigned", Attempt: 1,
		PromptFile: "/run/prompt.md", GiteaURL: "http://gitea:3000"}, getenv)
	got := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	for _, secret := range []string{"postgres://u:secret@db/mozi", "hook-secret", "mozi-own-token", "aws", "pg"} {
		for k, v := range got {
			assert.NotEqual(t, secret, v, "%s carries one of mozi's secrets", k)
		}
	}
	assert.Equal(t, "coder1-token", got["GITEA_TOKEN"], "the agent's own token")
	assert.Equal(t, "coder1-token", got["CODER1_GITEA_TOKEN"])
	assert.Equal(t, "anthropic", got["ANTHROPIC_API_KEY"], "passed through on request")
	assert.Equal(t, "-mod=mod", got["GOFLAGS"])
	assert.Equal(t, "7", got["MOZI_TASK_ID"])
	assert.Equal(t, "acme/widget", got["MOZI_REPO"])
	assert.Equal(t, "3", got["MOZI_ISSUE"])
	assert.Equal(t, "/run/prompt.md", got["MOZI_PROMPT_FILE"])
	assert.NotContains(t, got, "MOZI_DATABASE_URL")
	assert.NotContains(t, got, "MOZI_WEBHOOK_SECRET")
}

// An agent that exits 0 while a background child (npm run dev &, nohup …)
// still holds its output succeeded: the child is killed with its group,
// and what the agent wrote is kept.
func TestBackgroundChildHoldingOutput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		script string
	}{
		{"background child", "sleep 30 &"},
		{"background child ignoring SIGTERM", "(trap '' TERM; sleep 30) &"},
		{"nohup", "nohup sleep 30 &"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			pidFile := filepath.Join(dir, "pid")
			r := runIn(t, dir, Command{Argv: sh(tt.script + " echo $$ > " + pidFile + "; echo done; exit 0"),
				Timeout: time.Minute}, context.Background())
			assert.Equal(t, OutcomeSucceeded, r.Outcome, r.Err)
			assert.Equal(t, 0, r.ExitCode)
			assert.Empty(t, r.Err)
			assert.Equal(t, "done\n", r.Tail)

			data, err := os.ReadFile(pidFile)
			require.NoError(t, err)
			var pgid int
			_, err = fmtSscan(strings.TrimSpace(string(data)), &pgid)
			require.NoError(t, err)
			require.Eventually(t, func() bool { return local.GroupGone(pgid) }, 5*time.Second, 20*time.Millisecond,
				"the child the agent left behind survived it")
		})
	}
}

// A log that cannot be written (disk full) costs the log, not the run: the
// agent keeps its output pipe, the tail and the usage meter are still fed,
// the outcome is the agent's and says the log is incomplete.
func TestUnwritableLog(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full here")
	}
	lots := "for i in $(seq 1 20000); do echo line $i; done; echo last; "
	usage := `echo 'MOZI_USAGE {"tokens_in":5,"tokens_out":2}'; `
	tests := []struct {
		name    string
		cmd     Command
		outcome string
		exit    int
		errPart string
		tokens  int64
	}{
		{"success", Command{Argv: sh(lots + usage)}, OutcomeSucceeded, 0, "", 7},
		{"failure", Command{Argv: sh(lots + usage + "exit 3")}, OutcomeFailed, 3, "exited with status 3; ", 7},
		{"budget", Command{Argv: sh(lots + usage + "sleep 30"), MaxTokens: 6}, OutcomeBudget, -1, "killed: 7 tokens over its 6 budget; ", 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.cmd.LogPath = "/dev/full"
			r := run(t, tt.cmd, context.Background())
			assert.Equal(t, tt.outcome, r.Outcome, r.Err)
			assert.Equal(t, tt.exit, r.ExitCode)
			assert.True(t, strings.HasPrefix(r.Err, tt.errPart), r.Err)
			assert.Contains(t, r.Err, "log incomplete: write /dev/full: no space left on device")
			assert.Equal(t, 1, strings.Count(r.Err, "log incomplete"), "the error is reported once")
			assert.Equal(t, tt.tokens, r.TokensIn+r.TokensOut)
			assert.Contains(t, r.Tail, "line 20000\nlast\nMOZI_USAGE")
		})
	}
}

// What an agent prints of its own secrets (env, curl -v) is redacted in the
// attempt's tail and log, a secret split across writes too.
func TestSecretsAreRedacted(t *testing.T) {
	t.Parallel()
	const token, key = "gitea-token-0123456789abcdef", "sk-ant-secret-key"
	tests := []struct {
		name   string
		script string
		want   string
	}{
		{"env", "env | grep -E '^(GITEA_TOKEN|CODER1_GITEA_TOKEN|ANTHROPIC_API_KEY)=' | sort",
			"ANTHROPIC_API_KEY=[redacted]\nCODER1_GITEA_TOKEN=[redacted]\nGITEA_TOKEN=[redacted]\n"},
		{"split across writes", "printf 'Authorization: token gitea-tok'; sleep 0.2; printf 'en-0123456789abcdef\\n' >&2",
			"Authorization: token [redacted]\n"},
		{"a prefix at the end is kept", "printf 'x gitea-token'", "x gitea-token"},
		{"twice in a row", "printf '%s%s\\n' \"$GITEA_TOKEN\" \"$ANTHROPIC_API_KEY\"", "[redacted][redacted]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			logPath := filepath.Join(t.TempDir(), "run.log")
			r := run(t, Command{Argv: sh(tt.script), LogPath: logPath, Secrets: []string{key, ""},
				Env: []string{"PATH=/usr/bin:/bin", "GITEA_TOKEN=" + token, "CODER1_GITEA_TOKEN=" + token, "ANTHROPIC_API_KEY=" + key}},
				context.Background())
			require.Equal(t, OutcomeSucceeded, r.Outcome, r.Err)
			assert.Equal(t, tt.want, r.Tail)
			data, err := os.ReadFile(logPath)
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(data))
		})
	}
}

func TestRedactor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		secrets []string
		writes  []string
		want    string
	}{
		{"no secrets", nil, []string{"a", "b"}, "ab"},
		{"whole", []string{"hunter22"}, []string{"pw=hunter22\n"}, "pw=[redacted]\n"},
		{"split in three", []string{"hunter22"}, []string{"pw=hun", "te", "r22 ok"}, "pw=[redacted] ok"},
		{"byte by byte", []string{"hunter22"}, strings.Split("a hunter22 b", ""), "a [redacted] b"},
		{"false start", []string{"hunter22"}, []string{"hunt", "hunter", "22"}, "hunt[redacted]"},
		{"prefix left at the end", []string{"hunter22"}, []string{"x hunter2"}, "x hunter2"},
		{"overlapping secrets", []string{"abcd1234", "1234wxyz"}, []string{"abcd1234wxyz"}, "[redacted]wxyz"},
		{"longest first", []string{"abcd", "abcdefgh"}, []string{"abcdefgh abcd"}, "[redacted] [redacted]"},
		{"too short to redact", []string{"", "ab"}, []string{"abc"}, "abc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out strings.Builder
			w := newRedactor(&out, tt.secrets)
			for _, s := range tt.writes {
				n, err := w.Write([]byte(s))
				require.NoError(t, err)
				require.Equal(t, len(s), n)
			}
			w.Flush()
			assert.Equal(t, tt.want, out.String())
		})
	}
}

// The run's output is redacted of the credentials an agent is given, found
// by their variables' names; other variables' values stay readable.
func TestSecretValuesAreTheCredentialsPassed(t *testing.T) {
	t.Parallel()
	parent := map[string]string{"ANTHROPIC_API_KEY": "sk-ant-123456", "OPENAI_API_KEY": "", "HTTPS_PROXY": "http://proxy:3128",
		"NPM_TOKEN": "npm_abcdef", "GOFLAGS": "-mod=mod"}
	a := Agent{Agent: backend.Agent{Login: "coder1"}, PassEnv: []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "HTTPS_PROXY", "NPM_TOKEN"},
		Env: map[string]string{"DB_PASSWORD": "hunter2hunter2", "GOFLAGS": "-mod=mod", "Sentry_Auth": "sntry-xyz"}}
	got := a.secretValues(func(k string) string { return parent[k] })
	assert.ElementsMatch(t, []string{"sk-ant-123456", "npm_abcdef", "hunter2hunter2", "sntry-xyz"}, got)
}
