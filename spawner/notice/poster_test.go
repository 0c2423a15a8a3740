package notice_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/gitea"
	"github.com/moziplus/mozi/repository/gitea/giteatest"
	"github.com/moziplus/mozi/repository/pgtest"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/spawner/notice"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// fakeGitea keeps an issue's comments; fail decides, per try, whether a
// post fails before or after Gitea wrote the comment.
type fakeGitea struct {
	mu       sync.Mutex
	comments []task.Comment
	tries    int
	fail     func(try int) (written bool, err error)
}

func (f *fakeGitea) PostComment(_ context.Context, _ string, _ int, body string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tries++
	written, err := false, error(nil)
	if f.fail != nil {
		written, err = f.fail(f.tries)
	}
	if err == nil || written {
		f.comments = append(f.comments, task.Comment{ID: int64(100 + len(f.comments)), Body: body})
	}
	if err != nil {
		return 0, err
	}
	return f.comments[len(f.comments)-1].ID, nil
}

func (f *fakeGitea) FetchComments(context.Context, string, int, int) ([]task.Comment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]task.Comment(nil), f.comments...), nil
}

func (f *fakeGitea) bodies() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.comments {
		out = append(out, c.Body)
	}
	return out
}

func TestPosterPostsEachQueuedCommentOnce(t *testing.T) {
	tests := []struct {
		name       string
		fail       func(try int) (bool, error)
		wantPosted int
		wantTries  int
		wantParked bool
	}{
		{name: "Gitea takes it at once", wantPosted: 1, wantTries: 1},
		{name: "Gitea answers 500 to the first try", wantPosted: 1, wantTries: 2,
			fail: func(try int) (bool, error) {
				if try == 1 {
					return false, errors.New("create comment: 500 Internal Server Error")
				}
				return false, nil
			}},
		{name: "the first try reached Gitea but its answer was lost", wantPosted: 1, wantTries: 1,
			fail: func(try int) (bool, error) {
				if try == 1 {
					return true, errors.New("create comment: context deadline exceeded")
				}
				return false, nil
			}},
		{name: "Gitea is down for four tries", wantPosted: 1, wantTries: 5,
			fail: func(try int) (bool, error) {
				if try <= 4 {
					return false, errors.New("dial tcp: connection refused")
				}
				return false, nil
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := pgtest.Store(t)
			ctx := context.Background()
			queued, err := store.QueueComment(ctx, repository.Comment{Repo: "acme/widget", Issue: 3, Kind: "task_fail",
				Key: "7:1", Body: "**mozi**: the task failed."})
			require.NoError(t, err)
			require.True(t, queued)
			again, err := store.QueueComment(ctx, repository.Comment{Repo: "acme/widget", Issue: 3, Kind: "task_fail",
				Key: "7:1", Body: "**mozi**: the task failed."})
			require.NoError(t, err)
			assert.False(t, again, "one (kind, key) is queued once")

			g := &fakeGitea{fail: tt.fail}
			p := notice.NewPoster(store, g, notice.PosterConfig{BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond,
				Poll: 10 * time.Millisecond})
			runCtx, stop := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { p.Run(runCtx); close(done) }()
			require.Eventually(t, func() bool {
				st, err := store.OutboxStats(ctx)
				return err == nil && st.Waiting == 0
			}, 10*time.Second, 5*time.Millisecond)
			stop()
			<-done

			bodies := g.bodies()
			require.Len(t, bodies, tt.wantPosted, "posted once")
			assert.True(t, strings.HasPrefix(bodies[0], "**mozi**: the task failed."))
			assert.Contains(t, bodies[0], "<!-- mozi:outbox:")
			assert.Equal(t, tt.wantTries, g.tries)
		})
	}
}

// A comment Gitea refuses for good (the repository is gone: 404) is
// parked, not retried for ever; one Gitea takes goes through mozi's real
// client.
func TestPosterParksWhatGiteaRefusesForGood(t *testing.T) {
	store := pgtest.Store(t)
	ctx := context.Background()
	_, err := store.QueueComment(ctx, repository.Comment{Repo: "acme/gone", Issue: 3, Kind: "task_fail", Key: "1:1", Body: "x"})
	require.NoError(t, err)
	_, err = store.QueueComment(ctx, repository.Comment{Repo: "acme/widget", Issue: 3, Kind: "task_fail", Key: "2:1", Body: "y"})
	require.NoError(t, err)
	srv := giteatest.New()
	defer srv.Close()
	g, err := gitea.New(gitea.Config{URL: srv.URL, Token: giteatest.Token})
	require.NoError(t, err)
	p := notice.NewPoster(store, g, notice.PosterConfig{BackoffBase: time.Millisecond, Poll: 10 * time.Millisecond})
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go p.Run(runCtx)
	require.Eventually(t, func() bool {
		st, err := store.OutboxStats(ctx)
		return err == nil && st.Parked == 1 && st.Waiting == 0
	}, 10*time.Second, 5*time.Millisecond)
	comments := srv.Comments("acme/widget", 3)
	require.NotEmpty(t, comments)
	assert.True(t, strings.HasPrefix(comments[len(comments)-1], "y\n\n<!-- mozi:outbox:"), comments[len(comments)-1])
}
