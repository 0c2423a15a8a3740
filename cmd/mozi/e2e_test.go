package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/gitea/giteatest"
	"github.com/moziplus/mozi/repository/pgtest"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/spawner/backend/local"
	"github.com/moziplus/mozi/webhook"
	"github.com/moziplus/mozi/webhook/recording"
)

// world is an in-process mozi serve with a fake Gitea on one side and test
// agents (this test binary) on the other. Comments the agents post to the
// fake Gitea come back to mozi as signed issue_comment webhooks, as a real
// Gitea's would.
type world struct {
	t        *testing.T
	root     *testing.T // for goroutines that outlive a subtest
	url      string
	gitea    *giteatest.Server
	store    *repository.Store
	journal  string
	logs     *syncBuffer
	fixtures []recording.Fixture
	comments atomic.Int64
}

var agentsYAML = `
agents:
  - {login: coder1, command: ["%[1]s"], workspace: none, sandbox: none, workdir: "%[2]s/coder1", token_env: CODER1_TOKEN, env: {TEST_AGENT_MODE: report, TEST_AGENT_JOURNAL: "%[3]s"}}
  - {login: coder2, command: ["%[1]s"], workspace: none, sandbox: none, workdir: "%[2]s/coder2", token_env: CODER2_TOKEN, env: {TEST_AGENT_MODE: report, TEST_AGENT_JOURNAL: "%[3]s"}}
  - {login: reviewer1, command: ["%[1]s"], workspace: none, sandbox: none, workdir: "%[2]s/reviewer1", token_env: REVIEWER1_TOKEN, env: {TEST_AGENT_MODE: report, TEST_AGENT_JOURNAL: "%[3]s"}}
  - {login: lead, lead: true, command: ["%[1]s"], workspace: none, sandbox: none, workdir: "%[2]s/lead", token_env: LEAD_TOKEN, env: {TEST_AGENT_MODE: report, TEST_AGENT_JOURNAL: "%[3]s"}}
  - {login: flaky1, command: ["%[1]s"], workspace: none, sandbox: none, workdir: "%[2]s/flaky1", token_env: FLAKY1_TOKEN, env: {TEST_AGENT_MODE: fail, TEST_AGENT_JOURNAL: "%[3]s"}}
  - {login: hang1, command: ["%[1]s"], workspace: none, sandbox: none, workdir: "%[2]s/hang1", token_env: HANG1_TOKEN, timeout: 1s, env: {TEST_AGENT_MODE: hang, TEST_AGENT_JOURNAL: "%[3]s"}}
  - {login: ping1, command: ["%[1]s"], workspace: none, sandbox: none, workdir: "%[2]s/ping1", token_env: PING1_TOKEN, env: {TEST_AGENT_MODE: report, TEST_AGENT_MENTION: pong1, TEST_AGENT_JOURNAL: "%[3]s"}}
  - {login: pong1, command: ["%[1]s"], workspace: none, sandbox: none, workdir: "%[2]s/pong1", token_env: PONG1_TOKEN, env: {TEST_AGENT_MODE: report, TEST_AGENT_MENTION: ping1, TEST_AGENT_JOURNAL: "%[3]s"}}
`

