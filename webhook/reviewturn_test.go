package webhook_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/webhook"
	"github.com/moziplus/mozi/webhook/recording"
	"github.com/moziplus/mozi/webhook/rules"
)

const quiet = 45 * time.Second

// prComment is a new comment on pull request #4 (coder2's, fixture 027)
// by author.
func prComment(t *testing.T, commentID int, author, body string) (recording.Fixture, map[string]string) {
	t.Helper()
	return edit(t, fixture(t, "027"), fmt.Sprintf("loose-%d", commentID), func(p map[string]any) {
		c := p["comment"].(map[string]any)
		c["id"], c["body"] = commentID, body
		c["user"].(map[string]any)["login"] = author
		p["sender"].(map[string]any)["login"] = author
	})
}

// claimCoder2 claims coder2's due tasks as a runner would.
func claimCoder2(t *testing.T, b *bundle) []task.Task {
	t.Helper()
	claimed, err := b.store.ClaimTasks(context.Background(), repository.ClaimRequest{Owner: "r1", Limit: 10,
		LeaseTTL: time.Minute, Agents: []repository.AgentLimit{{Login: "coder2", MaxConcurrency: 10}}})
	require.NoError(t, err)
	return claimed
}

func withQuiet(mc *rules.Config, _ *webhook.IntakeConfig) { mc.QuietPeriod = quiet }

// TestLooseCommentsAreOneDebouncedTurn: a burst of people's plain comments
// on an agent's pull request is one review_comment task of its author,
// due a quiet period after the burst's last comment, that names the
// burst's first comment so the turn's prompt reads them all.
func TestLooseCommentsAreOneDebouncedTurn(t *testing.T) {
	t.Parallel()
	b := setup(t, withQuiet)
	b.send(t, fixture(t, "019"), nil) // coder2 opens #4
	b.drain(t)

	for i, body := range []string{"Why a map here?", "Also the error message is vague.", "And please add a test."} {
		f, o := prComment(t, 500+i, "alice", body)
		b.send(t, f, o)
		b.drain(t)
		live := liveTasks(t, b, task.ActionReviewComment)
		require.Len(t, live, 1, "comment %d", i)
		tk := live[0]
		assert.Equal(t, "coder2", tk.Agent)
		assert.Equal(t, 4, tk.PRNumber)
		assert.Equal(t, task.StatusPending, tk.Status)
		assert.Zero(t, tk.Meta.RoundFrom(), "no turn runs: the round starts at the author's last comment")
		assert.Empty(t, claimCoder2(t, b), "comment %d: the turn waits for quiet", i)
		b.clock.Advance(quiet - time.Second) // never quiet long enough: the next comment comes first
	}
	b.clock.Advance(2 * time.Second)
	claimed := claimCoder2(t, b)
	require.Len(t, claimed, 1, "quiet after the burst: one turn")
	assert.Equal(t, task.ActionReviewComment, claimed[0].ActionType)
	assert.Len(t, b.tasks(t), 1, "one task for the burst")

	// A comment during the turn neither moves it nor makes a second one.
	f, o := prComment(t, 600, "alice", "One more thing.")
	b.send(t, f, o)
	b.drain(t)
	live := liveTasks(t, b, task.ActionReviewComment)
	require.Len(t, live, 1)
	assert.Equal(t, task.StatusClaimed, live[0].Status)
	assert.Len(t, b.tasks(t), 1)
}

