package giteatest_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository/gitea/giteatest"
)

// The fake answers as Gitea 1.25 does (contract_test.go checks it against
// a real one under the e2e build tag); these are the answers mozi's
// client branches on, checked here without one.
func TestFakeAnswersAsGitea(t *testing.T) {
	t.Parallel()
	srv := giteatest.New()
	defer srv.Close()
	tests := []struct {
		name, method, path, token string
		scopes                    []string
		want                      int
	}{
		{"anyone reads a public repository", "GET", "/repos/acme/widget/issues/1", "", nil, 200},
		{"anyone reads the version", "GET", "/version", "", nil, 200},
		{"the user needs a token", "GET", "/user", "", nil, 401},
		{"webhooks need a token", "GET", "/repos/acme/widget/hooks", "", nil, 401},
		{"writes need a token", "POST", "/repos/acme/widget/issues/1/comments", "", nil, 401},
		{"a refused token is refused everywhere", "GET", "/version", "wrong", nil, 401},
		{"another repository does not exist", "GET", "/repos/acme/nothing", giteatest.Token, nil, 404},
		{"another organization does not exist", "GET", "/orgs/other/hooks", giteatest.Token, nil, 404},
		{"a listed issue without its own recording", "GET", "/repos/acme/widget/issues/5", giteatest.Token, nil, 200},
		{"a pull request's issue side", "GET", "/repos/acme/widget/issues/4", giteatest.Token, nil, 200},
		{"an issue is not a pull request", "GET", "/repos/acme/widget/pulls/3", giteatest.Token, nil, 404},
		{"dependencies of a missing issue", "GET", "/repos/acme/widget/issues/999/dependencies", giteatest.Token, nil, 404},
		{"comments of a missing issue: Gitea 1.25's 500", "GET", "/repos/acme/widget/issues/999/comments", giteatest.Token, nil, 500},
		{"statuses of the recorded head", "GET", "/repos/acme/widget/commits/3403c9d703782b8ccfc0497aa95bf7cf3b3b07a9/status", giteatest.Token, nil, 200},
		{"statuses of another commit", "GET", "/repos/acme/widget/commits/0123456789abcdef0123456789abcdef01234567/status", giteatest.Token, nil, 404},
		{"reviews of a pull request", "GET", "/repos/acme/widget/pulls/4/reviews", giteatest.Token, nil, 200},
		{"read:issue is needed for issues", "GET", "/repos/acme/widget/issues/1", giteatest.Token, []string{"read:repository"}, 403},
		{"write:issue includes read:issue", "GET", "/repos/acme/widget/issues/1", giteatest.Token, []string{"write:issue"}, 200},
		{"read:issue does not write", "POST", "/repos/acme/widget/issues/1/comments", giteatest.Token, []string{"read:issue"}, 403},
		{"all is every scope", "GET", "/repos/acme/widget/hooks", giteatest.Token, []string{"all"}, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv.Scopes = tt.scopes
			var body *strings.Reader
			if tt.method == "POST" {
				body = strings.NewReader(`{"body":"hello"}`)
			} else {
				body = strings.NewReader("")
			}
			req, err := http.NewRequest(tt.method, srv.URL+"/api/v1"+tt.path, body)
			require.NoError(t, err)
			if tt.token != "" {
				req.Header.Set("Authorization", "token "+tt.token)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, tt.want, resp.StatusCode)
		})
	}
}
