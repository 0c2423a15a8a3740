//go:build e2e

package giteatest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository/gitea"
	"github.com/moziplus/mozi/repository/gitea/giteatest"
	"github.com/moziplus/mozi/repository/gitea/realgitea"
	"github.com/moziplus/mozi/repository/task"
)

func TestMain(m *testing.M) {
	realgitea.Prepare()
	code := m.Run()
	realgitea.StopShared()
	os.Exit(code)
}

// side is one of the two servers a contract runs against, with what
// differs between them by nature (the commit a status is on).
type side struct {
	name    string
	headSHA string // pull request #4's head
	// repo and number name what a test made on this side (the fake
	// serves one recorded repository; the real Gitea gets one per test).
	repo   string
	number int
}

// recordedHeadSHA is pull request #4's head in the recordings.
const recordedHeadSHA = "3403c9d703782b8ccfc0497aa95bf7cf3b3b07a9"

// call is one thing mozi asks Gitea, through its real client.
type call func(ctx context.Context, g *gitea.Client, s side) (any, error)

// outcome is what mozi got: a value made comparable (ids, times and
// commit hashes differ between two servers by nature) and the kind of
// error.
type outcome struct {
	Value any
	Err   string
}

// errKind is what a caller of the client can branch on.
func errKind(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, task.ErrNotFound):
		return "not found"
	case errors.Is(err, gitea.ErrUnauthorized):
		return "unauthorized"
	case errors.Is(err, gitea.ErrMissingScope):
		return "missing scope"
	}
	return "other error"
}

func run(ctx context.Context, g *gitea.Client, s side, c call) outcome {
	v, err := c(ctx, g, s)
	if err != nil {
		return outcome{Err: errKind(err)}
	}
	return outcome{Value: comparable(v)}
}

var shaRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

// mark keeps whether a time is set, not the time.
func mark(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.Unix(1, 0).UTC()
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// comparable drops what two servers cannot share: ids, times (kept as
// set or not), commit hashes (kept as well-formed or not); lists whose
// order Gitea does not define are sorted.
func comparable(v any) any {
	switch v := v.(type) {
	case task.Issue:
		v.CreatedAt, v.UpdatedAt, v.ClosedAt = mark(v.CreatedAt), mark(v.UpdatedAt), mark(v.ClosedAt)
		v.Labels, v.Assignees = sorted(v.Labels), sorted(v.Assignees)
		return v
	case []task.Issue:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = comparable(x)
		}
		return out
	case task.PullRequest:
		v.UpdatedAt, v.ClosedAt = mark(v.UpdatedAt), mark(v.ClosedAt)
		v.HeadSHA = fmt.Sprint("well-formed: ", shaRE.MatchString(v.HeadSHA))
		v.RequestedReviewers = sorted(v.RequestedReviewers)
		return v
	case []task.PullRequest:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = comparable(x)
		}
		return out
	case []task.Comment:
		for i := range v {
			v[i].ID, v[i].CreatedAt = 0, mark(v[i].CreatedAt)
		}
		return v
	case []task.CommitStatus:
		for i := range v {
			v[i].ID, v[i].UpdatedAt = 0, mark(v[i].UpdatedAt)
			v[i].SHA = fmt.Sprint("well-formed: ", shaRE.MatchString(v[i].SHA))
		}
		return v
	case []gitea.Hook:
		for i := range v {
			v[i].ID, v[i].Events = 0, sorted(v[i].Events)
		}
		return v
	case gitea.Hook:
		v.ID, v.Events = 0, sorted(v.Events)
		return v
	}
	return v
}

// pair is mozi's client on the fake and on the real Gitea, with the same
// kind of credentials.
type pair struct {
	fake, real *gitea.Client
	realSide   side
}

func newClient(t *testing.T, url, token string) *gitea.Client {
	t.Helper()
	// One attempt: a retry would hide a 5xx the other side does not send.
	g, err := gitea.New(gitea.Config{URL: url, Token: token, MaxAttempts: 1, RatePerSecond: 1000, Burst: 1000})
	require.NoError(t, err)
	return g
}

