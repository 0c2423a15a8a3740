package spawner

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/spawner/agenttest"
	"github.com/moziplus/mozi/spawner/backend"
)

// nobody is the user a sandboxed agent runs as when mozi is root.
const nobody = 65534

// Each preset drives its real CLI (skipped when it is not installed,
// failed then under MOZI_REQUIRE_AGENT_CLIS=1) through ProcessRunner against
// the scripted fake model, in a temporary git repository: the CLI runs the
// model's shell command without asking, so the file appears in the working
// directory; mozi reads exactly the tokens (and cost) the model reported; a
// token budget below them ends the run as budget_exceeded (killing it midway
// where usage comes as the run goes), one of exactly them does not. The same
// runs inside a bubblewrap sandbox like mozi's, as root and as nobody.
func TestPresetsDriveRealCLIs(t *testing.T) {
	t.Parallel()
	clis := []struct {
		preset string
		// args exercise the agent's args: key (inserted before a
		// trailing "-").
		args []string
		// live: usage arrives as the run goes, so a budget kills it
		// midway; the others report when their turn ends.
		live bool
	}{
		{preset: "claude-code", args: []string{"--model", agenttest.AnthropicModel}, live: true},
		{preset: "codex", args: []string{"-m", agenttest.OpenAIModel}},
		{preset: "opencode", live: true},
		{preset: "openclaw"},
	}
	runs := []struct {
		name    string
		sandbox bool
		uid     int
		below   bool // a budget below the run's tokens
	}{
		{name: "direct"},
		// Where usage comes at the end the run completes before the kill:
		// this run checks all "direct" does, too.
		{name: "budget exceeded", below: true},
		{name: "bwrap as root", sandbox: true},
		{name: "bwrap as nobody", sandbox: true, uid: nobody},
	}
	for _, c := range clis {
		t.Run(c.preset, func(t *testing.T) {
			t.Parallel()
			cli := agenttest.FindCLI(t, c.preset)
			if out, err := exec.Command(cli.Path, "--version").CombinedOutput(); err == nil {
				t.Logf("%s: %s", cli.Path, strings.TrimSpace(string(out)))
			}
			for _, r := range runs {
				if r.name == "direct" && !c.live {
					continue // "budget exceeded" runs it whole
				}
				t.Run(r.name, func(t *testing.T) {
					t.Parallel()
					if r.sandbox {
						requireBwrap(t, r.uid)
					}
					script := agenttest.Script{File: "hello.txt", Content: "hello from " + c.preset + "\n",
						Answer: "Wrote hello.txt.",
						Tool:   agenttest.Usage{Input: 1200, CacheRead: 300, CacheWrite: 100, Output: 40},
						Final:  agenttest.Usage{Input: 1500, CacheRead: 200, Output: 25},
						// A live run cannot finish before its budget kills it.
						HoldFinal: r.below && c.live}
					in, out := script.TokensIn(agenttest.OpenAIWire(c.preset)), script.TokensOut()
					srv := agenttest.NewServer(t, script)
					work, home := scratchRepo(t, r.uid)

					res, err := ResolveAgent(c.preset, nil, "", c.args)
					require.NoError(t, err)
					vars, err := srv.Env(c.preset, home)
					require.NoError(t, err)
					if r.uid > 0 {
						chownAll(t, home, r.uid)
					}
					a := Agent{Agent: backend.Agent{Login: "coder1", Argv: res.Argv}, Usage: res.Usage, PresetEnv: res.Env, Env: vars}
					// TMPDIR in the home: what a CLI leaves there goes with the test.
					parent := map[string]string{"PATH": cli.PATH, "HOME": home, "LANG": "C.UTF-8", "TMPDIR": filepath.Join(home, "tmp")}
					env := environment(a, Vars{TaskID: 1, Repo: "acme/widget", Issue: 1, Action: "issue_assigned", Attempt: 1},
						func(k string) string { return parent[k] })
					args, stdin := argv(a.Argv, filepath.Join(home, "prompt.md"), "Write hello.txt.")
					args[0] = cli.Path // exec resolves the program on the test's PATH, not the agent's
					require.True(t, stdin, "every preset takes the prompt on stdin")
					if r.sandbox {
						args = append(agenttest.Bwrap(work, home, r.uid), args...)
					}
					budget := in + out // exactly the run's tokens: not over it
					if r.below {
						budget = 1000 // below the first model turn's tokens
					}
					logPath := filepath.Join(t.TempDir(), "run.log")
					got := runIn(t, work, Command{Argv: args, Env: env, Stdin: []byte("Write hello.txt."),
						LogPath: logPath, Timeout: 3 * time.Minute, Usage: a.Usage, MaxTokens: budget}, context.Background())
					log, _ := os.ReadFile(logPath)
					require.Empty(t, srv.Errors(), "the fake model could not answer\n%s", log)

					if r.below {
						require.Equal(t, OutcomeBudget, got.Outcome, "%s\n%s", got.Err, log)
						require.Greater(t, got.TokensIn+got.TokensOut, budget)
						if c.live {
							return // killed midway
						}
					} else {
						require.Equal(t, OutcomeSucceeded, got.Outcome, "%s\n%s", got.Err, log)
					}
					written, err := os.ReadFile(filepath.Join(work, script.File))
					require.NoError(t, err, "the model's shell command did not run in the working directory\n%s", log)
					require.Equal(t, script.Content, string(written))
					require.Equal(t, []string{agenttest.TurnTool, agenttest.TurnFinal}, nonAux(srv.Turns()))
					require.Equal(t, in, got.TokensIn, "tokens in\n%s", log)
					require.Equal(t, out, got.TokensOut, "tokens out\n%s", log)
					if c.preset == "codex" {
						require.Zero(t, got.CostUSD, "codex reports no cost")
					} else {
						require.InDelta(t, script.Cost(), got.CostUSD, 1e-9)
					}
				})
			}
		})
	}
}

