package console_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/task"
)

// startedAttempt claims t and starts its next attempt, as the spawner does.
func (f *fixture) startedAttempt(t *testing.T, t0 task.Task) task.Attempt {
	t.Helper()
	ctx := context.Background()
	claimForR1(t, f.store, t0.ID)
	claimed, err := f.store.Task(ctx, t0.ID)
	require.NoError(t, err)
	a, ok, err := f.store.StartRun(ctx, claimed, "r1", "")
	require.NoError(t, err)
	require.True(t, ok)
	return a
}

// The task page folds each attempt's stored prompt, escaped: a prompt
// quotes what people wrote in Gitea, markup included.
func TestConsoleTaskPageShowsEachAttemptsPromptEscaped(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false)
	tk := f.task(t, "acme/app", 1)
	first := f.startedAttempt(t, tk)
	first.Outcome = task.AttemptFailed
	_, err := f.store.FinishRun(ctx, repository.RunEnd{Attempt: first, Owner: "r1", Event: task.EventRetry})
	require.NoError(t, err)
	second := f.startedAttempt(t, tk)
	require.NoError(t, f.store.RecordAttemptPrompt(ctx, second.ID, `Fix <script>alert("x")</script> & the token [redacted]`))

	alice := f.signIn(t, "alice", map[string]perm{"acme/app": {pull: true}})
	page := alice.page(t, fmt.Sprintf("/tasks/%d", tk.ID), http.StatusOK)
	assert.Contains(t, page, `<details class="prompt" id="prompt-2">`)
	assert.Contains(t, page, `Fix &lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; the token [redacted]`)
	assert.NotContains(t, page, `<script>alert`)
	assert.Contains(t, page, `<details class="prompt" id="prompt-1"><summary>Attempt 1 · not stored</summary>`,
		"an attempt without a stored prompt says so")
}