// check runs each call on both and requires the same outcome.
func (p pair) check(t *testing.T, calls map[string]call) {
	t.Helper()
	ctx := context.Background()
	names := make([]string, 0, len(calls))
	for name := range calls {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			fake := run(ctx, p.fake, side{name: "fake", headSHA: recordedHeadSHA}, calls[name])
			real := run(ctx, p.real, p.realSide, calls[name])
			assert.Equal(t, real, fake, "the fake answers mozi differently from the real Gitea (expected: real, actual: fake)")
		})
	}
}

func setupPair(t *testing.T, fakeToken, realToken string) (pair, *giteatest.Server, *story) {
	t.Helper()
	s := recordedStory(t)
	fake := giteatest.New()
	t.Cleanup(fake.Close)
	return pair{fake: newClient(t, fake.URL, fakeToken), real: newClient(t, s.g.URL, realToken),
		realSide: side{name: "real", headSHA: s.headSHA}}, fake, s
}

// TestE2EContractReads: what mozi reads of the recorded situation is the
// same on the fake as on the real Gitea.
func TestE2EContractReads(t *testing.T) {
	s := recordedStory(t)
	p, _, _ := setupPair(t, giteatest.Token, s.users["mozi"].Token)
	const repo = storyRepo
	p.check(t, map[string]call{
		"who am I": func(ctx context.Context, g *gitea.Client, _ side) (any, error) { return g.WhoAmI(ctx) },
		"forge (not a Forgejo)": func(ctx context.Context, g *gitea.Client, _ side) (any, error) {
			f, err := g.DetectForge(ctx)
			return f.Forgejo, err
		},
		"repository admin": func(ctx context.Context, g *gitea.Client, _ side) (any, error) {
			return g.RepoAdmin(ctx, repo)
		},
		"repository admin of a missing repository": func(ctx context.Context, g *gitea.Client, _ side) (any, error) {
			return g.RepoAdmin(ctx, "acme/nothing")
		},
		"issue of a missing repository": func(ctx context.Context, g *gitea.Client, _ side) (any, error) {
			return g.FetchIssue(ctx, "acme/nothing", 1)
		},
		"write:issue probe": func(ctx context.Context, g *gitea.Client, _ side) (any, error) {
			return nil, g.CanWriteIssues(ctx, repo)
		},
		"issue #1 (open parent)":                 issue(repo, 1),
		"issue #2 (closed sub-issue)":            issue(repo, 2),
		"issue #3 (closed bug)":                  issue(repo, 3),
		"issue #4 (a pull request's issue side)": issue(repo, 4),
		"issue #5 (blocked docs)":                issue(repo, 5),
		"issue #999 (missing)":                   issue(repo, 999),
		"comments of #3": func(ctx context.Context, g *gitea.Client, _ side) (any, error) {
			return g.FetchComments(ctx, repo, 3, 100)
		},
		"comments of #1 (none)": func(ctx context.Context, g *gitea.Client, _ side) (any, error) {
			return g.FetchComments(ctx, repo, 1, 100)
		},
		// Gitea 1.25 answers 500, not 404, for the comments of an issue
		// that does not exist (routers/api/v1/repo/issue_comment.go).
		"comments of #999 (missing)": func(ctx context.Context, g *gitea.Client, _ side) (any, error) {
			return g.FetchComments(ctx, repo, 999, 100)
		},
		"blocked-by of #5":                  blockedBy(repo, 5),
		"blocked-by of #3":                  blockedBy(repo, 3),
		"blocked-by of #999 (missing)":      blockedBy(repo, 999),
		"pull request #4 (merged)":          pull(repo, 4),
		"pull request #6 (closed unmerged)": pull(repo, 6),
		"pull request #3 (an issue)":        pull(repo, 3),
		"pull request #999 (missing)":       pull(repo, 999),
		"statuses of #4's head": func(ctx context.Context, g *gitea.Client, s side) (any, error) {
			return g.FetchStatuses(ctx, repo, s.headSHA)
		},
		"statuses of an unknown commit": func(ctx context.Context, g *gitea.Client, _ side) (any, error) {
			return g.FetchStatuses(ctx, repo, "0123456789abcdef0123456789abcdef01234567")
		},
		"open issues (any time)": func(ctx context.Context, g *gitea.Client, _ side) (any, error) {
			return g.OpenIssuesSince(ctx, repo, time.Time{}, 100)
		},
		"open issues since tomorrow": func(ctx context.Context, g *gitea.Client, _ side) (any, error) {
			return g.OpenIssuesSince(ctx, repo, time.Now().Add(24*time.Hour), 100)
		},
		"open pull requests (any time)": func(ctx context.Context, g *gitea.Client, _ side) (any, error) {
			return g.OpenPullRequestsSince(ctx, repo, time.Time{}, 100)
		},
		"webhooks of the repository": func(ctx context.Context, g *gitea.Client, _ side) (any, error) {
			return g.Hooks(ctx, gitea.HookScope{Repo: repo})
		},
		"webhooks of the organization": func(ctx context.Context, g *gitea.Client, _ side) (any, error) {
			return g.Hooks(ctx, gitea.HookScope{Org: "acme"})
		},
	})
}