// nonAux leaves out requests without a shell tool (session titles).
func nonAux(turns []string) []string {
	var out []string
	for _, t := range turns {
		if t != agenttest.TurnAux {
			out = append(out, t)
		}
	}
	return out
}

// scratchRepo makes a git repository to work in and a home, both reachable
// (and owned) by uid when it is not root.
func scratchRepo(t *testing.T, uid int) (work, home string) {
	t.Helper()
	base, err := os.MkdirTemp("", "mozi-agent-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	require.NoError(t, os.Chmod(base, 0o755))
	work, home = filepath.Join(base, "work"), filepath.Join(base, "home")
	require.NoError(t, os.Mkdir(work, 0o755))
	require.NoError(t, os.Mkdir(home, 0o700))
	require.NoError(t, os.Mkdir(filepath.Join(home, "tmp"), 0o700))
	git := exec.Command("git", "init", "-q", "-b", "main", work)
	git.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := git.CombinedOutput()
	require.NoError(t, err, "git init: %s", out)
	if uid > 0 {
		chownAll(t, work, uid)
		chownAll(t, home, uid)
	}
	return work, home
}

func chownAll(t *testing.T, root string, uid int) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
	require.NoError(t, err)
}

// requireBwrap skips a sandboxed run where bubblewrap (or setpriv, or the
// right to change user) is missing, and fails it under
// MOZI_REQUIRE_AGENT_CLIS=1.
func requireBwrap(t *testing.T, uid int) {
	t.Helper()
	var missing string
	switch {
	case !onPath("bwrap"):
		missing = "bwrap is not installed (apt-get install bubblewrap)"
	case uid > 0 && !onPath("setpriv"):
		missing = "setpriv is not installed"
	case uid > 0 && os.Geteuid() != 0:
		missing = "running as another user needs root"
	}
	if missing == "" {
		return
	}
	if os.Getenv(agenttest.EnvRequireCLIs) == "1" {
		t.Fatal(missing)
	}
	t.Skip(missing)
}

func onPath(name string) bool {
	_, err := exec.LookPath(name)
	return err == nil
}
