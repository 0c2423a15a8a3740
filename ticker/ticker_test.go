package ticker_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/gitea"
	"github.com/moziplus/mozi/repository/pgtest"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/repository/task/build"
	"github.com/moziplus/mozi/spawner/notice"
	"github.com/moziplus/mozi/templates"
	"github.com/moziplus/mozi/ticker"
	"github.com/moziplus/mozi/webhook"
	"github.com/moziplus/mozi/webhook/recording"
	"github.com/moziplus/mozi/webhook/rules"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// fakeGitea answers what the ticker asks; a nil answer is a 404-like error.
type fakeGitea struct {
	mu       sync.Mutex
	issues   map[int]task.Issue
	pulls    map[int]task.PullRequest
	statuses map[string][]task.CommitStatus
	// pending are the review requests still open, by pull request (a
	// pull request's RequestedReviewers also lists who reviewed, as
	// Gitea's does).
	pending  map[int][]string
	comments []gitea.IssueComment
	err      error
	calls    int
}

func (f *fakeGitea) PendingReviewRequests(_ context.Context, _ string, number int) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	return slices.Clone(f.pending[number]), nil
}

func (f *fakeGitea) CommentsSince(_ context.Context, _ string, since time.Time, limit int) ([]gitea.IssueComment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	var out []gitea.IssueComment
	for _, c := range f.comments {
		if !c.UpdatedAt.Before(since) && len(out) < limit {
			out = append(out, c)
		}
	}
	return out, nil
}

func (f *fakeGitea) OpenIssuesSince(_ context.Context, repo string, since time.Time, limit int) ([]task.Issue, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	var out []task.Issue
	for _, i := range f.issues {
		if i.Repo == repo && !i.IsPull && !i.Closed() && !i.UpdatedAt.Before(since) && len(out) < limit {
			out = append(out, i)
		}
	}
	return out, nil
}

func (f *fakeGitea) OpenPullRequestsSince(_ context.Context, repo string, since time.Time, limit int) ([]task.PullRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	var out []task.PullRequest
	for _, p := range f.pulls {
		if p.Repo == repo && p.State == task.StateOpen && !p.UpdatedAt.Before(since) && len(out) < limit {
			out = append(out, p)
		}
	}
	return out, nil
}

var errGiteaDown = errors.New("gitea: 502 Bad Gateway")

func (f *fakeGitea) FetchIssue(_ context.Context, _ string, n int) (task.Issue, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return task.Issue{}, f.err
	}
	i, ok := f.issues[n]
	if !ok {
		return task.Issue{}, task.ErrNotFound
	}
	return i, nil
}

func (f *fakeGitea) FetchPullRequest(context.Context, string, int) (task.PullRequest, error) {
	return task.PullRequest{}, task.ErrNotFound
}

// FetchStatuses answers, as Gitea's client does, statuses that name their
// repository and commit.
func (f *fakeGitea) FetchStatuses(_ context.Context, repo, sha string) ([]task.CommitStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	out := slices.Clone(f.statuses[sha])
	for i := range out {
		out[i].Repo, out[i].SHA = repo, sha
	}
	return out, nil
}

// world is a store fed by the recorded deliveries through the real intake
// and mapper, with a ticker whose jobs the test runs by hand.
type world struct {
	t         *testing.T
	store     *repository.Store
	clock     *pgtest.Clock
	server    *httptest.Server
	processor *webhook.Processor
	fixtures  []recording.Fixture
	gitea     *fakeGitea
}

func newWorld(t *testing.T, opts ...func(*rules.Config)) *world {
	t.Helper()
	store, clock := pgtest.StoreWithClock(t)
	agents := rules.NewAgents([]rules.Agent{{Login: "coder1"}, {Login: "coder2"}, {Login: "reviewer1"},
		{Login: "lead", Lead: true}})
	mcfg := rules.Config{BotUser: "mozi", Agents: agents, Route: templates.RouteBusinessType,
		TaskBudgetPerHour: 1000, Comments: true}
	for _, o := range opts {
		o(&mcfg)
	}
	mapper := rules.New(mcfg)
	intake, err := webhook.NewIntake(store, webhook.IntakeConfig{InsecureNoSignature: true})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	intake.Start(ctx)
	w := &world{t: t, store: store, clock: clock, fixtures: recording.MustLoad(), gitea: &fakeGitea{},
		server:    httptest.NewServer(intake.Routes()),
		processor: webhook.NewProcessor(store, mapper.Apply, webhook.ProcessorConfig{BackoffBase: time.Millisecond, BackoffMax: time.Millisecond})}
	t.Cleanup(func() { w.server.Close(); cancel(); intake.Wait() })
	return w
}

