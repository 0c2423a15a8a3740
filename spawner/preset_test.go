package spawner

import (
	"strings"
	"testing"

	"github.com/moziplus/mozi/spawner/backend"
	"github.com/stretchr/testify/require"
)

func TestPresetsResolve(t *testing.T) {
	t.Parallel()
	for _, name := range PresetNames() {
		r, err := ResolveAgent(name, nil, "echo hi", nil)
		require.NoError(t, err, name)
		require.NotEmpty(t, r.Argv, name)
	}
	tests := []struct {
		name    string
		preset  string
		command []string
		script  string
		args    []string
		argv    []string
		usage   string
		env     map[string]string
	}{
		{name: "claude-code: args at the end, root allowed by its env", preset: "claude-code", args: []string{"--model", "opus"},
			argv: []string{"claude", "-p", "--output-format", "stream-json", "--verbose", "--permission-mode", "bypassPermissions",
				"--model", "opus"},
			usage: UsageClaudeStreamJSON, env: map[string]string{"IS_SANDBOX": "1"}},
		{name: "codex: args before the trailing -", preset: "codex", args: []string{"-m", "gpt-5.5"},
			argv:  []string{"codex", "exec", "--json", "--dangerously-bypass-approvals-and-sandbox", "-m", "gpt-5.5", "-"},
			usage: UsageCodexJSON},
		{name: "opencode", preset: "opencode", args: []string{"-m", "anthropic/claude-sonnet-4-5"},
			argv:  []string{"opencode", "run", "--format", "json", "--auto", "-m", "anthropic/claude-sonnet-4-5"},
			usage: UsageOpencodeJSON},
		{name: "openclaw", preset: "openclaw",
			argv:  []string{"openclaw", "agent", "exec", "--message-file", "-", "--json", "--timeout", "0"},
			usage: UsageOpenclawJSON},
		{name: "goose runs without asking", preset: "goose",
			argv: []string{"goose", "run", "--no-session", "--instructions", PlaceholderPromptFile},
			env:  map[string]string{"GOOSE_MODE": "auto"}},
		{name: "shell", preset: "shell", script: "my-agent --prompt-file \"$MOZI_PROMPT_FILE\"",
			argv: []string{"/bin/sh", "-c", "my-agent --prompt-file \"$MOZI_PROMPT_FILE\""}},
		{name: "own command: no usage format, no preset env", preset: "", command: []string{"my-agent", "{prompt_file}"},
			argv: []string{"my-agent", "{prompt_file}"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := ResolveAgent(tt.preset, tt.command, tt.script, tt.args)
			require.NoError(t, err)
			require.Equal(t, tt.argv, r.Argv)
			require.Equal(t, tt.usage, r.Usage)
			require.Equal(t, tt.env, r.Env)
		})
	}
	_, err := ResolveAgent("cluade", nil, "", nil)
	require.ErrorContains(t, err, `unknown preset "cluade"`)
}

// Resolving never changes the presets: args and env are copies.
func TestResolveDoesNotAliasPresets(t *testing.T) {
	t.Parallel()
	r, err := ResolveAgent("codex", nil, "", []string{"-m", "x"})
	require.NoError(t, err)
	r.Argv[0] = "changed"
	c, err := ResolveAgent("claude-code", nil, "", nil)
	require.NoError(t, err)
	c.Env["IS_SANDBOX"] = "0"
	again, err := ResolveAgent("codex", nil, "", nil)
	require.NoError(t, err)
	require.Equal(t, "codex", again.Argv[0])
	require.NotContains(t, again.Argv, "x")
	p, _ := LookupPreset("claude-code")
	require.Equal(t, "1", p.Env["IS_SANDBOX"])
}

// A preset's env is set first: the agent's env and pass_env win over it,
// and it never carries mozi's own variables.
func TestPresetEnvironment(t *testing.T) {
	t.Parallel()
	a := Agent{Agent: backend.Agent{Login: "c"}, PresetEnv: map[string]string{"IS_SANDBOX": "1", "GOOSE_MODE": "auto", "MOZI_X": "y"},
		Env: map[string]string{"GOOSE_MODE": "approve"}}
	env := environment(a, Vars{}, func(string) string { return "" })
	last := map[string]string{} // exec uses the last value of a repeated name
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		last[k] = v
	}
	require.Equal(t, "1", last["IS_SANDBOX"])
	require.Equal(t, "approve", last["GOOSE_MODE"])
	require.NotContains(t, last, "MOZI_X")
}
