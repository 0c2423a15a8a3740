package progress_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/pgtest"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/spawner/progress"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// fakeGitea keeps comments by id and the reactions left; failPost decides
// whether a post fails, before or after Gitea wrote the comment.
type fakeGitea struct {
	mu        sync.Mutex
	comments  map[int64]string
	order     []int64
	posts     int
	edits     int
	reactions []string
	failPost  func(try int) (written bool, err error)
	noEdit    bool // a Gitea without the edit route
}

func newFakeGitea() *fakeGitea { return &fakeGitea{comments: map[int64]string{}} }

func (f *fakeGitea) PostComment(_ context.Context, _ string, _ int, body string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.posts++
	written, err := false, error(nil)
	if f.failPost != nil {
		written, err = f.failPost(f.posts)
	}
	if err != nil && !written {
		return 0, err
	}
	id := int64(100 + len(f.order))
	f.comments[id] = body
	f.order = append(f.order, id)
	return id, err
}

func (f *fakeGitea) EditComment(_ context.Context, _ string, id int64, body string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.comments[id]; !ok || f.noEdit {
		return fmt.Errorf("edit comment %d: %w", id, task.ErrNotFound)
	}
	f.edits++
	f.comments[id] = body
	return nil
}

func (f *fakeGitea) FetchComments(context.Context, string, int, int) ([]task.Comment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []task.Comment
	for _, id := range f.order {
		if body, ok := f.comments[id]; ok {
			out = append(out, task.Comment{ID: id, Body: body})
		}
	}
	return out, nil
}

func (f *fakeGitea) ReactToIssue(_ context.Context, repo string, number int, reaction string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reactions = append(f.reactions, fmt.Sprintf("%s#%d %s", repo, number, reaction))
	return nil
}

func (f *fakeGitea) ReactToComment(_ context.Context, repo string, id int64, reaction string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reactions = append(f.reactions, fmt.Sprintf("%s comment %d %s", repo, id, reaction))
	return nil
}

// bodies are the comments Gitea shows, in the order they were posted.
func (f *fakeGitea) bodies() []string {
	comments, _ := f.FetchComments(context.Background(), "", 0, 0)
	var out []string
	for _, c := range comments {
		out = append(out, c.Body)
	}
	return out
}

func (f *fakeGitea) counts() (posts, edits int, reactions []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.posts, f.edits, append([]string(nil), f.reactions...)
}

const repo = "acme/widget"

func newTask(t *testing.T, store *repository.Store, issue int, action task.ActionType, meta task.Meta) task.Task {
	t.Helper()
	tk, err := store.CreateTask(context.Background(), repository.NewTask{Repo: repo, IssueNumber: issue,
		ActionType: action, Agent: "coder", Priority: task.DefaultPriority, Meta: meta})
	require.NoError(t, err)
	return tk
}

func apply(t *testing.T, store *repository.Store, id int64, ev task.Event, c repository.Change) {
	t.Helper()
	res, err := store.Apply(context.Background(), id, ev, c)
	require.NoError(t, err)
	require.True(t, res.Applied, "%s applied", ev)
}

func shown(t *testing.T, store *repository.Store, issue int) []string {
	t.Helper()
	edits, err := store.StatusEdits(context.Background(), repo, issue)
	require.NoError(t, err)
	var out []string
	for _, e := range edits {
		out = append(out, state(e.Body))
	}
	return out
}

// state is the word a status comment's line leads with.
func state(body string) string {
	for _, s := range []string{"queued", "starting", "running", "opened", "done", "failed", "cancelled", "waiting"} {
		if strings.Contains(body, "**"+s+"**") || strings.Contains(body, " "+s+"**") {
			return s
		}
	}
	return body
}

func TestStatusCommentIsOneCommentEditedInPlace(t *testing.T) {
	store, clock := pgtest.StoreWithClock(t)
	ctx := context.Background()
	g := newFakeGitea()
	p := progress.NewPoster(store, g, progress.Config{MinEditInterval: time.Minute, BackoffBase: time.Millisecond})

	tk := newTask(t, store, 3, task.ActionIssueAssigned, task.Meta{})
	p.Pass(ctx)
	require.Equal(t, []string{"queued"}, shown(t, store, 3))
	posts, edits, reactions := g.counts()
	assert.Equal(t, 1, posts)
	assert.Zero(t, edits)
	assert.Equal(t, []string{repo + "#3 eyes"}, reactions, "👀 on the issue the task was made for")

	apply(t, store, tk.ID, task.EventClaim, repository.Change{LeaseOwner: "r1", LeaseTTL: time.Hour})
	apply(t, store, tk.ID, task.EventStart, repository.Change{LeaseOwner: "r1"})
	p.Pass(ctx)
	assert.Equal(t, []string{"queued"}, shown(t, store, 3), "no edit within the minimum interval")

	clock.Advance(time.Minute)
	p.Pass(ctx)
	assert.Equal(t, []string{"queued", "running"}, shown(t, store, 3), "claimed and started: one edit, the latest state")

	apply(t, store, tk.ID, task.EventOpenReview, repository.Change{PRNumber: 12})
	clock.Advance(time.Minute)
	p.Pass(ctx)
	apply(t, store, tk.ID, task.EventComplete, repository.Change{Actor: "alice"})
	p.Pass(ctx)
	clock.Advance(time.Minute)
	p.Pass(ctx)
	p.Pass(ctx)
	assert.Equal(t, []string{"queued", "running", "opened", "done"}, shown(t, store, 3), "the final state is shown")

	bodies := g.bodies()
	require.Len(t, bodies, 1, "one comment per issue")
	assert.Contains(t, bodies[0], "✅ **done** — PR #12")
	assert.Contains(t, bodies[0], progress.Marker)
	posts, edits, reactions = g.counts()
	assert.Equal(t, 1, posts)
	assert.Equal(t, 3, edits)
	assert.Len(t, reactions, 1, "one reaction per task")
}