func TestLooseCommentsThatAreNotFeedback(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, author, body string
		want               []task.ActionType
	}{
		{"the author's own comment", "coder2", "I will look at it.", nil},
		{"another agent's comment", "reviewer1", "Looks fine to me.", nil},
		{"mozi's own comment", "mozi", "Status: working.", nil},
		{"an [Action Report]", "alice", "[Action Report]\n**Done**: yes", nil},
		{"a mention of the author is its mention task", "alice", "@coder2 please rebase", []task.ActionType{task.ActionMention}},
		{"a person's plain comment", "alice", "Please rebase.", []task.ActionType{task.ActionReviewComment}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, withQuiet)
			b.send(t, fixture(t, "019"), nil)
			b.drain(t)
			f, o := prComment(t, 700, tc.author, tc.body)
			b.send(t, f, o)
			b.drain(t)
			var got []task.ActionType
			for _, tk := range b.tasks(t) {
				got = append(got, tk.ActionType)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestLooseCommentBeforeAPendingReviewTurn: the review_result task that
// waits to run reads the round at run time, comments included: no second
// task.
func TestLooseCommentBeforeAPendingReviewTurn(t *testing.T) {
	t.Parallel()
	b := setup(t, withQuiet)
	for _, name := range []string{"019", "020", "021"} { // opened, review requested, changes requested
		b.send(t, fixture(t, name), nil)
	}
	b.drain(t)
	require.Len(t, liveTasks(t, b, task.ActionReviewResult), 1)
	f, o := prComment(t, 800, "alice", "Also rename the package.")
	b.send(t, f, o)
	b.drain(t)
	assert.Empty(t, liveTasks(t, b, task.ActionReviewComment))
	claimed := claimCoder2(t, b)
	require.Len(t, claimed, 1, "the review's turn is not delayed")
	assert.Equal(t, task.ActionReviewResult, claimed[0].ActionType)
}

// TestReRequestAfterPushIsOneReview: the author ends its round with a push
// and one re-request of the review; the reviewer who asked for changes
// gets one task for it, whichever arrives first.
func TestReRequestAfterPushIsOneReview(t *testing.T) {
	t.Parallel()
	reRequest := func(t *testing.T, at string) (recording.Fixture, map[string]string) {
		return edit(t, fixture(t, "020"), "rerequest-"+at, func(p map[string]any) {
			p["pull_request"].(map[string]any)["updated_at"] = at
		})
	}
	push := func(t *testing.T, at string) (recording.Fixture, map[string]string) {
		return edit(t, fixture(t, "023"), "push-"+at, func(p map[string]any) {
			p["pull_request"].(map[string]any)["updated_at"] = at
		})
	}
	for _, order := range []string{"push first", "re-request first"} {
		t.Run(order, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			for _, name := range []string{"019", "020", "021"} {
				b.send(t, fixture(t, name), nil)
			}
			b.drain(t)
			first, second := push, reRequest
			if order == "re-request first" {
				first, second = reRequest, push
			}
			f, o := first(t, "2026-11-22T23:50:00Z")
			b.send(t, f, o)
			b.drain(t)
			f, o = second(t, "2026-11-22T23:50:01Z")
			b.send(t, f, o)
			b.drain(t)
			var asked []string
			for _, tk := range b.tasks(t) {
				if tk.Agent == "reviewer1" && !tk.Status.Terminal() {
					asked = append(asked, string(tk.ActionType)+"/"+strconv.Itoa(tk.PRNumber))
				}
			}
			assert.Len(t, asked, 1, "one review of the new head: %v", asked)
		})
	}
}

// TestLooseCommentDuringAReviewTurn: a comment that comes while the
// author's review turn runs (its prompt read) is a new turn's, which that
// turn's [Action Report] does not finish; a debounced turn made before
// the report is answered by it as before.
func TestLooseCommentDuringAReviewTurn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, withQuiet)
	for _, name := range []string{"019", "020", "021"} { // opened, review requested, changes requested
		b.send(t, fixture(t, name), nil)
	}
	b.drain(t)
	claimed := claimCoder2(t, b)
	require.Len(t, claimed, 1)
	_, err := b.store.Apply(ctx, claimed[0].ID, task.EventStart, repository.Change{})
	require.NoError(t, err)

	f, o := prComment(t, 900, "alice", "While you are at it, rename the flag.")
	b.send(t, f, o)
	b.drain(t)
	live := liveTasks(t, b, task.ActionReviewComment)
	require.Len(t, live, 1)
	assert.Equal(t, int64(900), live[0].Meta.RoundFrom(), "the new round starts at this comment")

	// The running turn's summary does not answer it.
	f, o = prComment(t, 901, "coder2", "[Action Report]\n**Review**: rejected by reviewer1\n**Answers**: done")
	b.send(t, f, o)
	b.drain(t)
	live = liveTasks(t, b, task.ActionReviewComment)
	require.Len(t, live, 1, "the comment's turn waits for its own run")
	assert.Equal(t, task.StatusPending, live[0].Status)
}

