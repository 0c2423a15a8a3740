package spawner

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/prompts"
	"github.com/moziplus/mozi/repository/pgtest"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/spawner/backend"
	"github.com/moziplus/mozi/spawner/backend/backendtest"
)

// textPrompt is a prompter whose prompt is the given text.
type textPrompt string

func (textPrompt) Gather(_ context.Context, t task.Task) (*prompts.Input, error) {
	return &prompts.Input{Task: t}, nil
}

func (p textPrompt) Build(*prompts.Input) (*prompts.Prompt, error) {
	return &prompts.Prompt{Text: string(p)}, nil
}

// The prompt an attempt got is stored with it, redacted of the agent's
// Gitea token and of its credentials as its output is (the cap is
// repository's: TestAttemptPromptsAreStorableAndCapped).
func TestTheAttemptsPromptIsStoredRedacted(t *testing.T) {
	const (
		token  = "gitea-token-of-coder1"
		apiKey = "sk-ant-0123456789"
		prompt = "Fix #3. The reporter pasted " + token + " and " + apiKey + " by mistake."
	)
	ctx := context.Background()
	store := pgtest.Store(t)
	tk := claimed(t, store)
	b := &backendtest.Backend{}
	env := map[string]string{"CODER1_TOKEN": token, "ANTHROPIC_API_KEY": apiKey}
	sp := New(Config{Owner: "r1", StateDir: t.TempDir(), Getenv: func(k string) string { return env[k] },
		Agents: map[string]Agent{"coder1": {Agent: backend.Agent{Login: "coder1", Argv: []string{"agent"}, Workdir: "/w"},
			TokenEnv: "CODER1_TOKEN", PassEnv: []string{"ANTHROPIC_API_KEY"}, Timeout: time.Minute}}},
		store, b, textPrompt(prompt))
	sp.Handle(ctx, tk)

	steps := b.Steps()
	require.Len(t, steps, 1)
	assert.Equal(t, prompt, steps[0].Prompt, "the agent gets its prompt as it was built")
	prompts, err := store.AttemptPrompts(ctx, tk.ID)
	require.NoError(t, err)
	require.Contains(t, prompts, 1)
	assert.Equal(t, "Fix #3. The reporter pasted [redacted] and [redacted] by mistake.", prompts[1])
}