func startWorld(t *testing.T) *world {
	t.Helper()
	dir := filepath.Dir(stateDir(t))
	bin := agentCopy(t, dir)
	w := &world{t: t, root: t, gitea: giteatest.New(), journal: sharedFile(t, filepath.Join(dir, "journal")),
		logs: &syncBuffer{}, fixtures: recording.MustLoad()}
	t.Cleanup(w.gitea.Close)
	env := map[string]string{"PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME")}
	for _, login := range []string{"coder1", "coder2", "reviewer1", "lead", "flaky1", "hang1", "ping1", "pong1"} {
		token := "token-" + login
		w.gitea.AddUser(token, login)
		env[strings.ToUpper(login)+"_TOKEN"] = token
	}
	dbURL := pgtest.URL(t)
	cfgPath := filepath.Join(dir, "mozi.yaml")
	cfg := fmt.Sprintf(`listen: 127.0.0.1:0
database: {url: "%s"}
gitea: {url: "%s", token: %s}
webhook: {secrets: [%s], discussion_grace: 100000h, max_mention_hops: 2}
dispatcher: {lease_ttl: 3s, poll_interval: 200ms, max_retries: 1}
progress: {enabled: false} # the fake Gitea edits no comment; the status comment has its e2e test
spawner: {retry_base: 100ms, retry_max: 200ms, kill_grace: 200ms, shutdown_grace: 2s}
ticker: {sweep_every: 200ms, leader_ttl: 3s}
log: {level: debug}
`, dbURL, w.gitea.URL, giteatest.Token, testSecret) + fmt.Sprintf(agentsYAML, bin, filepath.Join(dir, "work"), w.journal)
	require.NoError(t, os.WriteFile(cfgPath, []byte(cfg), 0o600))

	store, err := repository.Open(context.Background(), dbURL, repository.Options{})
	require.NoError(t, err)
	t.Cleanup(store.Close)
	w.store = store

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--config", cfgPath, "--data-dir", filepath.Join(dir, "state")},
			func(k string) string { return env[k] }, io.Discard, w.logs)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("mozi serve did not stop")
		}
		if t.Failed() {
			t.Logf("mozi log:\n%s", w.logs.String())
		}
	})
	w.eventually("mozi serving", 30*time.Second, func() bool {
		m := servingLineRE.FindStringSubmatch(w.logs.String())
		if m != nil {
			w.url = "http://" + m[1]
		}
		return m != nil
	})
	w.gitea.OnComment = w.commentWebhook
	return w
}

// commentWebhook sends mozi the issue_comment delivery Gitea would send for
// a comment posted through its API.
func (w *world) commentWebhook(repo string, issue int, author, body string) {
	id := 9000 + w.comments.Add(1)
	f, err := recording.Find(w.fixtures, "016").Edit(func(p map[string]any) {
		p["issue"].(map[string]any)["number"] = issue
		c := p["comment"].(map[string]any)
		c["id"], c["body"] = id, body
		c["user"].(map[string]any)["login"] = author
		c["created_at"] = time.Now().UTC().Format(time.RFC3339)
		c["updated_at"] = time.Now().UTC().Format(time.RFC3339)
		p["sender"].(map[string]any)["login"] = author
		p["repository"].(map[string]any)["full_name"] = repo
	})
	if err != nil {
		w.root.Errorf("comment webhook: %v", err)
		return
	}
	if err := w.send(f, fmt.Sprintf("comment-%d", id)); err != nil {
		w.root.Errorf("comment webhook: %v", err)
	}
}

// post delivers a (possibly edited) recording, signed.
func (w *world) post(f recording.Fixture, delivery string) {
	w.t.Helper()
	require.NoError(w.t, w.send(f, delivery))
}

func (w *world) send(f recording.Fixture, delivery string) error {
	override := map[string]string{"X-Gitea-Signature": webhook.Sign(f.Body, testSecret)}
	if delivery != "" {
		for k, v := range recording.WithDelivery(delivery) {
			override[k] = v
		}
	}
	req, err := f.Request(w.url+webhook.Path, override)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: status %d", f.Name, resp.StatusCode)
	}
	return nil
}

func (w *world) replay(prefixes ...string) {
	for _, p := range prefixes {
		w.post(recording.Find(w.fixtures, p), "")
	}
}

// issueEvent replays an issues delivery rewritten for another issue.
func (w *world) issueEvent(prefix string, number int, assignees []string) {
	f, err := recording.Find(w.fixtures, prefix).Edit(func(p map[string]any) {
		p["number"] = number
		i := p["issue"].(map[string]any)
		i["number"], i["title"], i["body"] = number, fmt.Sprintf("Synthetic issue %d", number), "Do it."
		i["labels"] = []any{}
		i["updated_at"] = time.Now().UTC().Format(time.RFC3339)
		var list []any
		for _, a := range assignees {
			list = append(list, map[string]any{"login": a})
		}
		i["assignees"] = list
	})
	require.NoError(w.t, err)
	w.gitea.AddIssue(number, fmt.Sprintf("Synthetic issue %d", number), "Do it.", assignees...) // as Gitea would hold it
	w.post(f, fmt.Sprintf("%s-%d", prefix, number))
}

