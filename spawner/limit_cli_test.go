package spawner

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/spawner/agenttest"
	"github.com/moziplus/mozi/spawner/backend"
)

// Claude Code (signed in with a subscription), codex and opencode, really
// run against a fake model whose first answers are the provider's
// usage-limit 429: the run ends paused with the reset the provider gave
// (codex prints it to the minute: the end of that minute); the next run,
// past the limit, works. Claude Code on an API key sees a 429 but no
// reset: paused, with none. opencode retries a 429 five times by itself
// (2 s doubling without a retry-after) and only then prints it, so its
// fake refuses six requests; given a retry-after it waits that long and
// goes on: no pause.
func TestRealCLIsPauseAtUsageLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, preset string
		args         []string
		subscription bool
		openAI       bool // opencode through the AI SDK's OpenAI provider
		refusals     int  // model requests refused (0: one)
		noReset      bool // the CLI reports no reset
		serverNone   bool // the server gives none either
		resetIn      time.Duration
		waitsOut     bool // the CLI waits for the reset itself: the first run succeeds
	}{
		{name: "claude-code subscription", preset: "claude-code", args: []string{"--model", agenttest.AnthropicModel}, subscription: true},
		{name: "claude-code api key", preset: "claude-code", args: []string{"--model", agenttest.AnthropicModel}, noReset: true},
		{name: "codex", preset: "codex", args: []string{"-m", agenttest.OpenAIModel}},
		{name: "opencode openai", preset: "opencode", openAI: true, refusals: 6},
		{name: "opencode anthropic no reset", preset: "opencode", refusals: 6, noReset: true, serverNone: true},
		{name: "opencode anthropic retry-after", preset: "opencode", resetIn: 15 * time.Second, waitsOut: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cli := agenttest.FindCLI(t, tt.preset)
			reset := time.Now().Add(90 * time.Second).Truncate(time.Second)
			limit := &agenttest.Limit{Requests: max(tt.refusals, 1), Reset: reset}
			switch {
			case tt.serverNone:
				limit.Reset = time.Time{}
			case tt.resetIn > 0:
				limit.Reset, limit.ResetIn = time.Time{}, tt.resetIn
			}
			script := agenttest.Script{File: "hello.txt", Content: "hello\n", Answer: "Wrote hello.txt.",
				Tool: agenttest.Usage{Input: 10, Output: 4}, Final: agenttest.Usage{Input: 20, Output: 5},
				Limit: limit, Subscription: tt.subscription, OpencodeOpenAI: tt.openAI}
			srv := agenttest.NewServer(t, script)
			work, home := scratchRepo(t, 0)
			res, err := ResolveAgent(tt.preset, nil, "", tt.args)
			require.NoError(t, err)
			vars, err := srv.Env(tt.preset, home)
			require.NoError(t, err)
			a := Agent{Agent: backend.Agent{Login: "coder1", Argv: res.Argv}, Usage: res.Usage, PresetEnv: res.Env, Env: vars}
			parent := map[string]string{"PATH": cli.PATH, "HOME": home, "LANG": "C.UTF-8", "TMPDIR": filepath.Join(home, "tmp")}
			env := environment(a, Vars{TaskID: 1, Repo: "acme/widget", Issue: 1, Action: "issue_assigned", Attempt: 1},
				func(k string) string { return parent[k] })
			args, _ := argv(a.Argv, filepath.Join(home, "prompt.md"), "Write hello.txt.")
			args[0] = cli.Path
			run := func() (Result, string) {
				logPath := filepath.Join(t.TempDir(), "run.log")
				// opencode's own retries take a minute or two.
				got := runIn(t, work, Command{Argv: args, Env: env, Stdin: []byte("Write hello.txt."),
					LogPath: logPath, Timeout: 5 * time.Minute, Usage: a.Usage}, context.Background())
				log, _ := os.ReadFile(logPath)
				return got, string(log)
			}
			var limited []string
			for range limit.Requests {
				limited = append(limited, agenttest.TurnLimited)
			}
			turns := append(limited, agenttest.TurnTool, agenttest.TurnFinal)

			got, log := run()
			if tt.waitsOut {
				require.Equal(t, OutcomeSucceeded, got.Outcome, "%s\n%s", got.Err, log)
				require.Equal(t, turns, nonAux(srv.Turns()))
				// It retried after the retry-after, not at once.
				var refused, next time.Time
				for _, r := range srv.Requests() {
					switch {
					case r.Turn == agenttest.TurnLimited:
						refused = r.At
					case r.Turn == agenttest.TurnTool:
						next = r.At
					}
				}
				require.GreaterOrEqual(t, next.Sub(refused), tt.resetIn-2*time.Second)
				require.Empty(t, srv.Errors())
				return
			}
			require.Equal(t, OutcomePaused, got.Outcome, "%s\n%s", got.Err, log)
			switch {
			case tt.noReset:
				require.True(t, got.Reset.IsZero(), "%s\n%s", got.Reset, log)
			case tt.preset == "codex":
				require.Equal(t, reset.Truncate(time.Minute).Add(time.Minute), got.Reset.Truncate(time.Second), log)
			default:
				require.True(t, reset.Equal(got.Reset), "reset %s, read %s\n%s", reset, got.Reset, log)
			}
			require.Contains(t, got.Err, "usage limit reached")

			got, log = run()
			require.Equal(t, OutcomeSucceeded, got.Outcome, "%s\n%s", got.Err, log)
			require.Equal(t, turns, nonAux(srv.Turns()))
			require.Empty(t, srv.Errors())
		})
	}
}
