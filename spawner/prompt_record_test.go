package spawner

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/prompts"
	"github.com/moziplus/mozi/repository"
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
// Gitea token and of its credentials as its output is, and cut when huge.
func TestTheAttemptsPromptIsStoredRedacted(t *testing.T) {
	const (
		token  = "gitea-token-of-coder1"
		apiKey = "sk-ant-0123456789"
	)
	huge := strings.Repeat("é", repository.MaxStoredPrompt) // 2 bytes a character: twice the cap
	tests := []struct {
		name   string
		prompt string
		want   func(t *testing.T, stored string)
	}{
		{name: "secrets redacted", prompt: "Fix #3. The reporter pasted " + token + " and " + apiKey + " by mistake.",
			want: func(t *testing.T, stored string) {
				assert.Equal(t, "Fix #3. The reporter pasted [redacted] and [redacted] by mistake.", stored)
			}},
		{name: "a huge prompt is cut with a note", prompt: huge, want: func(t *testing.T, stored string) {
			assert.LessOrEqual(t, len(stored), repository.MaxStoredPrompt)
			assert.Greater(t, len(stored), repository.MaxStoredPrompt-200, "cut near the cap, not far before it")
			assert.True(t, strings.HasPrefix(huge, strings.SplitN(stored, "\n\n[mozi:", 2)[0]), "the start is kept as it was, whole characters")
			assert.Contains(t, stored, "[mozi: prompt cut here, 262144 of its 524288 bytes stored]")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			store := pgtest.Store(t)
			tk := claimed(t, store)
			b := &backendtest.Backend{}
			env := map[string]string{"CODER1_TOKEN": token, "ANTHROPIC_API_KEY": apiKey}
			sp := New(Config{Owner: "r1", StateDir: t.TempDir(), Getenv: func(k string) string { return env[k] },
				Agents: map[string]Agent{"coder1": {Agent: backend.Agent{Login: "coder1", Argv: []string{"agent"}, Workdir: "/w"},
					TokenEnv: "CODER1_TOKEN", PassEnv: []string{"ANTHROPIC_API_KEY"}, Timeout: time.Minute}}},
				store, b, textPrompt(tt.prompt))
			sp.Handle(ctx, tk)

			steps := b.Steps()
			require.Len(t, steps, 1)
			assert.Equal(t, tt.prompt, steps[0].Prompt, "the agent gets its prompt as it was built")
			prompts, err := store.AttemptPrompts(ctx, tk.ID)
			require.NoError(t, err)
			require.Contains(t, prompts, 1)
			tt.want(t, prompts[1])
		})
	}
}