func (w *world) eventually(what string, timeout time.Duration, cond func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			w.t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func (w *world) task(action task.ActionType, agent string, issue int) (task.Task, bool) {
	tasks, err := w.store.ListTasks(context.Background(), repository.TaskFilter{ActionType: action, Agent: agent,
		IssueNumber: issue, Limit: 1})
	require.NoError(w.t, err)
	if len(tasks) == 0 {
		return task.Task{}, false
	}
	return tasks[0], true
}

func (w *world) waitStatus(action task.ActionType, agent string, issue int, want task.Status) task.Task {
	w.t.Helper()
	var got task.Task
	w.eventually(fmt.Sprintf("%s of %s on #%d to be %s", action, agent, issue, want), 20*time.Second, func() bool {
		t, ok := w.task(action, agent, issue)
		got = t
		return ok && t.Status == want && t.LeaseOwner == ""
	})
	return got
}

func (w *world) attempts(id int64) []task.Attempt {
	a, err := w.store.Attempts(context.Background(), id)
	require.NoError(w.t, err)
	return a
}

func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mozi serve and agent processes")
	}
	w := startWorld(t)

	t.Run("an assigned issue goes working, review, done", func(t *testing.T) {
		w.t = t
		w.replay("007", "009") // #3 opened, assigned to coder2
		tk := w.waitStatus(task.ActionIssueAssigned, "coder2", 3, task.StatusWorking)
		w.eventually("coder2's report stored", 10*time.Second, func() bool {
			t, _ := w.task(task.ActionIssueAssigned, "coder2", 3)
			return t.Meta.Report["Root cause"] == "found by the test agent"
		})
		attempts := w.attempts(tk.ID)
		require.Len(t, attempts, 1)
		assert.Equal(t, task.AttemptSucceeded, attempts[0].Outcome)
		assert.Contains(t, w.gitea.Comments("acme/widget", 3)[0], "[Action Report]",
			"the agent reported through the curl line of its prompt")

		w.replay("019") // PR #4 opened: Closes #3
		w.waitStatus(task.ActionIssueAssigned, "coder2", 3, task.StatusReview)
		w.replay("020", "021") // review requested; changes requested
		w.waitStatus(task.ActionIssueAssigned, "coder2", 3, task.StatusWorking)
		result := w.waitStatus(task.ActionReviewResult, "coder2", 4, task.StatusWorking)
		assert.Equal(t, "Please add a regression test.", result.Meta.ReviewBody)
		w.replay("023", "029") // pushed; approved
		w.waitStatus(task.ActionReviewResult, "coder2", 4, task.StatusWorking)
		w.waitStatus(task.ActionIssueAssigned, "coder2", 3, task.StatusReview)
		w.replay("030", "031") // merged; #3 closed
		done := w.waitStatus(task.ActionIssueAssigned, "coder2", 3, task.StatusDone)
		assert.Equal(t, 4, done.PRNumber)
		assert.Len(t, w.attempts(done.ID), 1, "the agent ran once for the issue")
	})

	t.Run("a failing agent is retried, then fails with one comment", func(t *testing.T) {
		w.t = t
		w.issueEvent("009", 50, []string{"flaky1"})
		tk := w.waitStatus(task.ActionIssueAssigned, "flaky1", 50, task.StatusFailed)
		attempts := w.attempts(tk.ID)
		require.Len(t, attempts, 2, "max_retries 1: two attempts")
		for _, a := range attempts {
			assert.Equal(t, task.AttemptFailed, a.Outcome)
			assert.Contains(t, a.OutputTail, "failing on purpose")
		}
		w.eventually("the failure comment", 10*time.Second, func() bool { return len(w.gitea.Comments("acme/widget", 50)) == 1 })
		comment := w.gitea.Comments("acme/widget", 50)[0]
		assert.Contains(t, comment, "failed after 2 runs: exited with status 1")
		assert.NotContains(t, comment, "token-", "no secret in the comment")
		// Its webhook came back (the fake Gitea sends it): once it is
		// processed, mozi's own comment made no work.
		w.eventually("the comment's webhook processed", 10*time.Second, func() bool {
			st, err := w.store.InboxStats(context.Background())
			require.NoError(t, err)
			return st.Waiting == 0
		})
		tasks, err := w.store.ListTasks(context.Background(), repository.TaskFilter{IssueNumber: 50})
		require.NoError(t, err)
		assert.Len(t, tasks, 1)
	})

	t.Run("a hung agent is killed at its timeout with nothing left running", func(t *testing.T) {
		w.t = t
		w.issueEvent("009", 60, []string{"hang1"})
		tk := w.waitStatus(task.ActionIssueAssigned, "hang1", 60, task.StatusFailed)
		attempts := w.attempts(tk.ID)
		require.Len(t, attempts, 2)
		for _, a := range attempts {
			assert.Equal(t, task.AttemptTimeout, a.Outcome)
		}
		for _, pid := range w.journalPIDs("agent=hang1") {
			w.eventually(fmt.Sprintf("hung agent %d gone", pid), 5*time.Second, func() bool { return local.GroupGone(pid) })
		}
	})

	t.Run("agents mentioning each other stop at the hop limit", func(t *testing.T) {
		w.t = t
		w.commentWebhookAs("acme/widget", 70, "alice", "@ping1 please start")
		w.eventually("the chain to stop", 20*time.Second, func() bool {
			mentions, err := w.store.Mentions(context.Background(), "acme/widget", 70)
			require.NoError(t, err)
			return len(mentions) == 4 && mentions[3].Outcome == "hop_limit"
		})
		tasks, err := w.store.ListTasks(context.Background(), repository.TaskFilter{IssueNumber: 70})
		require.NoError(t, err)
		assert.Len(t, tasks, 3, "alice → ping1 → pong1 → ping1, then the limit of 2 hops")
	})

	t.Run("a round review is spawned once when the last sub-issue closes", func(t *testing.T) {
		w.t = t
		w.replay("002", "004", "005", "037", "038") // parent #1, subs #2 and #5
		w.replay("033")                             // #2 closed
		w.eventually("#2's close processed", 10*time.Second, func() bool {
			st, err := w.store.InboxStats(context.Background())
			require.NoError(t, err)
			return st.Waiting == 0
		})
		tickerPasses(t, w.url, "rounds", 2) // #5 is still open
		_, found := w.task(task.ActionRoundReview, "lead", 1)
		assert.False(t, found, "no round review while a sub-issue is open")
		w.replay("046") // #5 closed: the round is complete
		review := w.waitStatus(task.ActionRoundReview, "lead", 1, task.StatusDone)
		assert.Equal(t, 1, review.Meta.Round)
		tickerPasses(t, w.url, "rounds", 2)
		tasks, err := w.store.ListTasks(context.Background(), repository.TaskFilter{ActionType: task.ActionRoundReview})
		require.NoError(t, err)
		assert.Len(t, tasks, 1, "once")
		assert.Len(t, w.attempts(review.ID), 1)
		notice := w.waitStatus(task.ActionIssueClosed, "coder1", 2, task.StatusDone)
		assert.Len(t, w.attempts(notice.ID), 1, "coder1 was told #2 was closed")
	})
}

func (w *world) commentWebhookAs(repo string, issue int, author, body string) {
	w.commentWebhook(repo, issue, author, body)
}

var pidRE = regexp.MustCompile(`pid=(\d+)`)

func (w *world) journalPIDs(filter string) []int {
	f, err := os.Open(w.journal)
	require.NoError(w.t, err)
	defer f.Close()
	var out []int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := pidRE.FindStringSubmatch(sc.Text()); m != nil && strings.Contains(sc.Text(), filter) {
			var pid int
			fmt.Sscan(m[1], &pid)
			out = append(out, pid)
		}
	}
	return out
}
