package webhook_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/gitea/payload"
	"github.com/moziplus/mozi/webhook/recording"
)

// newerStory is the task table after the story recorded from Gitea
// 1.27.3 (testdata/gitea-1.27.3/README.md): issue #1 created by coder1
// with coder1 assigned, coder2 assigned too, PR #2 by coder2 closing #1,
// reviewed, CI failing then passing, approved, merged by lead; #1 closed,
// reopened, closed.
var newerStory = []row{
	{"issue_assigned", "bug", "coder1", 1, "done", 0, 0}, // 001 opened with coder1 (003 assigned: the same task)
	{"issue_assigned", "bug", "coder2", 1, "done", 0, 2}, // 004; PR #2 opened, merged (019)
	{"mention", "", "infra1", 1, "done", 0, 0},           // 005; #1 closed (020)
	{"review_request", "", "reviewer1", 2, "done", 0, 2}, // 009; reviewed (010)
	{"review_result", "", "coder2", 2, "done", 0, 2},     // 010 rejected; pushed (012)
	{"review_updated", "", "reviewer1", 2, "done", 0, 2}, // 012; reviewed again (016)
	{"ci_failure", "", "coder2", 2, "done", 0, 2},        // 014; merged
	{"review_comment", "", "coder2", 2, "done", 0, 2},    // 016; merged
	{"mention", "", "coder2", 2, "done", 0, 2},           // 017; merged
	{"review_result", "", "coder2", 2, "done", 0, 2},     // 018 approved; merged
	{"review_merged", "", "coder2", 2, "pending", 0, 2},  // 019: lead merged coder2's PR
	{"issue_closed", "", "coder1", 1, "pending", 0, 0},   // 020: lead closed coder1's issue
	{"issue_assigned", "bug", "coder1", 1, "done", 0, 0}, // 024 reopened; closed (025)
	{"issue_assigned", "bug", "coder2", 1, "done", 0, 0}, // 024 reopened; closed (025)
}

// forgejoStory is the same story recorded from Forgejo: no commit status
// webhook (so no ci_failure from a delivery: the status poll finds it)
// and no PR-level comment in the recording.
var forgejoStory = []row{
	newerStory[0], newerStory[1], newerStory[2], newerStory[3], newerStory[4], newerStory[5],
	newerStory[7], newerStory[9], newerStory[10], newerStory[11], newerStory[12], newerStory[13],
}

// The story recorded from newer servers goes through the real intake and
// rules into the same tasks: Gitea 1.27 only added fields, Forgejo sends
// X-Forgejo-* headers beside X-Gitea-* (same signature) and may send them
// alone.
func TestRecordedStoryOnNewerServers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		dir  string
		keep []string // headers kept (nil: all recorded)
		want []row
	}{
		{"Gitea 1.27.3", "gitea-1.27.3", nil, newerStory},
		{"Forgejo 10", "forgejo-10.0.0-dev", nil, forgejoStory},
		{"Forgejo 10, X-Forgejo-* headers only", "forgejo-10.0.0-dev", []string{"X-Forgejo-"}, forgejoStory},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			fixtures, err := recording.LoadDir(recording.DirOf(tt.dir))
			require.NoError(t, err)
			for _, f := range fixtures {
				if tt.keep != nil {
					f = f.KeepHeaders(tt.keep...)
					require.Empty(t, f.Header("X-Gitea-Signature"), "only %v kept", tt.keep)
				}
				require.Equal(t, http.StatusAccepted, b.post(t, f, nil), f.Name)
			}
			b.drain(t)
			got := rows(b.tasks(t))
			assert.Equal(t, tt.want, got, "\n got: %v", got)

			ctx := context.Background()
			deliveries, err := b.store.ListDeliveries(ctx, repository.DeliveryFilter{Limit: 1000})
			require.NoError(t, err)
			require.Len(t, deliveries, len(fixtures))
			for _, d := range deliveries {
				assert.NotEqual(t, repository.OutcomeParked, d.Outcome, "delivery %s: %s", d.ID, d.LastError)
				assert.False(t, strings.HasPrefix(d.ID, "sha256:"), "delivery %s is known by the id the server gave it", d.ID)
			}
			env, err := payload.Peek(fixtures[0].Body)
			require.NoError(t, err)
			pr, err := b.store.PullRequest(ctx, env.Repo, 2)
			require.NoError(t, err)
			assert.True(t, pr.Merged)
			assert.Equal(t, []string{env.Repo + "#1"}, pr.LinkedIssues)
		})
	}
}

// An issue created with an assignee sends opened and assigned: Gitea 1.27
// opened first, Gitea 1.25 and Forgejo assigned first. Either way, one
// task.
func TestOpenedAndAssignedInEitherOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, dir string
		first     []string // delivery prefixes, in order
	}{
		{"Gitea 1.27.3: opened, labelled, assigned", "gitea-1.27.3", []string{"001", "002", "003"}},
		{"Forgejo 10: assigned, opened, labelled", "forgejo-10.0.0-dev", []string{"001", "002", "003"}},
		{"Gitea 1.27.3 delivered twice", "gitea-1.27.3", []string{"001", "003", "001", "003"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			fixtures, err := recording.LoadDir(recording.DirOf(tt.dir))
			require.NoError(t, err)
			sent := map[string]bool{}
			for _, prefix := range tt.first {
				override := map[string]string(nil)
				if sent[prefix] {
					override = recording.WithDelivery("again-" + prefix) // a second hook, or Gitea's Replay
				}
				sent[prefix] = true
				require.Equal(t, http.StatusAccepted, b.post(t, recording.Find(fixtures, prefix), override), prefix)
				b.drain(t)
			}
			assert.Equal(t, []row{{"issue_assigned", "bug", "coder1", 1, "pending", 0, 0}}, rows(b.tasks(t)))
		})
	}
}

// X-Forgejo-Signature alone is checked as X-Gitea-Signature is.
func TestForgejoSignature(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fixtures, err := recording.LoadDir(recording.DirOf("forgejo-10.0.0-dev"))
	require.NoError(t, err)
	f := fixtures[0].KeepHeaders("X-Forgejo-")
	tests := []struct {
		name     string
		override map[string]string
		want     int
	}{
		{"wrong signature", map[string]string{"X-Forgejo-Signature": strings.Repeat("0", 64), "X-Forgejo-Delivery": "wrong"}, http.StatusUnauthorized},
		{"no signature", map[string]string{"X-Forgejo-Signature": "", "X-Forgejo-Delivery": "unsigned"}, http.StatusUnauthorized},
		{"recorded signature", nil, http.StatusAccepted},
		{"redelivery of the same id", nil, http.StatusOK},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, b.post(t, f, tt.override), tt.name)
	}
	d, err := b.store.Delivery(context.Background(), f.Header("X-Forgejo-Delivery"))
	require.NoError(t, err, "stored under Forgejo's delivery id")
	assert.Equal(t, "issues", d.Event)
	assert.Equal(t, "issue_assign", d.EventType)
	assert.Equal(t, f.Header("X-Forgejo-Event"), d.Headers["X-Forgejo-Event"], "the inbox keeps Forgejo's headers")
}