func TestStatusCommentReactsOnTheMentioningComment(t *testing.T) {
	store := pgtest.Store(t)
	g := newFakeGitea()
	p := progress.NewPoster(store, g, progress.Config{})
	newTask(t, store, 4, task.ActionMention, task.Meta{CommentID: 555})
	p.Pass(context.Background())
	_, _, reactions := g.counts()
	assert.Equal(t, []string{repo + " comment 555 eyes"}, reactions)
}

func TestStatusCommentOffForARepository(t *testing.T) {
	store := pgtest.Store(t)
	ctx := context.Background()
	g := newFakeGitea()
	p := progress.NewPoster(store, g, progress.Config{Enabled: func(r string) bool { return r != repo }})
	newTask(t, store, 3, task.ActionIssueAssigned, task.Meta{})
	p.Pass(ctx)
	p.Pass(ctx)
	posts, _, reactions := g.counts()
	assert.Zero(t, posts)
	assert.Empty(t, reactions)
	due, err := store.ClaimStatusComments(ctx, 10, 0, time.Minute)
	require.NoError(t, err)
	assert.Empty(t, due, "the change was seen: nothing waits")
}

// A first post that reached Gitea though its answer was lost is found by
// its marker and edited: never a second status comment.
func TestStatusCommentRetryFindsTheFirstPost(t *testing.T) {
	store, clock := pgtest.StoreWithClock(t)
	ctx := context.Background()
	g := newFakeGitea()
	g.failPost = func(try int) (bool, error) {
		if try == 1 {
			return true, errors.New("create comment: context deadline exceeded")
		}
		return false, nil
	}
	p := progress.NewPoster(store, g, progress.Config{BackoffBase: time.Second, BackoffMax: time.Second})
	newTask(t, store, 3, task.ActionIssueAssigned, task.Meta{})
	p.Pass(ctx)
	clock.Advance(time.Minute)
	p.Pass(ctx)
	posts, edits, _ := g.counts()
	assert.Equal(t, 1, posts, "no second post")
	assert.Equal(t, 1, edits, "the first post is edited")
	assert.Len(t, g.bodies(), 1)
	assert.Equal(t, []string{"queued"}, shown(t, store, 3))
}

// A status comment someone deleted is posted anew.
func TestStatusCommentDeletedIsPostedAgain(t *testing.T) {
	store, clock := pgtest.StoreWithClock(t)
	ctx := context.Background()
	g := newFakeGitea()
	p := progress.NewPoster(store, g, progress.Config{MinEditInterval: time.Second})
	tk := newTask(t, store, 3, task.ActionIssueAssigned, task.Meta{})
	p.Pass(ctx)
	g.mu.Lock()
	clear(g.comments)
	g.mu.Unlock()
	apply(t, store, tk.ID, task.EventCancel, repository.Change{Actor: "alice"})
	clock.Advance(time.Minute)
	p.Pass(ctx)
	p.Pass(ctx)
	bodies := g.bodies()
	require.Len(t, bodies, 1)
	assert.Contains(t, bodies[0], "⛔ **cancelled** by alice")
}

// A Gitea that lists the comment but answers its edit 404 has no edit
// route: mozi gives up rather than post a comment per change.
func TestStatusCommentNotEditableIsGivenUp(t *testing.T) {
	store, clock := pgtest.StoreWithClock(t)
	ctx := context.Background()
	g := newFakeGitea()
	g.noEdit = true
	p := progress.NewPoster(store, g, progress.Config{MinEditInterval: time.Second})
	tk := newTask(t, store, 3, task.ActionIssueAssigned, task.Meta{})
	p.Pass(ctx)
	for _, ev := range []task.Event{task.EventClaim, task.EventStart} {
		apply(t, store, tk.ID, ev, repository.Change{LeaseOwner: "r1", LeaseTTL: time.Hour})
		clock.Advance(time.Minute)
		p.Pass(ctx)
	}
	posts, edits, _ := g.counts()
	assert.Equal(t, 1, posts, "no comment per change")
	assert.Zero(t, edits)
	due, err := store.ClaimStatusComments(ctx, 10, 0, time.Minute)
	require.NoError(t, err)
	assert.Empty(t, due, "parked")
}