func issue(repo string, n int) call {
	return func(ctx context.Context, g *gitea.Client, _ side) (any, error) { return g.FetchIssue(ctx, repo, n) }
}

func pull(repo string, n int) call {
	return func(ctx context.Context, g *gitea.Client, _ side) (any, error) {
		return g.FetchPullRequest(ctx, repo, n)
	}
}

func blockedBy(repo string, n int) call {
	return func(ctx context.Context, g *gitea.Client, _ side) (any, error) { return g.FetchBlockedBy(ctx, repo, n) }
}

// TestE2EContractVersion: both answer the version anonymously, also to a
// client whose token is refused.
func TestE2EContractVersion(t *testing.T) {
	s := recordedStory(t)
	ctx := context.Background()
	fake := giteatest.New()
	t.Cleanup(fake.Close)
	for _, token := range []string{"", "not-a-token"} {
		fv, err := newClient(t, fake.URL, token).ServerVersion(ctx)
		require.NoError(t, err)
		rv, err := newClient(t, s.g.URL, token).ServerVersion(ctx)
		require.NoError(t, err)
		if in, _ := realgitea.Installed(); in.Version == realgitea.DefaultVersion {
			assert.Equal(t, rv, fv, "the recordings' Gitea")
		}
	}
}

// TestE2EContractCredentials: a refused token, no token, and a token
// without the scopes a call needs give mozi the same answers.
func TestE2EContractCredentials(t *testing.T) {
	s := recordedStory(t)
	const repo = storyRepo
	reads := map[string]call{
		"issue #1":         issue(repo, 1),
		"pull request #4":  pull(repo, 4),
		"who am I":         func(ctx context.Context, g *gitea.Client, _ side) (any, error) { return g.WhoAmI(ctx) },
		"repository admin": func(ctx context.Context, g *gitea.Client, _ side) (any, error) { return g.RepoAdmin(ctx, repo) },
		"write:issue probe": func(ctx context.Context, g *gitea.Client, _ side) (any, error) {
			return nil, g.CanWriteIssues(ctx, repo)
		},
		"webhooks": func(ctx context.Context, g *gitea.Client, _ side) (any, error) {
			return g.Hooks(ctx, gitea.HookScope{Repo: repo})
		},
		"open issues": func(ctx context.Context, g *gitea.Client, _ side) (any, error) {
			return g.OpenIssuesSince(ctx, repo, time.Time{}, 10)
		},
		"statuses of a head": func(ctx context.Context, g *gitea.Client, s side) (any, error) {
			return g.FetchStatuses(ctx, repo, s.headSHA)
		},
		"comment": func(ctx context.Context, g *gitea.Client, _ side) (any, error) {
			_, err := g.PostComment(ctx, repo, 1, "contract: may I?")
			return nil, err
		},
	}
	t.Run("refused token", func(t *testing.T) {
		p, _, _ := setupPair(t, "not-a-token", "not-a-token")
		p.check(t, reads)
	})
	t.Run("no token", func(t *testing.T) {
		p, _, _ := setupPair(t, "", "")
		p.check(t, reads)
	})
	t.Run("token without issue scopes", func(t *testing.T) {
		scopes := []string{"read:repository", "read:user"}
		token := s.token(t, "mozi", scopes)
		p, fake, _ := setupPair(t, giteatest.Token, token)
		fake.Scopes = scopes
		p.check(t, reads)
	})
}

