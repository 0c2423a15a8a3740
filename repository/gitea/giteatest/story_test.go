//go:build e2e

package giteatest_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository/gitea/realgitea"
)

// storyRepo is the repository of the recorded story, on the real Gitea as
// in the recordings.
const storyRepo = "acme/widget"

// story is the situation testdata/gitea-1.25/api describes (see its
// README), built on a real Gitea through its API: the same people, issues,
// comments, pull requests, reviews, statuses and dependency, in the same
// order, so that issue and pull request numbers match the recordings.
type story struct {
	g     *realgitea.Server
	users map[string]realgitea.User
	// headSHA is pull request #4's head, which the statuses are on.
	headSHA string
}

var (
	storyOnce sync.Once
	theStory  *story
	storyErr  error
)

// recordedStory builds the story once per test binary on the shared Gitea.
func recordedStory(t *testing.T) *story {
	t.Helper()
	g := realgitea.Shared(t)
	storyOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*storyWait)
		defer cancel()
		start := time.Now()
		theStory, storyErr = buildStory(ctx, g)
		t.Logf("story built on the real Gitea in %s", time.Since(start).Round(time.Millisecond))
	})
	require.NoError(t, storyErr, "build the recorded story on the real Gitea")
	return theStory
}

// as is one person's API calls, stopping at the first error.
type as struct {
	s   *story
	who realgitea.Credentials
	err *error
}

func (s *story) as(login string, err *error) as {
	if login == realgitea.AdminLogin {
		return as{s: s, who: realgitea.Token(s.g.AdminToken), err: err}
	}
	return as{s: s, who: s.users[login].Credentials(), err: err}
}

func (a as) call(ctx context.Context, method, path string, in, out any) {
	if *a.err != nil {
		return
	}
	if err := a.s.g.Call(ctx, a.who, method, path, in, out); err != nil {
		*a.err = err
	}
}

// people are the recording's users; mozi is the bot whose token mozi uses.
var people = []string{"lead", "coder1", "coder2", "infra1", "reviewer1", "mozi"}

