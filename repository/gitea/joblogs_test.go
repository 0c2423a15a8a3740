package gitea_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository/gitea"
)

// fakeActions is a loopback Gitea with one Actions run (id 7) of two jobs
// (ids 40, 41) whose logs need the token.
type fakeActions struct {
	mu   sync.Mutex
	seen []string
}

func (f *fakeActions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.seen = append(f.seen, r.URL.Path)
	f.mu.Unlock()
	if r.Header.Get("Authorization") != "token secret" {
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	switch r.URL.Path {
	case "/api/v1/repos/acme/widget/actions/jobs/41/logs":
		for i := 1; i <= 100; i++ {
			fmt.Fprintf(w, "line %d\n", i)
		}
		fmt.Fprint(w, "FAIL: TestThing")
	case "/api/v1/repos/acme/widget/actions/runs/7/jobs":
		fmt.Fprint(w, `{"jobs":[{"id":40},{"id":41}],"total_count":2}`)
	default:
		http.NotFound(w, r)
	}
}

func TestJobLogTail(t *testing.T) {
	fake := &fakeActions{}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	client := func(token string) *gitea.Client {
		c, err := gitea.New(gitea.Config{URL: srv.URL, Token: token, MaxAttempts: 1})
		require.NoError(t, err)
		return c
	}
	tests := []struct {
		name      string
		token     string
		target    string
		want      string
		wantErr   string
		wantCalls int
	}{
		{name: "job linked by id", token: "secret", target: srv.URL + "/acme/widget/actions/runs/7/jobs/41",
			want: "line 98\nline 99\nline 100\nFAIL: TestThing", wantCalls: 1},
		{name: "job linked by its index in the run", token: "secret", target: srv.URL + "/acme/widget/actions/runs/7/jobs/1",
			want: "line 98\nline 99\nline 100\nFAIL: TestThing", wantCalls: 3},
		{name: "a token without access to Actions", token: "other", target: srv.URL + "/acme/widget/actions/runs/7/jobs/41",
			wantErr: "cannot read the repository's Actions", wantCalls: 1},
		{name: "another host never gets the token", token: "secret", target: "https://ci.example.com/acme/widget/actions/runs/7/jobs/41",
			wantErr: gitea.ErrNotActionsJob.Error()},
		{name: "another repository", token: "secret", target: srv.URL + "/acme/other/actions/runs/7/jobs/41",
			wantErr: gitea.ErrNotActionsJob.Error()},
		{name: "no actions link", token: "secret", target: "https://drone.example.com/acme/widget/12",
			wantErr: gitea.ErrNotActionsJob.Error()},
		{name: "a job that does not exist", token: "secret", target: srv.URL + "/acme/widget/actions/runs/7/jobs/9",
			wantErr: "no job 9 among 2", wantCalls: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake.mu.Lock()
			fake.seen = nil
			fake.mu.Unlock()
			got, err := client(tc.token).JobLogTail(context.Background(), "acme/widget", tc.target, 4)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.NotContains(t, err.Error(), "secret")
			} else {
				require.NoError(t, err)
				assert.Equal(t, tc.want, got)
			}
			fake.mu.Lock()
			defer fake.mu.Unlock()
			assert.Len(t, fake.seen, tc.wantCalls, "requests: %s", strings.Join(fake.seen, ", "))
		})
	}
}