func TestDebouncedTurnIsAnsweredByTheAuthorsReport(t *testing.T) {
	t.Parallel()
	b := setup(t, withQuiet)
	b.send(t, fixture(t, "019"), nil)
	b.drain(t)
	f, o := prComment(t, 950, "alice", "Please rename the flag.")
	b.send(t, f, o)
	b.drain(t)
	require.Len(t, liveTasks(t, b, task.ActionReviewComment), 1)
	f, o = prComment(t, 951, "coder2", "[Action Report]\n**Answered**: renamed")
	b.send(t, f, o)
	b.drain(t)
	assert.Empty(t, liveTasks(t, b, task.ActionReviewComment))
}

// TestLooseCommentDuringACommentTurnIsTheNextRound: comments that come
// while the author's review_comment turn runs are the next turn's, which
// its [Action Report] starts at the first of them.
func TestLooseCommentDuringACommentTurnIsTheNextRound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, withQuiet)
	b.send(t, fixture(t, "019"), nil)
	b.drain(t)
	f, o := prComment(t, 1000, "alice", "Please rename the flag.")
	b.send(t, f, o)
	b.drain(t)
	b.clock.Advance(quiet + time.Second)
	claimed := claimCoder2(t, b)
	require.Len(t, claimed, 1)
	_, err := b.store.Apply(ctx, claimed[0].ID, task.EventStart, repository.Change{})
	require.NoError(t, err)

	for _, id := range []int{1001, 1002} {
		f, o := prComment(t, id, "alice", fmt.Sprintf("Comment %d, while you work.", id))
		b.send(t, f, o)
		b.drain(t)
	}
	require.Len(t, b.tasks(t), 1, "no task while the turn runs")

	f, o = prComment(t, 1003, "coder2", "[Action Report]\n**Answered**: renamed")
	b.send(t, f, o)
	b.drain(t)
	tasks := b.tasks(t)
	require.Len(t, tasks, 2)
	assert.Equal(t, task.StatusDone, tasks[0].Status, "the report finished its turn")
	next := tasks[1]
	assert.Equal(t, task.ActionReviewComment, next.ActionType)
	assert.Equal(t, task.StatusPending, next.Status)
	assert.Equal(t, int64(1001), next.Meta.RoundFrom(), "the next round starts at the first comment of the running turn")
}

// TestAnswerOnAPullRequestIsNotAlsoFeedback: a person's comment on the
// pull request that resumes its author's task waiting on the issue the
// pull request closes is that task's answer; it does not also start a
// review_comment turn for the same words.
func TestAnswerOnAPullRequestIsNotAlsoFeedback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, withQuiet)
	b.send(t, fixture(t, "019"), nil) // coder2 opens #4, which closes #3
	b.drain(t)
	asked, err := b.store.CreateTask(ctx, repository.NewTask{Repo: "acme/widget", IssueNumber: 3,
		ActionType: task.ActionIssueAssigned, Agent: "coder2", Priority: task.DefaultPriority})
	require.NoError(t, err)
	claimed := claimCoder2(t, b)
	require.Len(t, claimed, 1)
	for _, step := range []struct {
		ev task.Event
		c  repository.Change
	}{{task.EventStart, repository.Change{LeaseOwner: "r1"}},
		{task.EventWait, repository.Change{LeaseOwner: "r1", WaitReason: task.WaitQuestion, Question: "Keep the old flag?"}}} {
		res, err := b.store.Apply(ctx, asked.ID, step.ev, step.c)
		require.NoError(t, err)
		require.True(t, res.Applied, "%s", step.ev)
	}

	f, o := prComment(t, 950, "alice", "Keep it, deprecated.")
	b.send(t, f, o)
	b.drain(t)
	got, err := b.store.Task(ctx, asked.ID)
	require.NoError(t, err)
	assert.Equal(t, task.StatusPending, got.Status, "the comment answers the waiting task")
	assert.Empty(t, liveTasks(t, b, task.ActionReviewComment), "and is not a second turn")

	f, o = prComment(t, 951, "alice", "Also, rename the flag.")
	b.send(t, f, o)
	b.drain(t)
	assert.Len(t, liveTasks(t, b, task.ActionReviewComment), 1, "with nothing waiting, a plain comment is feedback again")
}
