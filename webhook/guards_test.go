package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync/atomic"
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

func fixture(t *testing.T, prefix string) recording.Fixture {
	t.Helper()
	for _, f := range recording.MustLoad() {
		if f.Name[:3] == prefix {
			return f
		}
	}
	t.Fatalf("no fixture %s", prefix)
	return recording.Fixture{}
}

// edit changes a recorded payload, gives it a new delivery id and signs it.
func edit(t *testing.T, f recording.Fixture, id string, change func(p map[string]any)) (recording.Fixture, map[string]string) {
	t.Helper()
	var p map[string]any
	require.NoError(t, json.Unmarshal(f.Body, &p))
	change(p)
	body, err := json.Marshal(p)
	require.NoError(t, err)
	f.Body = body
	override := recording.WithDelivery(id)
	override["X-Gitea-Signature"] = webhook.Sign(body, secret)
	override["X-Hub-Signature-256"] = "sha256=" + webhook.Sign(body, secret)
	return f, override
}

// comment makes a new comment on the fixture's issue by author.
func comment(t *testing.T, id string, commentID int, author, body string) (recording.Fixture, map[string]string) {
	t.Helper()
	return edit(t, fixture(t, "016"), id, func(p map[string]any) {
		c := p["comment"].(map[string]any)
		c["id"], c["body"] = commentID, body
		c["user"].(map[string]any)["login"] = author
		p["sender"].(map[string]any)["login"] = author
	})
}

func (b *bundle) send(t *testing.T, f recording.Fixture, override map[string]string) {
	t.Helper()
	require.Equal(t, http.StatusAccepted, b.post(t, f, override), f.Name)
}

func liveTasks(t *testing.T, b *bundle, action task.ActionType) []task.Task {
	t.Helper()
	var out []task.Task
	for _, tk := range b.tasks(t) {
		if tk.ActionType == action && !tk.Status.Terminal() {
			out = append(out, tk)
		}
	}
	return out
}

func TestLoopGuards(t *testing.T) {
	t.Parallel()

	t.Run("comments by mozi itself make no work", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.send(t, fixture(t, "007"), nil)
		f, o := comment(t, "bot-1", 900, "mozi", "Run failed. @coder1 @infra1 please look.")
		b.send(t, f, o)
		b.drain(t)
		assert.Empty(t, b.tasks(t))
	})

	t.Run("an agent mentioning itself spawns nothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		f, o := comment(t, "self-1", 901, "coder1", "note to self @coder1")
		b.send(t, f, o)
		b.drain(t)
		assert.Empty(t, b.tasks(t))
	})

	t.Run("the per-issue hourly budget stops a mention storm", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(mc *rules.Config, _ *webhook.IntakeConfig) { mc.TaskBudgetPerHour = 3 })
		for i := range 10 {
			author, target := "lead", "coder1"
			if i%2 == 1 {
				target = "coder2"
			}
			f, o := comment(t, "storm-"+string(rune('a'+i)), 1000+i, author, "@"+target+" again")
			b.send(t, f, o)
			b.drain(t)
			// Finish the mention so the next one may create a task.
			for _, tk := range liveTasks(t, b, task.ActionMention) {
				_, err := b.store.Apply(context.Background(), tk.ID, task.EventComplete, repository.Change{})
				require.NoError(t, err)
			}
		}
		assert.Len(t, b.tasks(t), 3, "no more than the budget")
		mentions, err := b.store.Mentions(context.Background(), "acme/widget", 3)
		require.NoError(t, err)
		assert.Len(t, mentions, 10, "every mention is queued, consumed or not")
	})

	t.Run("a chain of agents mentioning agents stops at the hop limit", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(mc *rules.Config, _ *webhook.IntakeConfig) { mc.MaxMentionHops = 2 })
		chain := []struct{ author, target string }{
			{"alice", "coder1"},  // a human starts the chain: hop 0
			{"coder1", "coder2"}, // hop 1
			{"coder2", "infra1"}, // hop 2
			{"infra1", "coder1"}, // hop 3: refused
		}
		for i, c := range chain {
			f, o := comment(t, "chain-"+c.author, 2000+i, c.author, "@"+c.target+" your turn")
			b.send(t, f, o)
			b.drain(t)
		}
		var hops []int
		for _, tk := range b.tasks(t) {
			hops = append(hops, tk.HopCount)
		}
		assert.Equal(t, []int{0, 1, 2}, hops)
		mentions, err := b.store.Mentions(context.Background(), "acme/widget", 3)
		require.NoError(t, err)
		require.Len(t, mentions, 4)
		assert.Equal(t, "hop_limit", mentions[3].Outcome)
	})
}

func TestStatusBeforeThePullRequestNamesItsCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, name := range []string{"007", "009", "019", "025"} { // failure on a SHA no PR has yet
		b.send(t, fixture(t, name), nil)
	}
	b.drain(t)
	assert.Empty(t, liveTasks(t, b, task.ActionCIFailure))
	b.send(t, fixture(t, "023"), nil) // the PR's head moves to that SHA
	b.drain(t)
	failures := liveTasks(t, b, task.ActionCIFailure)
	require.Len(t, failures, 1)
	assert.Equal(t, "coder2", failures[0].Agent)
	assert.Equal(t, 4, failures[0].IssueNumber)
	assert.Equal(t, "ci/test", failures[0].Meta.StatusCtx)

	// The same failure delivered again (a poll, a replay) adds nothing.
	f, o := edit(t, fixture(t, "025"), "status-again", func(map[string]any) {})
	b.send(t, f, o)
	b.drain(t)
	assert.Len(t, liveTasks(t, b, task.ActionCIFailure), 1)
}

func TestDeployFailureGoesToTheInfraAgent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f, o := edit(t, fixture(t, "025"), "deploy-1", func(p map[string]any) {
		p["sha"], p["context"], p["id"] = "ec3d8a5000000000000000000000000000000000", "deploy/production", 77
	})
	b.send(t, f, o)
	b.drain(t)
	failures := liveTasks(t, b, task.ActionDeployFailure)
	require.Len(t, failures, 1)
	assert.Equal(t, "infra1", failures[0].Agent)
	assert.Equal(t, 0, failures[0].IssueNumber, "a repository-level task")

	report, ro := comment(t, "infra-report", 3000, "infra1", "[Action Report]\n**Cause**: disk full\n**Fix**: pruned images")
	b.send(t, report, ro)
	b.drain(t)
	assert.Empty(t, liveTasks(t, b, task.ActionDeployFailure), "the infra agent's report finishes it")
	done, err := b.store.Task(context.Background(), failures[0].ID)
	require.NoError(t, err)
	assert.Equal(t, "disk full", done.Meta.Report["Cause"])
}

func TestIncompleteReportIsRecorded(t *testing.T) {
	t.Parallel()
	b := setup(t, func(mc *rules.Config, _ *webhook.IntakeConfig) {
		mc.ReportFields = func(task.ActionType, task.BusinessType) []string {
			return []string{"Cause", "Fix", "CI"}
		}
	})
	f, o := comment(t, "ask", 4000, "lead", "@coder1 please check")
	b.send(t, f, o)
	report, ro := comment(t, "report", 4001, "coder1", "[Action Report]\n**Cause**: flaky\n**CI**:")
	b.send(t, report, ro)
	b.drain(t)
	tasks := b.tasks(t)
	require.Len(t, tasks, 1)
	assert.Equal(t, task.StatusDone, tasks[0].Status, "an incomplete report still finishes the task")
	assert.Equal(t, []string{"Fix", "CI"}, tasks[0].Meta.ReportMissed)
}

func TestFailingDeliveryIsRetriedThenParked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var calls atomic.Int32
	flaky := func(ctx context.Context, tx *repository.Tx, d repository.Delivery) (repository.DeliveryResult, error) {
		if calls.Add(1) <= 2 {
			return repository.DeliveryResult{}, errors.New("gitea timed out")
		}
		return b.mapper.Apply(ctx, tx, d)
	}
	p := webhook.NewProcessor(b.store, flaky, webhook.ProcessorConfig{MaxAttempts: 5,
		BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond})
	b.send(t, fixture(t, "009"), nil)
	deadline := time.Now().Add(10 * time.Second)
	for len(b.tasks(t)) == 0 && time.Now().Before(deadline) {
		if !p.ProcessOne(context.Background()) {
			b.clock.Advance(2 * time.Millisecond) // past the backoff
		}
	}
	require.Len(t, b.tasks(t), 1, "processed on the third attempt")
	d, err := b.store.Delivery(context.Background(), fixture(t, "009").Header("X-Gitea-Delivery"))
	require.NoError(t, err)
	assert.Equal(t, repository.OutcomeProcessed, d.Outcome)
	assert.Equal(t, 3, d.Attempts)

	broken := func(context.Context, *repository.Tx, repository.Delivery) (repository.DeliveryResult, error) {
		return repository.DeliveryResult{}, errors.New("database constraint surprise")
	}
	p = webhook.NewProcessor(b.store, broken, webhook.ProcessorConfig{MaxAttempts: 3,
		BackoffBase: time.Millisecond, BackoffMax: time.Millisecond})
	b.send(t, fixture(t, "013"), nil)
	deadline = time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		d, err = b.store.Delivery(context.Background(), fixture(t, "013").Header("X-Gitea-Delivery"))
		require.NoError(t, err)
		if d.Outcome == repository.OutcomeParked {
			break
		}
		if !p.ProcessOne(context.Background()) {
			b.clock.Advance(time.Millisecond)
		}
	}
	assert.Equal(t, repository.OutcomeParked, d.Outcome)
	assert.Equal(t, 3, d.Attempts)
	assert.Equal(t, "database constraint surprise", d.LastError)
	failed, err := b.store.ListDeliveries(context.Background(), repository.DeliveryFilter{Failed: true})
	require.NoError(t, err)
	require.Len(t, failed, 1)
	assert.Equal(t, d.ID, failed[0].ID)

	stats, err := b.store.InboxStats(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, stats.Parked)

	ok, err := b.store.RequeueDelivery(context.Background(), d.ID)
	require.NoError(t, err)
	require.True(t, ok)
	b.drain(t)
	d, err = b.store.Delivery(context.Background(), d.ID)
	require.NoError(t, err)
	assert.Equal(t, repository.OutcomeProcessed, d.Outcome, "an operator's requeue processes it")
}

