package payload

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/webhook/recording"
)

// Every delivery recorded from Gitea 1.25.4, Gitea 1.27.3 and Forgejo 10
// (there also with its X-Forgejo-* headers alone) is read and parsed.
func TestParseEveryRecordedDelivery(t *testing.T) {
	t.Parallel()
	tests := []struct {
		dir  string
		keep []string
	}{
		{"gitea-1.25", nil}, {"gitea-1.27.3", nil}, {"forgejo-10.0.0-dev", nil}, {"forgejo-10.0.0-dev", []string{"X-Forgejo-"}},
	}
	for _, tt := range tests {
		fixtures, err := recording.LoadDir(recording.DirOf(tt.dir))
		require.NoError(t, err)
		for _, f := range fixtures {
			if tt.keep != nil {
				f = f.KeepHeaders(tt.keep...)
			}
			hd := ReadHeaders(f.HTTPHeader())
			require.NotEmpty(t, hd.Delivery, f.Name)
			require.NotEmpty(t, hd.Event, f.Name)
			require.Len(t, hd.Signature, 64, f.Name)
			env, err := Peek(f.Body)
			require.NoError(t, err, f.Name)
			assert.Contains(t, env.Repo, "acme/", f.Name)
			kind := Classify(hd.Event, hd.EventType)
			if kind == KindIgnored {
				continue
			}
			ev, err := Parse(kind, f.Body)
			require.NoError(t, err, f.Name)
			assert.NotEmpty(t, ev.SemanticKey(), f.Name)
		}
	}
}

func TestReadHeaders(t *testing.T) {
	t.Parallel()
	const sig = "94773e513fcb2f94dd1a6f9da29e71b76a8873446af717c323d5171e48e18d5a"
	want := Headers{Event: "issues", EventType: "issue_assign", Delivery: "d-1", Signature: sig}
	tests := []struct {
		name    string
		headers map[string]string
		want    Headers
	}{
		{"Gitea", map[string]string{"X-Gitea-Event": "issues", "X-Gitea-Event-Type": "issue_assign",
			"X-Gitea-Delivery": "d-1", "X-Gitea-Signature": sig}, want},
		{"Forgejo alone", map[string]string{"X-Forgejo-Event": "issues", "X-Forgejo-Event-Type": "issue_assign",
			"X-Forgejo-Delivery": "d-1", "X-Forgejo-Signature": sig}, want},
		{"Forgejo beside Gitea", map[string]string{"X-Forgejo-Event": "issues", "X-Gitea-Event": "issues",
			"X-Gitea-Event-Type": "issue_assign", "X-Forgejo-Event-Type": "issue_assign",
			"X-Forgejo-Delivery": "d-1", "X-Gitea-Delivery": "d-1", "X-Forgejo-Signature": sig, "X-Gitea-Signature": sig}, want},
		{"GitHub's spelling", map[string]string{"X-GitHub-Event": "issues", "X-GitHub-Event-Type": "issue_assign",
			"X-GitHub-Delivery": "d-1", "X-Hub-Signature-256": "sha256=" + sig}, want},
		{"none", map[string]string{"X-Other-Event": "issues"}, Headers{}},
	}
	for _, tt := range tests {
		h := http.Header{}
		for k, v := range tt.headers {
			h.Set(k, v)
		}
		assert.Equal(t, tt.want, ReadHeaders(h), tt.name)
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	tests := map[[2]string]Kind{
		{"issues", "issue_assign"}:                                KindIssue,
		{"issues", "issue_milestone"}:                             KindIgnored,
		{"issue_comment", "pull_request_comment"}:                 KindIssueComment,
		{"pull_request", "pull_request_sync"}:                     KindPullRequest,
		{"pull_request", "pull_request_assign"}:                   KindIgnored,
		{"pull_request_rejected", "pull_request_review_rejected"}: KindReview,
		{"pull_request_comment", "pull_request_review_comment"}:   KindReview,
		{"status", "status"}:                                      KindStatus,
		{"workflow_run", "workflow_run"}:                          KindWorkflowRun,
		{"push", "push"}:                                          KindIgnored,
		{"release", ""}:                                           KindIgnored,
	}
	for in, want := range tests {
		assert.Equal(t, want, Classify(in[0], in[1]), "%v", in)
	}
}

func TestReviewVerdicts(t *testing.T) {
	t.Parallel()
	for typ, want := range map[string]string{
		"pull_request_review_approved": "approved",
		"pull_request_review_rejected": "rejected",
		"pull_request_review_comment":  "comment",
		"REQUEST_CHANGES":              "rejected",
		"":                             "comment",
	} {
		assert.Equal(t, want, verdict(typ), typ)
	}
}

func TestSemanticKeySeparatesSameSecondEvents(t *testing.T) {
	t.Parallel()
	// 013 and 014 assign #3 within one second: different events.
	var a, b Event
	for _, f := range recording.MustLoad() {
		switch f.Name[:3] {
		case "013":
			a, _ = Parse(KindIssue, f.Body)
		case "014":
			b, _ = Parse(KindIssue, f.Body)
		}
	}
	require.Equal(t, a.Issue.UpdatedAt, b.Issue.UpdatedAt, "the recordings share a timestamp")
	assert.NotEqual(t, a.SemanticKey(), b.SemanticKey())
}

func TestPlaceholderTimesAreZero(t *testing.T) {
	t.Parallel()
	for _, f := range recording.MustLoad() {
		if f.Name[:3] != "004" {
			continue
		}
		ev, err := Parse(KindIssue, f.Body)
		require.NoError(t, err)
		assert.True(t, ev.Issue.UpdatedAt.IsZero(), "Gitea's 1970 updated_at on an assign-before-open")
	}
}

func TestCleanMakesTextStorable(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "ab", Clean("a\x00b"))
	assert.Equal(t, "a\uFFFDb", Clean("a\xbcb"))
}

func TestMalformedErrorsDoNotEchoThePayload(t *testing.T) {
	t.Parallel()
	_, err := Peek([]byte(`{"secret-looking": "hunter2", `))
	require.ErrorIs(t, err, ErrMalformed)
	assert.NotContains(t, err.Error(), "hunter2")
}