func buildStory(ctx context.Context, g *realgitea.Server) (*story, error) {
	s := &story{g: g, users: map[string]realgitea.User{}}
	for _, login := range people {
		u, err := g.CreateUser(ctx, login, login == "lead")
		if err != nil {
			return nil, err
		}
		s.users[login] = u
	}
	var err error
	admin := s.as(realgitea.AdminLogin, &err)
	admin.call(ctx, http.MethodPost, "/orgs", map[string]any{"username": "acme", "visibility": "public"}, nil)
	if err != nil {
		return nil, fmt.Errorf("create organization acme: %w", err)
	}
	// mozi administers the repository and owns the organization, as its
	// token does on the fake (webhooks of both).
	var teams []struct {
		ID   int64
		Name string
	}
	admin.call(ctx, http.MethodGet, "/orgs/acme/teams", nil, &teams)
	for _, team := range teams {
		if team.Name == "Owners" {
			admin.call(ctx, http.MethodPut, fmt.Sprintf("/teams/%d/members/mozi", team.ID), nil, nil)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("make mozi an owner of acme: %w", err)
	}
	if err := s.newRepo(ctx, storyRepo, map[string]string{"lead": "admin", "mozi": "admin"}); err != nil {
		return nil, err
	}
	labels := map[string]int64{}
	for _, name := range []string{"priority/P1", "priority/P2", "type/feat", "type/bug", "type/docs", "type/infrastructure"} {
		var l struct{ ID int64 }
		admin.call(ctx, http.MethodPost, "/repos/"+storyRepo+"/labels", map[string]any{"name": name, "color": "#ee0701"}, &l)
		labels[name] = l.ID
	}
	ids := func(names ...string) []int64 {
		out := make([]int64, len(names))
		for i, n := range names {
			out[i] = labels[n]
		}
		return out
	}
	lead, coder1, coder2, reviewer1 := s.as("lead", &err), s.as("coder1", &err), s.as("coder2", &err), s.as("reviewer1", &err)
	repo := "/repos/" + storyRepo

	// #1: the parent issue, open, nobody assigned.
	lead.call(ctx, http.MethodPost, repo+"/issues", map[string]any{
		"title":  "Build rate limiter for the public API",
		"body":   "## Goal\nAdd a token-bucket rate limiter.\n\n## Acceptance\n- 429 on overflow\n- metrics\n\n## Suggested split\n@coder1 take the middleware, @coder2 take the metrics",
		"labels": ids("priority/P1", "type/feat")}, nil)
	// #2: coder1's sub-issue.
	coder1.call(ctx, http.MethodPost, repo+"/issues", map[string]any{
		"title":  "[widget][sub][parent #1] Token bucket middleware",
		"body":   "Parent: #1\nDepends: #1\n\n## Task\nImplement middleware.\n\n## Acceptance\n- unit tests",
		"labels": ids("priority/P2", "type/bug"), "assignees": []string{"coder1"}}, nil)
	// #3: the bug, with coder2's [Action Report].
	lead.call(ctx, http.MethodPost, repo+"/issues", map[string]any{
		"title":  "Fix crash on empty config",
		"body":   "Steps to reproduce:\n1. start with empty config\n2. panic\n\nStack trace attached.",
		"labels": ids("type/bug", "type/infrastructure"), "assignees": []string{"coder2", "infra1"}}, nil)
	coder2.call(ctx, http.MethodPost, repo+"/issues/3/comments", map[string]any{
		"body": "[Action Report]\n\n**Root cause**: nil map\n**Fix**: init map\n**Branch**: fix/3-empty-config\n**PR**: #?\n**CI**: pending"}, nil)

	// #4: coder2's pull request: changes requested, a push, a comment
	// review, CI pending → failure → success, approval, merged by lead.
	s.commit(ctx, coder2, storyRepo, "main", "fix/3-empty-config", "config.go", "package widget\n")
	coder2.call(ctx, http.MethodPost, repo+"/pulls", map[string]any{"head": "fix/3-empty-config", "base": "main",
		"title": "[moz] fix: crash on empty config", "body": "Root cause: nil map.\n\nCloses #3"}, nil)
	coder2.call(ctx, http.MethodPost, repo+"/pulls/4/requested_reviewers", map[string]any{"reviewers": []string{"reviewer1"}}, nil)
	reviewer1.call(ctx, http.MethodPost, repo+"/pulls/4/reviews", map[string]any{"event": "REQUEST_CHANGES", "body": "Please add a regression test."}, nil)
	s.commit(ctx, coder2, storyRepo, "fix/3-empty-config", "", "config_test.go", "package widget\n")
	reviewer1.call(ctx, http.MethodPost, repo+"/pulls/4/reviews", map[string]any{"event": "COMMENT", "body": "Nit: rename variable."}, nil)
	var pr struct {
		Head struct{ Sha string } `json:"head"`
	}
	lead.call(ctx, http.MethodGet, repo+"/pulls/4", nil, &pr)
	s.headSHA = pr.Head.Sha
	for _, st := range []struct{ state, desc, url string }{
		{"pending", "running", g.URL + "/ci/1"}, {"failure", "2 tests failed", g.URL + "/ci/1"}, {"success", "ok", ""},
	} {
		lead.call(ctx, http.MethodPost, repo+"/statuses/"+s.headSHA, map[string]any{"state": st.state, "context": "ci/test",
			"description": st.desc, "target_url": st.url}, nil)
	}
	reviewer1.call(ctx, http.MethodPost, repo+"/pulls/4/reviews", map[string]any{"event": "APPROVED", "body": "LGTM"}, nil)
	if err != nil {
		return nil, err
	}
	if err := s.merge(ctx, storyRepo, 4, "lead"); err != nil {
		return nil, err
	}

	// #5: docs, blocked by #2 through a Gitea dependency.
	lead.call(ctx, http.MethodPost, repo+"/issues", map[string]any{"title": "Docs for rate limiter",
		"body": "Depends: #2\nParent: #1", "labels": ids("type/docs"), "assignees": []string{"coder1"}}, nil)
	lead.call(ctx, http.MethodPost, repo+"/issues/5/dependencies", map[string]any{"owner": "acme", "repo": "widget", "index": 2}, nil)
	// #6: coder1's pull request, closed unmerged.
	s.commit(ctx, coder1, storyRepo, "main", "feat/2-token-bucket", "bucket.go", "package widget\n")
	coder1.call(ctx, http.MethodPost, repo+"/pulls", map[string]any{"head": "feat/2-token-bucket", "base": "main",
		"title": "Token bucket middleware", "body": "Part of parent #1", "assignees": []string{"coder1"}}, nil)
	coder1.call(ctx, http.MethodPatch, repo+"/pulls/6", map[string]any{"state": "closed"}, nil)
	coder1.call(ctx, http.MethodPatch, repo+"/issues/2", map[string]any{"state": "closed"}, nil)
	lead.call(ctx, http.MethodPatch, repo+"/issues/5", map[string]any{"state": "closed"}, nil)
	if err != nil {
		return nil, err
	}
	// The merge closes #3 ("Closes #3") on its own, a moment later.
	return s, s.eventually(ctx, "#3 closed by the merge", func() (bool, error) {
		var issue struct{ State string }
		err := s.g.Call(ctx, s.users["lead"].Credentials(), http.MethodGet, repo+"/issues/3", nil, &issue)
		return issue.State == "closed", err
	})
}

// newRepo makes a public repository of the organization acme with a
// README on main; every person may write, some have another permission.
func (s *story) newRepo(ctx context.Context, fullName string, perms map[string]string) error {
	name := fullName[len("acme/"):]
	var err error
	admin := s.as(realgitea.AdminLogin, &err)
	admin.call(ctx, http.MethodPost, "/orgs/acme/repos", map[string]any{"name": name, "auto_init": true,
		"default_branch": "main", "readme": "Default", "private": false}, nil)
	if err != nil {
		return fmt.Errorf("create repository %s: %w", fullName, err)
	}
	for _, login := range people {
		perm := perms[login]
		if perm == "" {
			perm = "write"
		}
		if err := s.g.AddCollaborator(ctx, fullName, login, perm); err != nil {
			return err
		}
	}
	return nil
}

// commit adds a file on branch of repo; newBranch, when set, is created from
// branch by the commit (a push of a new branch).
func (s *story) commit(ctx context.Context, who as, repo, branch, newBranch, path, content string) {
	in := map[string]any{"branch": branch, "message": "add " + path,
		"content": base64.StdEncoding.EncodeToString([]byte(content))}
	if newBranch != "" {
		in["new_branch"] = newBranch
	}
	who.call(ctx, http.MethodPost, "/repos/"+repo+"/contents/"+path, in, nil)
}

// merge merges a pull request as login, waiting while Gitea still checks
// whether it can be merged.
func (s *story) merge(ctx context.Context, repo string, number int, login string) error {
	var refusal string
	err := s.eventually(ctx, fmt.Sprintf("merge %s#%d", repo, number), func() (bool, error) {
		err := s.g.Call(ctx, s.users[login].Credentials(), http.MethodPost, fmt.Sprintf("/repos/%s/pulls/%d/merge", repo, number),
			map[string]any{"Do": "merge"}, nil)
		var apiErr *realgitea.APIError
		if errors.As(err, &apiErr) && apiErr.Status == http.StatusMethodNotAllowed {
			refusal = strings.TrimSpace(apiErr.Body)
			return false, nil // "Please try again later": the mergeability check is still running
		}
		return err == nil, err
	})
	if err != nil && refusal != "" {
		return fmt.Errorf("%w (Gitea's last refusal: %s)", err, refusal)
	}
	return err
}

// storyWait bounds each wait on Gitea's background queues. Gitea checks a
// pull request's mergeability in a queue; with the e2e suites running beside
// this one on two cores, CI saw that check take over 30 s.
const storyWait = 2 * time.Minute

// eventually polls done until it holds, fails, or storyWait passes.
func (s *story) eventually(ctx context.Context, what string, done func() (bool, error)) error {
	deadline := time.Now().Add(storyWait)
	for {
		ok, err := done()
		switch {
		case err != nil:
			return fmt.Errorf("%s: %w", what, err)
		case ok:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("%s: not within %s", what, storyWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
