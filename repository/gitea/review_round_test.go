package gitea_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository/gitea"
	"github.com/moziplus/mozi/repository/gitea/giteatest"
	"github.com/moziplus/mozi/repository/task"
)

// as posts to the fake as the user of token and returns the new object's id.
func as(t *testing.T, srv *giteatest.Server, token, path string, body any) int64 {
	t.Helper()
	data, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/repos/acme/widget"+path, bytes.NewReader(data))
	require.NoError(t, err)
	req.Header.Set("Authorization", "token "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Less(t, resp.StatusCode, 300, "POST %s", path)
	var out struct{ ID int64 }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out.ID
}

func reviewIDs(r task.ReviewRound) []string {
	var out []string
	for _, rv := range r.Reviews {
		out = append(out, fmt.Sprintf("%s/%s", rv.Reviewer, rv.State))
	}
	return out
}

func looseBodies(r task.ReviewRound) []string {
	var out []string
	for _, c := range r.Loose {
		out = append(out, c.Author+": "+c.Body)
	}
	return out
}

// TestReviewRound: a round is what others said since the author's last
// comment on the pull request; the author's own words, ignored authors
// and dismissed reviews are not in it, and a task's first loose comment
// keeps its place even when the author commented after it.
func TestReviewRound(t *testing.T) {
	srv := giteatest.New()
	t.Cleanup(srv.Close)
	for _, u := range []string{"coder2", "alice", "reviewer1", "lead"} {
		srv.AddUser("tok-"+u, u)
	}
	g, err := gitea.New(gitea.Config{URL: srv.URL, Token: giteatest.Token})
	require.NoError(t, err)
	ctx := context.Background()
	read := func(q task.RoundQuery) task.ReviewRound {
		t.Helper()
		r, err := g.ReviewRound(ctx, "acme/widget", 4, q)
		require.NoError(t, err)
		return r
	}

	// Before the author ever commented: every review Gitea counts, the
	// dismissed rejection left out.
	first := read(task.RoundQuery{Agent: "coder2"})
	assert.True(t, first.Since.IsZero())
	assert.Equal(t, []string{"reviewer1/COMMENT", "reviewer1/APPROVED"}, reviewIDs(first))

	early := as(t, srv, "tok-alice", "/issues/4/comments", map[string]any{"body": "Early remark."})
	as(t, srv, "tok-coder2", "/issues/4/comments", map[string]any{"body": "[Action Report] all answered"})
	as(t, srv, "tok-alice", "/issues/4/comments", map[string]any{"body": "One more thing."})
	as(t, srv, "tok-lead", "/issues/4/comments", map[string]any{"body": "@coder2 ping"})
	as(t, srv, giteatest.Token, "/issues/4/comments", map[string]any{"body": "Status: working"})
	as(t, srv, "tok-reviewer1", "/pulls/4/reviews", map[string]any{"event": "REQUEST_CHANGES", "body": "Again."})
	as(t, srv, "tok-coder2", "/pulls/4/reviews", map[string]any{"event": "COMMENT", "body": "Self-review."})

	r := read(task.RoundQuery{Agent: "coder2", Ignore: []string{"mozi", "lead"}})
	assert.False(t, r.Since.IsZero())
	assert.Equal(t, []string{"reviewer1/REQUEST_CHANGES"}, reviewIDs(r), "the old reviews were answered")
	assert.Equal(t, "Again.", r.Reviews[0].Body)
	assert.Empty(t, r.Reviews[0].Comments)
	assert.Equal(t, []string{"alice: One more thing."}, looseBodies(r))

	r = read(task.RoundQuery{Agent: "coder2", Ignore: []string{"mozi", "lead"}, FromComment: early})
	assert.Equal(t, []string{"alice: Early remark.", "alice: One more thing."}, looseBodies(r),
		"the task's first comment came during the author's last turn")
}