// token makes login another API token with scopes.
func (s *story) token(t *testing.T, login string, scopes []string) string {
	t.Helper()
	u := s.users[login]
	var tok struct {
		SHA1 string `json:"sha1"`
	}
	require.NoError(t, s.g.Call(context.Background(), realgitea.Credentials{Login: u.Login, Password: u.Password}, http.MethodPost,
		"/users/"+login+"/tokens", map[string]any{"name": fmt.Sprintf("contract-%d", time.Now().UnixNano()), "scopes": scopes}, &tok))
	return tok.SHA1
}

// TestE2EContractCommentPages: mozi reads every comment once, and no more
// than it asks for, however Gitea pages them (Gitea 1.25 does not page an
// issue's comments: every page is the whole list).
func TestE2EContractCommentPages(t *testing.T) {
	s := recordedStory(t)
	ctx := context.Background()
	realRepo := s.repoWithIssue(t, "paging")
	p, _, _ := setupPair(t, giteatest.Token, s.users["mozi"].Token)
	fakeSide, realSide := side{name: "fake", repo: storyRepo, number: 1}, side{name: "real", repo: realRepo, number: 1}
	const posted = 51 // more than a page of 50
	var want []string
	for i := range posted {
		body := fmt.Sprintf("contract comment %02d", i)
		want = append(want, body)
		for _, x := range []struct {
			g *gitea.Client
			s side
		}{{p.fake, fakeSide}, {p.real, realSide}} {
			_, err := x.g.PostComment(ctx, x.s.repo, x.s.number, body)
			require.NoError(t, err, x.s.name)
		}
	}
	for _, limit := range []int{10, 50, 100} {
		t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
			read := func(g *gitea.Client, s side) []string {
				comments, err := g.FetchComments(ctx, s.repo, s.number, limit)
				require.NoError(t, err, s.name)
				var bodies []string
				for _, c := range comments {
					assert.Equal(t, "mozi", c.Author, s.name)
					bodies = append(bodies, c.Body)
				}
				return bodies
			}
			real, fake := read(p.real, realSide), read(p.fake, fakeSide)
			assert.Equal(t, want[:min(limit, posted)], real, "mozi reads the real Gitea's comments once each, in order")
			assert.Equal(t, real, fake)
		})
	}
}

// repoWithIssue makes another repository of acme with one open issue by
// lead, for a test that changes what it reads.
func (s *story) repoWithIssue(t *testing.T, name string) string {
	t.Helper()
	ctx := context.Background()
	repo := "acme/" + name
	require.NoError(t, s.newRepo(ctx, repo, map[string]string{"mozi": "admin"}))
	require.NoError(t, s.g.Call(ctx, s.users["lead"].Credentials(), http.MethodPost, "/repos/"+repo+"/issues",
		map[string]any{"title": "An issue of " + name, "body": "For the contract test."}, nil))
	return repo
}

// TestE2EContractWebhookInstall: mozi webhook install makes the same hook
// on both, which both list alike and which needs nothing more; a second
// install replaces it.
func TestE2EContractWebhookInstall(t *testing.T) {
	s := recordedStory(t)
	ctx := context.Background()
	realRepo := s.repoWithIssue(t, "hooks")
	p, _, _ := setupPair(t, giteatest.Token, s.users["mozi"].Token)
	const url = "http://mozi.test:8080/webhooks/gitea"
	type result struct {
		Installed gitea.Hook
		Replaced  int
		Listed    []gitea.Hook
		Missing   []string
	}
	install := func(g *gitea.Client, repo string) result {
		h, replaced, err := g.InstallHook(ctx, gitea.Forge{}, gitea.HookScope{Repo: repo}, url, "contract-secret-0123456789")
		require.NoError(t, err)
		listed, err := g.Hooks(ctx, gitea.HookScope{Repo: repo})
		require.NoError(t, err)
		return result{Installed: comparable(h).(gitea.Hook), Replaced: len(replaced), Listed: comparable(listed).([]gitea.Hook),
			Missing: h.MissingEvents(gitea.Forge{})}
	}
	for _, round := range []string{"first install", "second install"} {
		real, fake := install(p.real, realRepo), install(p.fake, storyRepo)
		assert.Equal(t, real, fake, round)
		assert.Empty(t, real.Missing, "%s: Gitea keeps every event mozi asks for", round)
		assert.Len(t, real.Listed, 1, round)
	}
}

