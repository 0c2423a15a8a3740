package webhook_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/webhook"
	"github.com/moziplus/mozi/webhook/recording"
)

// The recorded story's merge of coder2's PR #4 leaves its outcome: one
// red CI round (025), one "changes requested" (021), opened (019) before
// merged (030); the push answering the review (023) is coder2's, or, when
// the same delivery names a person as its sender, makes the merge not
// autonomous (mozi's own login is no person). PR #6 was closed unmerged:
// no outcome.
func TestRecordedMergeOutcome(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, pusher string
		human        bool
	}{
		{"agent pushed", "coder2", false},
		{"person pushed", "alice", true},
		{"mozi pushed", "mozi", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			for _, f := range recording.MustLoad() {
				if strings.HasPrefix(f.Name, "023") {
					var err error
					f, err = f.Edit(func(p map[string]any) { p["sender"].(map[string]any)["login"] = tc.pusher })
					require.NoError(t, err)
					f.Headers["X-Gitea-Signature"] = webhook.Sign(f.Body, secret)
				}
				require.Equal(t, http.StatusAccepted, b.post(t, f, nil), f.Name)
			}
			b.drain(t)

			ctx := context.Background()
			got, err := b.store.Outcome(ctx, "acme/widget", 4)
			require.NoError(t, err)
			assert.Equal(t, "coder2", got.Agent)
			assert.Equal(t, tc.human, got.HumanPush)
			assert.Equal(t, 1, got.CIRounds)
			assert.Equal(t, 1, got.ReviewRounds)
			assert.Zero(t, got.Tokens, "no agent ran")
			require.NotNil(t, got.AssignToPR, "#3 was assigned to coder2 (013) before #4 opened")
			require.NotNil(t, got.PRToMerge)
			_, err = b.store.Outcome(ctx, "acme/widget", 6)
			assert.ErrorIs(t, err, task.ErrNotFound)
		})
	}
}