// TestKilledBeforeProcessing: deliveries acknowledged, then mozi dies
// (here: the processor's transaction is cut midway); after a restart every
// delivery is processed exactly once.
func TestKilledBeforeProcessing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, f := range recording.MustLoad() {
		b.send(t, f, nil)
	}
	// A first process applies some deliveries' effects and is killed before
	// it commits them.
	ctx, kill := context.WithCancel(context.Background())
	var applied atomic.Int32
	dying := func(ctx context.Context, tx *repository.Tx, d repository.Delivery) (repository.DeliveryResult, error) {
		res, err := b.mapper.Apply(ctx, tx, d)
		if err != nil {
			return res, err
		}
		if applied.Add(1) == 5 {
			kill()
		}
		return res, ctx.Err()
	}
	first := webhook.NewProcessor(b.store, dying, webhook.ProcessorConfig{})
	for first.ProcessOne(ctx) {
	}
	require.Error(t, ctx.Err(), "the first process was killed")

	// The restarted process finishes the job.
	b.drain(t)
	assert.Equal(t, naturalOrder, rows(b.tasks(t)))
	deliveries, err := b.store.ListDeliveries(context.Background(), repository.DeliveryFilter{Limit: 1000})
	require.NoError(t, err)
	for _, d := range deliveries {
		require.NotEmpty(t, d.Outcome, d.ID)
		assert.LessOrEqual(t, d.Attempts, 2, "delivery %s", d.ID)
	}
}

// One infrastructure agent's [Action Report] finishes the failure it
// answers — named by its commit or context, or reported on the issue an
// earlier report linked to it — not every open one; with one failure
// open, a report that names nothing still answers it.
func TestInfraReportFinishesOnlyTheFailureItAnswers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	deploy := func(id, sha, context string, statusID int) {
		f, o := edit(t, fixture(t, "025"), id, func(p map[string]any) {
			p["sha"], p["context"], p["id"] = sha, context, statusID
		})
		b.send(t, f, o)
	}
	deploy("deploy-a", "aaaaaaa1111111111111111111111111111111111", "deploy/production", 81)
	deploy("deploy-b", "bbbbbbb2222222222222222222222222222222222", "deploy/staging", 82)
	b.drain(t)
	require.Len(t, liveTasks(t, b, task.ActionDeployFailure), 2)
	open := func() []string {
		var ctxs []string
		for _, tk := range liveTasks(t, b, task.ActionDeployFailure) {
			ctxs = append(ctxs, tk.Meta.StatusCtx)
		}
		return ctxs
	}

	vague, vo := comment(t, "report-vague", 3001, "infra1", "[Action Report]\n**Cause**: disk full")
	b.send(t, vague, vo)
	b.drain(t)
	assert.Len(t, open(), 2, "a report naming neither failure finishes neither")

	first, fo := comment(t, "report-a", 3002, "infra1", "[Action Report]\n**Commit**: aaaaaaa1 (deploy/production)\n**Cause**: disk full")
	b.send(t, first, fo)
	b.drain(t)
	assert.Equal(t, []string{"deploy/staging"}, open(), "only the named one")

	last, lo := comment(t, "report-b", 3003, "infra1", "[Action Report]\n**Cause**: flaky runner")
	b.send(t, last, lo)
	b.drain(t)
	assert.Empty(t, open(), "the only one left is the one a vague report answers")
}

// A task held because its dependency was open becomes due the moment the
// dependency closes, instead of waiting out its hold.
func TestClosingADependencyWakesItsDependents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	waiting, err := b.store.CreateTask(ctx, repository.NewTask{Repo: "acme/widget", IssueNumber: 8, DependsOn: []int{3},
		ActionType: task.ActionIssueAssigned, BusinessType: task.BusinessFeature, Agent: "coder1",
		Priority: 2, NotBefore: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	other, err := b.store.CreateTask(ctx, repository.NewTask{Repo: "acme/widget", IssueNumber: 9, DependsOn: []int{4},
		ActionType: task.ActionIssueAssigned, BusinessType: task.BusinessFeature, Agent: "coder1",
		Priority: 2, NotBefore: time.Now().Add(time.Hour)})
	require.NoError(t, err)

	b.send(t, fixture(t, "031"), nil) // #3 closed
	b.drain(t)
	got, err := b.store.Task(ctx, waiting.ID)
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now(), got.NotBefore, time.Minute, "due now")
	got, err = b.store.Task(ctx, other.ID)
	require.NoError(t, err)
	assert.True(t, got.NotBefore.After(time.Now().Add(30*time.Minute)), "a task waiting for another issue still waits")
}