// TestE2EPendingReviewRequests: a review request is pending until the
// reviewer answers, on the real Gitea and on the fake alike, while the
// pull request's requested_reviewers lists every reviewer's latest
// review, answered or not (Gitea 1.25).
func TestE2EPendingReviewRequests(t *testing.T) {
	s := recordedStory(t)
	ctx := context.Background()
	realRepo := s.openPull(t, "reviews")
	fake := giteatest.New()
	t.Cleanup(fake.Close)
	for _, login := range people {
		fake.AddUser(s.users[login].Token, login) // the same people, by the same tokens
	}
	sides := []struct {
		side
		api    realgitea.Client
		client *gitea.Client
	}{
		// The fake's #6 is a recorded pull request without reviews, as
		// the real one is.
		{side{name: "fake", repo: storyRepo, number: 6}, realgitea.Client{URL: fake.URL}, newClient(t, fake.URL, giteatest.Token)},
		{side{name: "real", repo: realRepo, number: 1}, s.g.Client, newClient(t, s.g.URL, s.users["mozi"].Token)},
	}
	request := func(reviewers ...string) func(side, realgitea.Client) error {
		return func(sd side, api realgitea.Client) error {
			return api.Call(ctx, s.users["coder1"].Credentials(), http.MethodPost,
				fmt.Sprintf("/repos/%s/pulls/%d/requested_reviewers", sd.repo, sd.number), map[string]any{"reviewers": reviewers}, nil)
		}
	}
	review := func(login, event string) func(side, realgitea.Client) error {
		return func(sd side, api realgitea.Client) error {
			return api.Call(ctx, s.users[login].Credentials(), http.MethodPost,
				fmt.Sprintf("/repos/%s/pulls/%d/reviews", sd.repo, sd.number), map[string]any{"event": event, "body": event + " by " + login}, nil)
		}
	}
	steps := []struct {
		name      string
		do        func(side, realgitea.Client) error
		pending   []string
		requested []string
	}{
		{"coder2 and reviewer1 asked", request("coder2", "reviewer1"), []string{"coder2", "reviewer1"}, []string{"coder2", "reviewer1"}},
		{"reviewer1 approves", review("reviewer1", "APPROVED"), []string{"coder2"}, []string{"coder2", "reviewer1"}},
		{"reviewer1 asked again", request("reviewer1"), []string{"coder2", "reviewer1"}, []string{"coder2", "reviewer1"}},
		{"reviewer1 comments", review("reviewer1", "COMMENT"), []string{"coder2"}, []string{"coder2", "reviewer1"}},
		{"coder2 asks for changes", review("coder2", "REQUEST_CHANGES"), nil, []string{"coder2", "reviewer1"}},
	}
	for _, step := range steps {
		for _, sd := range sides {
			require.NoError(t, step.do(sd.side, sd.api), "%s: %s", step.name, sd.name)
			pending, err := sd.client.PendingReviewRequests(ctx, sd.repo, sd.number)
			require.NoError(t, err, sd.name)
			assert.Equal(t, step.pending, pending, "%s: pending review requests on the %s Gitea", step.name, sd.name)
			pr, err := sd.client.FetchPullRequest(ctx, sd.repo, sd.number)
			require.NoError(t, err, sd.name)
			assert.Equal(t, step.requested, sorted(pr.RequestedReviewers), "%s: requested_reviewers on the %s Gitea", step.name, sd.name)
		}
	}
}

// openPull makes another repository of acme with an open pull request #1
// by coder1.
func (s *story) openPull(t *testing.T, name string) string {
	t.Helper()
	ctx := context.Background()
	repo := "acme/" + name
	require.NoError(t, s.newRepo(ctx, repo, map[string]string{"mozi": "admin"}))
	var err error
	coder1 := s.as("coder1", &err)
	s.commit(ctx, coder1, repo, "main", "feature", "feature.go", "package widget\n")
	coder1.call(ctx, http.MethodPost, "/repos/"+repo+"/pulls", map[string]any{"head": "feature", "base": "main",
		"title": "A feature", "body": "For the contract test."}, nil)
	require.NoError(t, err)
	return repo
}