func (w *world) replay(prefixes ...string) {
	w.t.Helper()
	for _, p := range prefixes {
		req, err := recording.Find(w.fixtures, p).Request(w.server.URL+webhook.Path, nil)
		require.NoError(w.t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(w.t, err)
		resp.Body.Close()
		require.Equal(w.t, http.StatusAccepted, resp.StatusCode, "fixture %s", p)
	}
	w.drain()
}

// send posts a delivery (an edited recording) and processes it.
func (w *world) send(f recording.Fixture) {
	w.t.Helper()
	req, err := f.Request(w.server.URL+webhook.Path, recording.WithDelivery(f.Name))
	require.NoError(w.t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(w.t, err)
	resp.Body.Close()
	require.Equal(w.t, http.StatusAccepted, resp.StatusCode, f.Name)
	w.drain()
}

func (w *world) drain() {
	w.t.Helper()
	for i := 0; w.processor.ProcessOne(context.Background()); i++ {
		require.Less(w.t, i, 1000, "inbox does not drain")
	}
}

func (w *world) ticker(cfg ticker.Config) *ticker.Ticker {
	cfg.Owner = "test"
	if cfg.Now == nil {
		cfg.Now = w.clock.Now // the ticker's cutoffs and the store's now() agree
	}
	return ticker.New(cfg, w.store, w.gitea)
}

// tasks lists the tasks of an agent on an issue, newest first.
func (w *world) tasks(action task.ActionType, agent string, issue int) []task.Task {
	w.t.Helper()
	tasks, err := w.store.ListTasks(context.Background(), repository.TaskFilter{Repo: "acme/widget",
		IssueNumber: issue, Agent: agent, ActionType: action})
	require.NoError(w.t, err)
	return tasks
}

func (w *world) task(action task.ActionType, agent string, issue int) task.Task {
	w.t.Helper()
	tasks := w.tasks(action, agent, issue)
	require.NotEmpty(w.t, tasks, "no %s task of %s on #%d", action, agent, issue)
	return tasks[0]
}

// Gitea closed an issue while mozi was down (the webhook is lost): the
// reconcile pass reads it, feeds an issues/closed delivery through the
// inbox, and the live task ends as if the webhook had come, once.
func TestReconcileCatchesALostClose(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.replay("007", "009") // #3 opened, assigned to coder2
	live := w.task(task.ActionIssueAssigned, "coder2", 3)
	require.Equal(t, task.StatusPending, live.Status)
	cached, err := w.store.Issue(ctx, "acme/widget", 3)
	require.NoError(t, err)

	closed := cached
	closed.State, closed.UpdatedAt, closed.ClosedAt = "closed", cached.UpdatedAt.Add(time.Hour), cached.UpdatedAt.Add(time.Hour)
	w.gitea.issues = map[int]task.Issue{3: closed}
	tk := w.ticker(ticker.Config{ReconcileAge: time.Minute})
	assert.Equal(t, 0, tk.RunJob(ctx, ticker.JobReconcile), "the copy is fresh")
	w.clock.Advance(2 * time.Minute) // the copy is now older than ReconcileAge

	w.gitea.err = errGiteaDown
	assert.Equal(t, 0, tk.RunJob(ctx, ticker.JobReconcile), "Gitea down: nothing changes, the next pass retries")
	w.gitea.err = nil

	assert.Equal(t, 1, tk.RunJob(ctx, ticker.JobReconcile))
	w.drain()
	assert.Equal(t, task.StatusDone, w.task(task.ActionIssueAssigned, "coder2", 3).Status)
	deliveries, err := w.store.ListDeliveries(ctx, repository.DeliveryFilter{})
	require.NoError(t, err)
	assert.Equal(t, "closed", deliveries[0].Action)
	assert.Equal(t, "ticker", deliveries[0].Headers["X-Mozi-Synthesized"])

	w.clock.Advance(2 * time.Minute)
	assert.Equal(t, 0, tk.RunJob(ctx, ticker.JobReconcile), "nothing live waits on #3 any more")
}

// A failing CI status whose webhook was lost is found by polling the head
// of a pull request in review, and becomes one ci_failure task.
func TestStatusPollFindsALostFailure(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.replay("007", "009", "019") // #3 assigned to coder2; PR #4 opened for it
	pr, err := w.store.PullRequest(ctx, "acme/widget", 4)
	require.NoError(t, err)
	require.NotEmpty(t, pr.HeadSHA)
	lint := task.CommitStatus{Repo: pr.Repo, SHA: pr.HeadSHA, ID: 71, Context: "ci/lint", State: "success", UpdatedAt: time.Now()}
	require.NoError(t, w.store.SaveHeadStatus(ctx, lint)) // its webhook came
	w.gitea.statuses = map[string][]task.CommitStatus{pr.HeadSHA: {
		lint,
		{ID: 72, Context: "ci/test", State: "failure", Description: "2 tests failed", UpdatedAt: time.Now()},
	}}
	tk := w.ticker(ticker.Config{})
	assert.Equal(t, 1, tk.RunJob(ctx, ticker.JobStatuses), "the failure, not the success mozi knows")
	w.drain()
	failure := w.task(task.ActionCIFailure, "coder2", 4)
	assert.Equal(t, task.StatusPending, failure.Status)
	assert.Equal(t, 0, tk.RunJob(ctx, ticker.JobStatuses), "the same status is not fed twice")
}

// A green status whose webhook was lost is found by the same poll: the
// reviewers held for CI start instead of waiting for ever.
func TestStatusPollReleasesReviewersAfterALostGreen(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.replay("007", "009", "019") // #3 assigned to coder2; PR #4 opened for it
	pr, err := w.store.PullRequest(ctx, "acme/widget", 4)
	require.NoError(t, err)
	running := task.CommitStatus{Repo: pr.Repo, SHA: pr.HeadSHA, ID: 80, Context: "ci/test", State: "pending", UpdatedAt: time.Now()}
	require.NoError(t, w.store.SaveHeadStatus(ctx, running))
	w.replay("020") // review requested while CI runs
	w.drain()
	review := w.task(task.ActionReviewRequest, "reviewer1", 4)
	require.Equal(t, task.HeldForCI, review.HeldFor, "held while the head is pending")

	w.gitea.statuses = map[string][]task.CommitStatus{pr.HeadSHA: {
		{ID: 81, Context: "ci/test", State: "success", UpdatedAt: time.Now().Add(time.Second)}}}
	tk := w.ticker(ticker.Config{})
	assert.Equal(t, 1, tk.RunJob(ctx, ticker.JobStatuses), "the green mozi never heard of")
	w.drain()
	review = w.task(task.ActionReviewRequest, "reviewer1", 4)
	assert.Empty(t, review.HeldFor, "released")
	assert.False(t, review.NotBefore.After(w.clock.Now()), "and due")
	assert.Equal(t, 0, tk.RunJob(ctx, ticker.JobStatuses), "a recorded green is not fed again")
}

// An unassigned top-level issue is broadcast to every agent for
// discussion once its grace period is over, once.
func TestDiscussionBroadcastOnce(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	require.NoError(t, w.store.SaveIssue(ctx, task.Issue{Repo: "acme/widget", Number: 50, Title: "Which queue?",
		State: "open", Author: "owner", UpdatedAt: time.Now(), DiscussionDueAt: time.Now().Add(-time.Second)}))
	require.NoError(t, w.store.SaveIssue(ctx, task.Issue{Repo: "acme/widget", Number: 51, Title: "Not yet",
		State: "open", Author: "owner", UpdatedAt: time.Now(), DiscussionDueAt: time.Now().Add(time.Hour)}))
	var seen creations
	tk := w.ticker(ticker.Config{Agents: []string{"coder1", "coder2"}, Creations: &seen})
	assert.Equal(t, 2, tk.RunJob(ctx, ticker.JobDiscussions))
	for _, agent := range []string{"coder1", "coder2"} {
		assert.Equal(t, task.StatusPending, w.task(task.ActionDiscussion, agent, 50).Status)
	}
	assert.Equal(t, []task.ActionType{task.ActionDiscussion, task.ActionDiscussion}, seen.created,
		"counted in mozi_tasks_created_total like the webhook's tasks")
	assert.Equal(t, 0, tk.RunJob(ctx, ticker.JobDiscussions), "broadcast once")
	assert.Len(t, seen.created, 2)
	assert.Empty(t, w.tasks(task.ActionDiscussion, "coder1", 51), "#51's grace period is not over")
}

// A builder given to the ticker (mozi serve gives the rules' one) is its
// only guard configuration and observer: its budget and retries apply, and
// the ticker's own fields are not used.
func TestTickerUsesTheSharedBuilder(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	require.NoError(t, w.store.SaveIssue(ctx, task.Issue{Repo: "acme/widget", Number: 52, Title: "Which cache?",
		State: "open", Author: "owner", Labels: []string{"priority/P1"}, UpdatedAt: time.Now(),
		DiscussionDueAt: time.Now().Add(-time.Second)}))
	var shared, unused creations
	tk := w.ticker(ticker.Config{Agents: []string{"coder1", "coder2"}, TaskBudgetPerHour: 10, MaxRetries: 9,
		Creations: &unused, Tasks: build.New(build.Config{BudgetPerHour: 1, MaxRetries: 3, Observer: &shared})})
	assert.Equal(t, 1, tk.RunJob(ctx, ticker.JobDiscussions))
	got := w.task(task.ActionDiscussion, "coder1", 52)
	assert.Equal(t, 3, got.MaxRetries)
	assert.Equal(t, 1, got.Priority, "from the issue's labels, as every task built from an issue")
	assert.Empty(t, w.tasks(task.ActionDiscussion, "coder2", 52), "the shared budget of 1 per hour is spent")
	assert.Equal(t, []task.ActionType{task.ActionDiscussion}, shared.created)
	assert.Equal(t, []repository.Refusal{repository.RefusedBudget}, shared.refused)
	assert.Empty(t, unused.created)
	assert.Empty(t, unused.refused)
}

// A discussion broadcast waits while deliveries of its issue are still in
// the inbox: behind a backlog longer than the grace period, the issue's
// assignment may be one of them. Deliveries of other issues do not hold it.
func TestDiscussionWaitsForTheIssuesQueuedDeliveries(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.replay("002", "007") // #1 and #3 opened unassigned, long ago: both due
	req, err := recording.Find(w.fixtures, "009").Request(w.server.URL+webhook.Path, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req) // #3 assigned to coder2, not processed yet
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)

	tk := w.ticker(ticker.Config{Agents: []string{"coder1", "coder2"}})
	assert.Equal(t, 2, tk.RunJob(ctx, ticker.JobDiscussions), "#1 is broadcast to both agents")
	assert.Empty(t, w.tasks(task.ActionDiscussion, "", 3), "#3 waits for its queued delivery")

	w.drain()
	assert.Equal(t, task.StatusPending, w.task(task.ActionIssueAssigned, "coder2", 3).Status)
	assert.Equal(t, 0, tk.RunJob(ctx, ticker.JobDiscussions))
	assert.Empty(t, w.tasks(task.ActionDiscussion, "", 3), "#3 is assigned: no discussion")
}

// Pending tasks of an agent removed from the configuration fail with a
// reason instead of waiting forever.
func TestOrphansFail(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	ghost, err := w.store.CreateTask(ctx, repository.NewTask{Repo: "acme/widget", IssueNumber: 8,
		ActionType: task.ActionMention, Agent: "ghost", Priority: 2})
	require.NoError(t, err)
	kept, err := w.store.CreateTask(ctx, repository.NewTask{Repo: "acme/widget", IssueNumber: 8,
		ActionType: task.ActionMention, Agent: "coder1", Priority: 2})
	require.NoError(t, err)
	tk := w.ticker(ticker.Config{Declared: []string{"coder1"}})
	assert.Equal(t, 1, tk.RunJob(ctx, ticker.JobOrphans))
	got, err := w.store.Task(ctx, ghost.ID)
	require.NoError(t, err)
	assert.Equal(t, task.StatusFailed, got.Status)
	assert.Contains(t, got.LastError, "agent ghost is not declared")
	got, err = w.store.Task(ctx, kept.ID)
	require.NoError(t, err)
	assert.Equal(t, task.StatusPending, got.Status)
}

// Prune removes processed deliveries and the logs of finished tasks older
// than the retention; live tasks' logs and parked deliveries stay.
func TestPruneByRetention(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.replay("002", "004") // #1 opened, #2 assigned to coder1
	dir := t.TempDir()
	finished, err := w.store.CreateTask(ctx, repository.NewTask{Repo: "acme/widget", IssueNumber: 9,
		ActionType: task.ActionIssueClosed, Agent: "coder1", Priority: 2})
	require.NoError(t, err)
	live := w.task(task.ActionIssueAssigned, "coder1", 2)
	logs := map[int64]string{}
	for _, tk := range []task.Task{finished, live} {
		logs[tk.ID] = filepath.Join(dir, fmt.Sprintf("%d-1.log", tk.ID))
		require.NoError(t, os.WriteFile(logs[tk.ID], []byte("agent output"), 0o600))
		_, err := w.store.StartAttempt(ctx, tk, "r1", logs[tk.ID])
		require.NoError(t, err)
	}
	_, err = w.store.Apply(ctx, finished.ID, task.EventComplete, repository.Change{})
	require.NoError(t, err)

	now := time.Now()
	tk := w.ticker(ticker.Config{Retention: 24 * time.Hour, Now: func() time.Time { return now }})
	assert.Equal(t, 0, tk.RunJob(ctx, ticker.JobPrune), "nothing is a day old yet")

	later := w.ticker(ticker.Config{Retention: 24 * time.Hour, Now: func() time.Time { return now.Add(48 * time.Hour) }})
	assert.Positive(t, later.RunJob(ctx, ticker.JobPrune))
	deliveries, err := w.store.ListDeliveries(ctx, repository.DeliveryFilter{})
	require.NoError(t, err)
	assert.Empty(t, deliveries)
	assert.NoFileExists(t, logs[finished.ID])
	assert.FileExists(t, logs[live.ID], "the live task's log stays")
}

// Two unassigned parent issues are two discussions: a broadcast keyed per
// repository would mark the second discussed with no task.
func TestEveryUnassignedParentGetsItsDiscussion(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	for _, n := range []int{60, 61} {
		require.NoError(t, w.store.SaveIssue(ctx, task.Issue{Repo: "acme/widget", Number: n, Title: "Plan",
			State: "open", Author: "owner", UpdatedAt: time.Now(), DiscussionDueAt: time.Now().Add(-time.Second)}))
	}
	tk := w.ticker(ticker.Config{Agents: []string{"coder1", "coder2"}})
	assert.Equal(t, 4, tk.RunJob(ctx, ticker.JobDiscussions))
	for _, n := range []int{60, 61} {
		for _, agent := range []string{"coder1", "coder2"} {
			assert.Len(t, w.tasks(task.ActionDiscussion, agent, n), 1, "%s on #%d", agent, n)
		}
	}
}

// A round is complete when every sub-issue is finished: closed, or every
// task it had is terminal — a failed sub-issue must not block its round.
// Each parent gets its own round review.
func TestRoundsCompleteWhenEverySubIsFinished(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	save := func(n, parent int, state string) {
		require.NoError(t, w.store.SaveIssue(ctx, task.Issue{Repo: "acme/widget", Number: n, Title: fmt.Sprintf("#%d", n),
			State: state, Author: "owner", ParentIssue: parent, UpdatedAt: time.Now()}))
	}
	create := func(n int) task.Task {
		created, err := w.store.CreateTask(ctx, repository.NewTask{Repo: "acme/widget", IssueNumber: n, ParentIssue: 70,
			ActionType: task.ActionIssueAssigned, BusinessType: task.BusinessFeature, Agent: "coder1", Priority: 2})
		require.NoError(t, err)
		return created
	}
	save(70, 0, "open")
	save(71, 70, "closed")
	save(72, 70, "open") // its task fails below
	save(80, 0, "open")
	save(81, 80, "closed")
	save(82, 80, "closed")
	failing := create(72)
	tk := w.ticker(ticker.Config{Lead: "lead"})

	assert.Equal(t, 1, tk.RunJob(ctx, ticker.JobRounds), "#80's round only: #72 is still being worked on")
	_, err := w.store.Apply(ctx, failing.ID, task.EventFail, repository.Change{Error: "retries exhausted"})
	require.NoError(t, err)
	assert.Equal(t, 1, tk.RunJob(ctx, ticker.JobRounds), "#72 failed: #70's round is complete too")
	assert.Equal(t, 0, tk.RunJob(ctx, ticker.JobRounds), "each round once")
	for _, parent := range []int{70, 80} {
		reviews := w.tasks(task.ActionRoundReview, "lead", parent)
		require.Len(t, reviews, 1, "parent #%d", parent)
		assert.Equal(t, 1, reviews[0].Meta.Round)
	}

	save(73, 70, "open") // a next-round sub-issue nobody works on yet
	assert.Equal(t, 0, tk.RunJob(ctx, ticker.JobRounds), "an untouched sub-issue is not finished")

	first := w.tasks(task.ActionRoundReview, "lead", 70)[0]
	_, err = w.store.Apply(ctx, first.ID, task.EventComplete, repository.Change{})
	require.NoError(t, err)
	save(73, 70, "closed")
	assert.Equal(t, 1, tk.RunJob(ctx, ticker.JobRounds), "#73 closed: #70's second round")
	reviews := w.tasks(task.ActionRoundReview, "lead", 70)
	require.Len(t, reviews, 2)
	assert.ElementsMatch(t, []int{1, 2}, []int{reviews[0].Meta.Round, reviews[1].Meta.Round})
	assert.Equal(t, 0, tk.RunJob(ctx, ticker.JobRounds))
}

// The counts job folds the counts of finished tasks, which the database
// keeps as tasks finish, into their totals; mozi_tasks reads them.
func TestCountsJobFoldsFinishedTasks(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	for _, ev := range []task.Event{task.EventComplete, task.EventComplete, task.EventFail} {
		tk, err := w.store.CreateTask(ctx, repository.NewTask{Repo: "acme/widget", IssueNumber: 90,
			ActionType: task.ActionIssueClosed, Agent: "coder1", Priority: 2})
		require.NoError(t, err)
		_, err = w.store.Apply(ctx, tk.ID, ev, repository.Change{})
		require.NoError(t, err)
	}
	tk := w.ticker(ticker.Config{})
	assert.Equal(t, 3, tk.RunJob(ctx, ticker.JobCounts))
	assert.Zero(t, tk.RunJob(ctx, ticker.JobCounts), "nothing left to fold")
	counts, err := w.store.TaskCounts(ctx)
	require.NoError(t, err)
	got := map[task.Status]int{}
	for _, c := range counts {
		if c.ActionType == task.ActionIssueClosed {
			got[c.Status] = c.N
		}
	}
	assert.Equal(t, map[task.Status]int{task.StatusDone: 2, task.StatusFailed: 1}, got)
}

// runEnds claims a task and records a run of it that exited 0: the task
// then waits, without a lease, for Gitea.
func (w *world) runEnds(t task.Task) {
	w.t.Helper()
	ctx := context.Background()
	claimed, err := w.store.ClaimTasks(ctx, repository.ClaimRequest{Owner: "r1", Limit: 10, LeaseTTL: time.Minute,
		Agents: []repository.AgentLimit{{Login: t.Agent, MaxConcurrency: 10}}})
	require.NoError(w.t, err)
	require.NotEmpty(w.t, claimed)
	for _, c := range claimed {
		if c.ID != t.ID {
			continue
		}
		a, started, err := w.store.StartRun(ctx, c, "r1", "")
		require.NoError(w.t, err)
		require.True(w.t, started)
		a.Outcome = task.AttemptSucceeded
		_, err = w.store.FinishRun(ctx, repository.RunEnd{Attempt: a, Owner: "r1"})
		require.NoError(w.t, err)
		return
	}
	w.t.Fatalf("task %d was not claimed", t.ID)
}

// An agent that exits 0 without opening its pull request leaves its task
// working with nothing to move it: the watchdog runs it once more with a
// prompt that says what is missing, then fails it with one comment.
// Tasks that wait on people (an approved review, an open pull request)
// are left alone.
func TestWatchdogFollowsUpThenFails(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.replay("007", "009") // #3 assigned to coder2
	assigned := w.task(task.ActionIssueAssigned, "coder2", 3)
	approved, err := w.store.CreateTask(ctx, repository.NewTask{Repo: "acme/widget", IssueNumber: 40, PRNumber: 40,
		ActionType: task.ActionReviewResult, Agent: "coder1", Priority: 2, Meta: task.Meta{ReviewState: "approved"}})
	require.NoError(t, err)
	w.runEnds(assigned)
	w.runEnds(approved)

	tk := w.ticker(ticker.Config{WatchdogQuiet: time.Minute, Notices: notice.New()})
	require.Zero(t, tk.RunJob(ctx, ticker.JobWatchdog), "quiet for less than WatchdogQuiet")
	w.clock.Advance(2 * time.Minute)
	require.Positive(t, tk.RunJob(ctx, ticker.JobWatchdog), "the stalled task is followed up")
	got := w.task(task.ActionIssueAssigned, "coder2", 3)
	assert.Equal(t, task.StatusPending, got.Status, "the agent runs once more")
	assert.Equal(t, task.FollowUpPullRequest, got.Meta.FollowUp, "its prompt says what is missing")
	assert.Equal(t, 0, got.RetryCount, "a follow-up is not a failed attempt")

	w.runEnds(got) // the follow-up run ends cleanly, still without a pull request
	w.clock.Advance(2 * time.Minute)
	require.Positive(t, tk.RunJob(ctx, ticker.JobWatchdog), "the task is failed")
	got = w.task(task.ActionIssueAssigned, "coder2", 3)
	assert.Equal(t, task.StatusFailed, got.Status)
	assert.Contains(t, got.LastError, "without opening a pull request, also after a follow-up")
	queued, err := w.store.QueuedComments(ctx, "acme/widget", 3)
	require.NoError(t, err)
	require.Len(t, queued, 1, "one comment queued for the issue, with the failure")
	assert.Contains(t, queued[0].Body, "failed")

	still, err := w.store.Task(ctx, approved.ID)
	require.NoError(t, err)
	assert.Equal(t, task.StatusWorking, still.Status, "an approved review waits for a person's merge")
	assert.Zero(t, tk.RunJob(ctx, ticker.JobWatchdog))
}

// A pull request closed without merge sends its issue's task back to
// working: the follow-up says so.
func TestWatchdogNamesAClosedPullRequest(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.replay("007", "009") // #3 assigned to coder2
	w.runEnds(w.task(task.ActionIssueAssigned, "coder2", 3))
	w.replay("019") // PR #4 for #3: the task goes to review
	require.Equal(t, task.StatusReview, w.task(task.ActionIssueAssigned, "coder2", 3).Status)
	pr := recording.Find(w.fixtures, "030")
	closed, err := pr.Edit(func(p map[string]any) {
		p["pull_request"].(map[string]any)["merged"] = false
		p["pull_request"].(map[string]any)["merged_by"] = nil
	})
	require.NoError(t, err)
	w.send(closed)
	require.Equal(t, task.StatusWorking, w.task(task.ActionIssueAssigned, "coder2", 3).Status)

	tk := w.ticker(ticker.Config{WatchdogQuiet: time.Minute})
	w.clock.Advance(2 * time.Minute)
	require.Positive(t, tk.RunJob(ctx, ticker.JobWatchdog))
	assert.Equal(t, task.FollowUpPullClosed, w.task(task.ActionIssueAssigned, "coder2", 3).Meta.FollowUp)
}

// The ticker's tasks pass the guards the webhook's do: no task for a
// mention made before its issue was closed, none past the issue's hourly
// budget.
func TestTickerTasksPassTheSameGuards(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	queue := func(issue int, comment int64) {
		require.NoError(t, w.store.InTx(ctx, func(tx *repository.Tx) error {
			_, _, err := tx.EnqueueMention(ctx, repository.Mention{Repo: "acme/widget", IssueNumber: issue,
				CommentID: comment, Author: "lead", Mentioned: "coder1"})
			return err
		}))
	}
	require.NoError(t, w.store.SaveIssue(ctx, task.Issue{Repo: "acme/widget", Number: 91, Title: "Closed",
		State: "closed", Author: "owner", UpdatedAt: time.Now().Add(time.Hour), ClosedAt: time.Now().Add(time.Hour)}))
	queue(91, 5001) // mentioned, then the issue was closed

	require.NoError(t, w.store.SaveIssue(ctx, task.Issue{Repo: "acme/widget", Number: 92, Title: "Busy",
		State: "open", Author: "owner", UpdatedAt: time.Now(), DiscussionDueAt: time.Now().Add(-time.Second)}))
	_, err := w.store.CreateTask(ctx, repository.NewTask{Repo: "acme/widget", IssueNumber: 92,
		ActionType: task.ActionMention, Agent: "coder2", Priority: 2})
	require.NoError(t, err)
	queue(92, 5002) // the budget of one task per hour is spent

	var seen creations
	tk := w.ticker(ticker.Config{MentionsAge: time.Minute, TaskBudgetPerHour: 1, Agents: []string{"coder1"},
		Creations: &seen})
	w.clock.Advance(2 * time.Minute) // the mentions are now older than MentionsAge
	assert.Zero(t, tk.RunJob(ctx, ticker.JobMentions))
	assert.Zero(t, tk.RunJob(ctx, ticker.JobDiscussions))
	assert.Empty(t, seen.created)
	assert.ElementsMatch(t, []repository.Refusal{repository.RefusedClosed, repository.RefusedBudget, repository.RefusedBudget},
		seen.refused, "the closed issue's mention; #92's mention and discussion past its budget")
	assert.Empty(t, w.tasks(task.ActionMention, "coder1", 91))
	assert.Empty(t, w.tasks(task.ActionMention, "coder1", 92))
	assert.Empty(t, w.tasks(task.ActionDiscussion, "coder1", 92))
	mentions, err := w.store.Mentions(ctx, "acme/widget", 91)
	require.NoError(t, err)
	assert.Equal(t, "skipped", mentions[0].Outcome, "consumed, not left to retry for ever")
}

// A storm of agent comments on one repository trips its circuit breaker:
// new agent runs there pause (other repositories go on), the issue gets
// one comment saying so, and the breaker closes by itself.
func TestCircuitBreakerPausesAStormingRepository(t *testing.T) {
	w := newWorld(t, func(c *rules.Config) {
		c.Breaker = repository.BreakerPolicy{Comments: 3, Window: 10 * time.Minute, Cooldown: time.Minute}
	})
	ctx := context.Background()
	comment := recording.Find(w.fixtures, "016") // a comment on acme/widget#3
	for i := range 5 {
		storm, err := comment.Edit(func(p map[string]any) {
			c := p["comment"].(map[string]any)
			c["id"], c["body"] = 7000+i, fmt.Sprintf("ping %d", i)
			c["user"].(map[string]any)["login"] = "coder1"
			p["sender"].(map[string]any)["login"] = "coder1"
		})
		require.NoError(t, err)
		storm.Name = fmt.Sprintf("storm-%d", i)
		w.send(storm)
	}
	for _, repo := range []string{"acme/widget", "acme/gadget"} {
		_, err := w.store.CreateTask(ctx, repository.NewTask{Repo: repo, IssueNumber: 50, ActionType: task.ActionMention,
			Agent: "coder2", Priority: 2})
		require.NoError(t, err)
	}
	claim := func() []string {
		tasks, err := w.store.ClaimTasks(ctx, repository.ClaimRequest{Owner: "r1", Limit: 10, LeaseTTL: time.Minute,
			Agents: []repository.AgentLimit{{Login: "coder2", MaxConcurrency: 10}}})
		require.NoError(t, err)
		var repos []string
		for _, tk := range tasks {
			repos = append(repos, tk.Repo)
		}
		return repos
	}
	assert.Equal(t, []string{"acme/gadget"}, claim(), "acme/widget is paused, acme/gadget is not")

	queued, err := w.store.QueuedComments(ctx, "acme/widget", 3)
	require.NoError(t, err)
	require.Len(t, queued, 1, "one comment per trip, queued with the trip")
	assert.Contains(t, queued[0].Body, "paused new agent runs")

	assert.Empty(t, claim(), "acme/widget stays paused during the cooldown")
	w.clock.Advance(2 * time.Minute)
	assert.Equal(t, []string{"acme/widget"}, claim(), "the breaker closes by itself after its cooldown")
}

// blockingGitea answers nothing until the asking job's context ends, and
// says whether it ended.
type blockingGitea struct {
	*fakeGitea
	asked     chan struct{}
	cancelled chan struct{}
}

func (b *blockingGitea) FetchIssue(ctx context.Context, _ string, _ int) (task.Issue, error) {
	close(b.asked)
	<-ctx.Done()
	close(b.cancelled)
	return task.Issue{}, ctx.Err()
}

// A leader whose lease is taken over while a job waits on a slow Gitea
// stops that job: two tickers never run the same jobs at once.
func TestLeadershipLostMidJobStopsTheJob(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.replay("007", "009") // a live task on #3, whose copy the reconcile job re-reads
	slow := &blockingGitea{fakeGitea: w.gitea, asked: make(chan struct{}), cancelled: make(chan struct{})}
	tk := ticker.New(ticker.Config{Owner: "test", LeaderTTL: 300 * time.Millisecond, ReconcileAge: time.Nanosecond},
		w.store, slow)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { tk.Run(runCtx); close(done) }()
	defer func() { stop(); <-done }()

	select {
	case <-slow.asked:
	case <-time.After(10 * time.Second):
		t.Fatal("the reconcile job never asked Gitea")
	}
	require.NoError(t, w.store.ReleaseLeadership(ctx, "ticker", "test"))
	took, err := w.store.AcquireLeadership(ctx, "ticker", "other", time.Hour)
	require.NoError(t, err)
	require.True(t, took)
	select {
	case <-slow.cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the job went on after its runner lost the leadership")
	}
}

// creations records what the ticker tells its CreationObserver.
type creations struct {
	created []task.ActionType
	refused []repository.Refusal
}

func (c *creations) TaskCreated(a task.ActionType) { c.created = append(c.created, a) }
func (c *creations) TaskRefused(_ task.ActionType, why repository.Refusal) {
	c.refused = append(c.refused, why)
}
