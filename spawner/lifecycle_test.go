package spawner

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository/pgtest"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/spawner/backend"
	"github.com/moziplus/mozi/spawner/backend/backendtest"
)

// The run lifecycle on a scripted backend (no git, no sandbox, no
// process): how each way a run goes ends its attempt and moves its task,
// what is stopped with grace, and that the place is always released.
func TestLifecycleOnAScriptedBackend(t *testing.T) {
	const secret = "gitea-token-of-coder1"
	tests := []struct {
		name     string
		b        *backendtest.Backend
		timeout  time.Duration
		maxCost  float64
		status   task.Status
		outcome  string // "" when no attempt is recorded
		errPart  string
		retries  int
		heldFor  task.HoldReason
		stopped  bool
		released int
		logPart  string
	}{
		{name: "exit 0", b: &backendtest.Backend{Play: func(backend.Step) backendtest.Script {
			return backendtest.Script{Output: []string{"working\n", "done\n"}}
		}}, status: task.StatusWorking, outcome: task.AttemptSucceeded, released: 1, logPart: "working\ndone\n"},
		{name: "exit 3", b: &backendtest.Backend{Play: func(backend.Step) backendtest.Script {
			return backendtest.Script{Exit: backend.Exit{Code: 3, Why: "exited with status 3"}}
		}}, status: task.StatusPending, outcome: task.AttemptFailed, errPart: "exited with status 3", retries: 1, released: 1},
		{name: "a hang is stopped at its time limit", timeout: 100 * time.Millisecond, b: &backendtest.Backend{
			Play: func(backend.Step) backendtest.Script { return backendtest.Script{UntilStopped: true} }},
			status: task.StatusPending, outcome: task.AttemptTimeout, errPart: "time limit", retries: 1, stopped: true, released: 1},
		{name: "one that ignores SIGTERM is killed after the grace", timeout: 100 * time.Millisecond, b: &backendtest.Backend{
			Play: func(backend.Step) backendtest.Script { return backendtest.Script{UntilStopped: true, IgnoreTerm: true} }},
			status: task.StatusPending, outcome: task.AttemptTimeout, retries: 1, stopped: true, released: 1},
		{name: "over its cost budget", maxCost: 1, b: &backendtest.Backend{Play: func(backend.Step) backendtest.Script {
			return backendtest.Script{Output: []string{`MOZI_USAGE {"tokens_in":10,"tokens_out":5,"cost_usd":1.5}` + "\n"}, UntilStopped: true}
		}}, status: task.StatusPending, outcome: task.AttemptBudget, errPart: "cost $1.50 over its $1.00 budget", retries: 1,
			stopped: true, released: 1},
		{name: "its secret is redacted in its log", b: &backendtest.Backend{Play: func(backend.Step) backendtest.Script {
			return backendtest.Script{Output: []string{"token " + secret[:7], secret[7:] + " leaked\n"}}
		}}, status: task.StatusWorking, outcome: task.AttemptSucceeded, released: 1, logPart: "token [redacted] leaked\n"},
		{name: "a backend that cannot take the run holds the task", b: &backendtest.Backend{
			StartErr: fmt.Errorf("create Job: %w: connection refused", backend.ErrUnavailable)},
			status: task.StatusPending, outcome: task.AttemptUnavailable, errPart: "connection refused", heldFor: task.HeldForBackend,
			released: 1},
		{name: "a start that fails is a failed attempt", b: &backendtest.Backend{StartErr: fmt.Errorf("image acme/go:1.26 not found")},
			status: task.StatusPending, outcome: task.AttemptSpawnError, errPart: "image acme/go:1.26 not found", retries: 1, released: 1},
		{name: "a busy branch holds the task, no attempt", b: &backendtest.Backend{
			PrepareErr: fmt.Errorf("fix/3-x: %w", backend.ErrBranchBusy)}, status: task.StatusPending, heldFor: task.HeldForBranch},
		{name: "an unreachable remote holds the task, no attempt", b: &backendtest.Backend{
			PrepareErr: fmt.Errorf("fetch: %w", backend.ErrUnreachable)}, status: task.StatusPending, heldFor: task.HeldForGitea},
		{name: "a branch gone fails the task", b: &backendtest.Backend{
			PrepareErr: fmt.Errorf("fix/3-x: %w", backend.ErrBranchGone)}, status: task.StatusFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			store := pgtest.Store(t)
			tk := claimed(t, store)
			timeout := tt.timeout
			if timeout == 0 {
				timeout = time.Minute
			}
			sp := New(Config{Owner: "r1", StateDir: t.TempDir(), KillGrace: 50 * time.Millisecond,
				Getenv: func(k string) string { return map[string]string{"CODER1_TOKEN": secret}[k] },
				Agents: map[string]Agent{"coder1": {Agent: backend.Agent{Login: "coder1", Argv: []string{"agent"}, Workdir: "/w"},
					TokenEnv: "CODER1_TOKEN", Timeout: timeout, MaxCostUSD: tt.maxCost}}}, store, tt.b, staticPrompt{})
			sp.Handle(ctx, tk)

			got, err := store.Task(ctx, tk.ID)
			require.NoError(t, err)
			assert.Equal(t, tt.status, got.Status)
			assert.Equal(t, tt.retries, got.RetryCount, "retries counted")
			assert.Equal(t, tt.heldFor, got.HeldFor)
			if !got.Status.Terminal() { // a terminal task's lease goes with its runner (the dispatcher)
				assert.Empty(t, got.LeaseOwner, "the lease is given back")
			}
			attempts, err := store.Attempts(ctx, tk.ID)
			require.NoError(t, err)
			if tt.outcome == "" {
				assert.Empty(t, attempts)
			} else {
				require.Len(t, attempts, 1)
				assert.Equal(t, tt.outcome, attempts[0].Outcome)
				assert.Contains(t, attempts[0].Error, tt.errPart)
				assert.NotContains(t, attempts[0].OutputTail, secret)
				if tt.logPart != "" {
					log, err := os.ReadFile(attempts[0].LogPath)
					require.NoError(t, err)
					assert.Contains(t, string(log), tt.logPart)
					assert.NotContains(t, string(log), secret)
				}
			}
			if tt.stopped {
				assert.Equal(t, []time.Duration{50 * time.Millisecond}, tt.b.Stops(), "stopped once, with the grace")
			} else {
				assert.Empty(t, tt.b.Stops())
			}
			assert.Equal(t, tt.released, tt.b.Released(), "places released")
			for _, s := range tt.b.Steps() {
				assert.Contains(t, s.Env, "GITEA_TOKEN="+secret, "the agent's own token only")
				assert.Equal(t, "do it", s.Prompt)
				assert.Equal(t, timeout, s.Timeout)
			}
		})
	}
}
