package local

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/spawner/backend"
	"github.com/moziplus/mozi/spawner/backend/local/sandbox"
)

func executable(t *testing.T, dir, name string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\nexit 0\n"), 0o755))
	return p
}

// The command checked is the one run: the first copy on the agent's PATH,
// by its absolute path (inside the sandbox a bare name would be looked up
// again). What only an operator can fix is one clear line.
func TestCheckResolvesTheCommandOrSaysWhatIsWrong(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("bwrap is not installed")
		}
		t.Skip("bwrap is not installed")
	}
	dirs := []string{filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")}
	first := executable(t, dirs[0], "fake-agent")
	executable(t, dirs[1], "fake-agent")
	env := []string{"PATH=" + strings.Join(dirs, ":")}
	stateDir := t.TempDir()
	sb, err := sandbox.New("bwrap", filepath.Join(stateDir, "sandbox"))
	require.NoError(t, err)
	withSandbox := New(Config{StateDir: stateDir, Sandbox: sb})
	without := New(Config{StateDir: stateDir, SandboxErr: sandbox.ErrUnavailable})
	tests := []struct {
		name      string
		b         *Backend
		agent     backend.Agent
		wantArgv0 string
		wantError string
	}{
		{name: "unsandboxed", b: withSandbox, agent: backend.Agent{Login: "coder1", Argv: []string{"fake-agent", "{prompt_file}"}},
			wantArgv0: first},
		{name: "sandboxed, in /tmp", b: withSandbox, agent: backend.Agent{Login: "coder1", Argv: []string{"fake-agent"}, Sandboxed: true},
			wantError: "cannot be seen inside its sandbox (/tmp is hidden there)"},
		{name: "sandboxed without bwrap", b: without, agent: backend.Agent{Login: "coder1", Argv: []string{"fake-agent"}, Sandboxed: true},
			wantError: "agent coder1 runs sandboxed: sandbox unavailable"},
		{name: "a worktree without a remote", b: withSandbox, agent: backend.Agent{Login: "coder1", Argv: []string{"fake-agent"}, Worktree: true},
			wantError: "no repository to clone from"},
		{name: "not on PATH", b: withSandbox, agent: backend.Agent{Login: "coder1", Argv: []string{"no-such-agent"}},
			wantError: `command "no-such-agent" not found on PATH`},
		{name: "no command", b: withSandbox, agent: backend.Agent{Login: "coder1"}, wantError: "agent coder1 has no command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.b.Check(tt.agent, env)
			if tt.wantError != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantError)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantArgv0, got.Argv[0])
			assert.Equal(t, tt.agent.Argv[1:], got.Argv[1:], "the arguments are kept")
		})
	}
}
