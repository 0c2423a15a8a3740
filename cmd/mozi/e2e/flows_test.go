//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository/gitea/realgitea"
	"github.com/moziplus/mozi/repository/task"
)

// TestE2EAssignedIssueOpensPullRequest: an issue assigned to an agent
// becomes a branch with a commit, a pull request that closes the issue,
// an [Action Report], and the task waits in review.
func TestE2EAssignedIssueOpensPullRequest(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{agents: []agentSpec{{name: "coder", role: "coder"}}})
	coder := w.login("coder")
	issue := w.createIssue("Add a greeting", "Please add a greeting file.", coder)

	assigned := w.waitTask("the assigned task", 2*time.Minute, task.StatusReview, isAction(task.ActionIssueAssigned, coder))
	w.waitRunsRecorded()
	require.Len(t, w.pulls(), 1)
	pr := w.pulls()[0]
	assert.Equal(t, pr.Number, assigned.PRNumber)
	assert.Equal(t, "open", pr.State)
	assert.Contains(t, pr.Body, fmt.Sprintf("Closes #%d", issue))
	assert.Equal(t, coder, pr.User.Login)
	assert.Contains(t, w.branches(), pr.Head.Ref)
	assert.True(t, strings.HasPrefix(pr.Head.Ref, "feat/"), "branch %q", pr.Head.Ref)
	assert.Len(t, w.pullCommits(pr.Number), 1)

	reports := w.commentsBy(issue, coder)
	require.Len(t, reports, 1)
	assert.True(t, strings.HasPrefix(reports[0].Body, "[Action Report]"), reports[0].Body)
	assert.Contains(t, reports[0].Body, "**Branch**: "+pr.Head.Ref)
	assert.Contains(t, reports[0].Body, fmt.Sprintf("**PR**: #%d", pr.Number))
	assert.Equal(t, 1, assigned.DispatchCount)
	assert.Empty(t, assigned.Meta.ReportMissed)
	w.checkRuns()
}

// TestE2EReviewRoundThenMerge: the reviewer agent requests changes, the
// author answers with a second commit on the same branch, the reviewer
// approves and asks the lead, who merges; every task of the issue ends
// done, each run once, and the worktrees go.
func TestE2EReviewRoundThenMerge(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{agents: reviewRoundAgents("")})
	_, pr := w.reviewRoundThenMerge("Add a farewell", "Please add a farewell file.", 3*time.Minute)
	// Its outcome (docs/loop/outcomes.md): the coder's, one review round, no red CI, no person's push.
	o, err := w.store.Outcome(t.Context(), w.repo, pr.Number)
	require.NoError(t, err)
	assert.Equal(t, []any{w.login("coder"), false, 0, 1}, []any{o.Agent, o.HumanPush, o.CIRounds, o.ReviewRounds})
	assert.True(t, o.AssignToPR != nil && o.PRToMerge != nil, "%+v", o)
	w.checkRuns()
	w.waitRunsRecorded()
	w.checkAttemptsApart()
}

// reviewRoundAgents are the agents of reviewRoundThenMerge: a coder who
// asks the reviewer for a review, a reviewer who requests changes in its
// first review and, approving, asks the lead to merge, and the lead. With
// a preset, the coder is that preset's real CLI.
func reviewRoundAgents(coderPreset string) []agentSpec {
	return []agentSpec{
		{name: "coder", role: "coder", preset: coderPreset, env: map[string]string{"E2E_REVIEWERS": "{world}-reviewer"}},
		{name: "reviewer", role: "reviewer", env: map[string]string{"E2E_REJECT_FIRST": "1", "E2E_LEAD": "{world}-lead"}},
		{name: "lead", role: "lead", lead: true},
	}
}

// reviewRoundThenMerge assigns an issue to the coder of reviewRoundAgents
// and checks the flow to the merge: one pull request with two commits
// (the second answers the requested changes) on one work branch, the
// reviewer's two reviews, every task of the issue done and run once, the
// worktrees removed. The merge must come within mergeWithin. It returns the
// issue and its pull request.
func (w *world) reviewRoundThenMerge(title, body string, mergeWithin time.Duration) (int, pull) {
	t := w.t
	t.Helper()
	coder, reviewer, lead := w.login("coder"), w.login("reviewer"), w.login("lead")
	issue := w.createIssue(title, body, coder)

	w.eventually("the pull request merged", mergeWithin, func() (bool, string) {
		pulls := w.pulls()
		return len(pulls) == 1 && pulls[0].Merged, fmt.Sprintf("pulls %+v; tasks:%s", pulls, describe(w.tasks()))
	})
	pr := w.pulls()[0]
	w.eventually("every task done", 3*time.Minute, func() (bool, string) {
		tasks := w.tasks()
		return len(tasks) > 0 && !slices.ContainsFunc(tasks, func(t task.Task) bool { return t.Status != task.StatusDone }),
			describe(tasks)
	})

	// The second commit went to the same branch: one work branch, two
	// commits on the pull request.
	assert.Len(t, w.pullCommits(pr.Number), 2)
	assert.ElementsMatch(t, []string{"main", pr.Head.Ref}, w.branches())
	var states []string
	for _, r := range w.reviews(pr.Number) {
		if r.User.Login == reviewer {
			states = append(states, r.State)
		}
	}
	assert.Equal(t, []string{"REQUEST_CHANGES", "APPROVED"}, states)

	tasks := w.tasks()
	kinds := map[string]int{}
	for _, tk := range tasks {
		kinds[string(tk.ActionType)+"/"+tk.Agent]++
		// The approval's review_result may be finished by the merge
		// before its agent gets to run; nothing runs twice.
		if tk.ActionType == task.ActionReviewResult && tk.Meta.ReviewState == "approved" {
			assert.LessOrEqual(t, tk.DispatchCount, 1, "task %d (%s)", tk.ID, tk.ActionType)
			continue
		}
		assert.Equal(t, 1, tk.DispatchCount, "task %d (%s) ran %d times", tk.ID, tk.ActionType, tk.DispatchCount)
	}
	assert.Equal(t, map[string]int{
		"issue_assigned/" + coder:    1,
		"review_request/" + reviewer: 1,
		"review_result/" + coder:     2, // changes requested (finished by the push), approved (by the merge)
		"review_updated/" + reviewer: 1,
		"mention/" + lead:            1,
		"review_merged/" + coder:     1,
	}, kinds, describe(tasks))
	assigned := w.tasksWhere(isAction(task.ActionIssueAssigned, coder))[0]
	assert.Equal(t, issue, assigned.IssueNumber)
	assert.Equal(t, pr.Number, assigned.PRNumber)

	w.eventually("the worktrees removed", time.Minute, func() (bool, string) {
		trees := w.worktrees()
		return len(trees) == 0, fmt.Sprint(trees)
	})
	return issue, pr
}

// runsOf is an agent's own record of its runs ("" before its first).
func (w *world) runsOf(a *agentUser) string {
	data, err := os.ReadFile(filepath.Join(a.home, runsFile))
	if err != nil && !os.IsNotExist(err) {
		w.t.Fatal(err)
	}
	return string(data)
}

// checkRuns fails the test when two runs of one agent overlapped: each run
// takes a lock in its agent's home for its whole life and notes it when
// another run holds it (a killed run's lock goes with its process).
func (w *world) checkRuns() {
	w.t.Helper()
	for _, a := range w.agents {
		for _, line := range strings.Split(w.runsOf(a), "\n") {
			if strings.HasPrefix(line, "overlap") {
				w.t.Errorf("agent %s: a run started while another was running: %s", a.Login, line)
			}
		}
	}
}

// checkAttemptsApart fails the test when mozi's records show two runs of
// one agent at the same time: each attempt's interval, from its row's
// start to its end (which bracket the process), must end before the
// agent's next one starts. Unlike checkRuns it covers what the agent's
// command ran before and after the agent program (a real CLI), and runs
// that never got to it. Every run must have ended (waitRunsRecorded).
func (w *world) checkAttemptsApart() {
	w.t.Helper()
	byAgent := map[string][]task.Attempt{}
	for _, tk := range w.tasks() {
		for _, a := range w.attemptsOf(tk.ID) {
			require.False(w.t, a.FinishedAt.IsZero(), "attempt %d of task %d (%s) has not ended", a.Attempt, tk.ID, tk.ActionType)
			byAgent[a.Agent] = append(byAgent[a.Agent], a)
		}
	}
	for agent, list := range byAgent {
		slices.SortFunc(list, func(a, b task.Attempt) int { return a.StartedAt.Compare(b.StartedAt) })
		for i := 1; i < len(list); i++ {
			prev, next := list[i-1], list[i]
			if next.StartedAt.Before(prev.FinishedAt) {
				w.t.Errorf("agent %s: task %d's run started at %s, before task %d's run ended at %s", agent,
					next.TaskID, next.StartedAt.Format(time.StampMicro), prev.TaskID, prev.FinishedAt.Format(time.StampMicro))
			}
		}
	}
}

// TestE2EFailureStatusAfterPushNeverMissed: a failing commit status posted
// right after a push to a pull request's branch gives the author a
// ci_failure task for that head, whichever of Gitea's two deliveries
// (synchronized, status) mozi handles first or at the same time.
func TestE2EFailureStatusAfterPushNeverMissed(t *testing.T) {
	t.Parallel()
	// Every head gets its own repair round here (ci.max_repair_rounds).
	w := newWorld(t, worldOptions{agents: []agentSpec{{name: "coder", role: "coder"}},
		tune: func(cfg map[string]any) { section(cfg, "ci")["max_repair_rounds"] = 100 }})
	coder := w.login("coder")
	w.createIssue("Add a counter", "Please add a counter file.", coder)
	w.waitTask("the assigned task", 2*time.Minute, task.StatusReview, isAction(task.ActionIssueAssigned, coder))
	pr := w.pulls()[0]

	// Gitea sends the status about 0.7 s before synchronized, and one
	// hook's deliveries one at a time. The relay takes the status from
	// Gitea at once and hands it to mozi only once synchronized is in
	// mozi's inbox, after a delay that sweeps the time mozi takes to apply
	// a push: the two deliveries are handled together, as they are when
	// mozi's inbox has a backlog.
	synced := make(chan struct{}, 1)
	var delay atomic.Int64
	w.relay.detachEvents("status")
	w.relay.hooks(func(event string, _ []byte) {
		if event == "status" {
			select {
			case <-synced:
			case <-time.After(10 * time.Second):
			}
			time.Sleep(time.Duration(delay.Load()))
		}
	}, func(event string, _ int) {
		if event == "pull_request_sync" {
			synced <- struct{}{}
		}
	})
	c := w.clone(w.agents["coder"].User)
	const rounds = 20
	for i := range rounds {
		delay.Store(int64(time.Duration(i) * 2 * time.Millisecond))
		sha := c.commitPush(pr.Head.Ref, "counter.txt", fmt.Sprintf("%d\n", i))
		w.status(w.human, sha, "ci/test", "failure")
		w.waitTask(fmt.Sprintf("round %d: the ci_failure task of %s", i, sha[:8]), time.Minute, task.StatusDone,
			func(t task.Task) bool { return t.ActionType == task.ActionCIFailure && t.Meta.HeadSHA == sha })
	}
	failures := w.tasksWhere(isAction(task.ActionCIFailure, coder))
	assert.Len(t, failures, rounds, describe(failures))
	assert.Empty(t, w.relay.backgroundFailures())
	w.checkRuns()
}

// TestE2ESubIssuesThenRoundReview: sub-issues of a parent become tasks of
// their assignee; once every sub-issue is closed (its pull request merged
// by a person) the lead gets one round review of the parent, and answers
// it there.
func TestE2ESubIssuesThenRoundReview(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{agents: []agentSpec{
		{name: "coder", role: "coder"},
		{name: "lead", role: "lead", lead: true},
	}})
	coder, lead := w.login("coder"), w.login("lead")
	parent := w.createIssue("Ship the widget", "The whole widget, in two parts.")
	subs := []int{
		w.createIssue(fmt.Sprintf("[widget][sub][parent #%d] Part one", parent), fmt.Sprintf("Parent: #%d\n\nThe first part.", parent), coder),
		w.createIssue(fmt.Sprintf("[widget][sub][parent #%d] Part two", parent), fmt.Sprintf("Parent: #%d\n\nThe second part.", parent), coder),
	}
	for _, sub := range subs {
		assigned := w.waitTask(fmt.Sprintf("sub-issue #%d's task", sub), 2*time.Minute, task.StatusReview,
			func(t task.Task) bool { return t.ActionType == task.ActionIssueAssigned && t.IssueNumber == sub })
		assert.Equal(t, parent, assigned.ParentIssue)
		// No round while a sub-issue is open.
		assert.Empty(t, w.tasksWhere(isAction(task.ActionRoundReview, "")))
		w.call(w.human, "POST", fmt.Sprintf("/repos/%s/pulls/%d/merge", w.repo, assigned.PRNumber),
			map[string]any{"Do": "merge"}, nil)
	}
	round := w.waitTask("the round review", 2*time.Minute, task.StatusDone, isAction(task.ActionRoundReview, lead))
	assert.Equal(t, parent, round.IssueNumber)
	reports := w.commentsBy(parent, lead)
	require.Len(t, reports, 1)
	assert.True(t, strings.HasPrefix(reports[0].Body, "[Action Report]"), reports[0].Body)
	for _, tk := range w.tasksWhere(isAction(task.ActionIssueAssigned, coder)) {
		assert.Equal(t, task.StatusDone, tk.Status, describe([]task.Task{tk}))
	}
	assert.Len(t, w.tasksWhere(isAction(task.ActionRoundReview, "")), 1)
	w.checkRuns()
}

// TestE2EMentionChainStopsAtHopLimit: a person's @mention gives the agent a
// task; agents mentioning each other continue the chain until
// webhook.max_mention_hops, and the mention past it spawns nothing.
func TestE2EMentionChainStopsAtHopLimit(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{
		agents: []agentSpec{
			{name: "ping", role: "coder", env: map[string]string{"E2E_MENTION": "{world}-pong"}},
			{name: "pong", role: "coder", env: map[string]string{"E2E_MENTION": "{world}-ping"}},
		},
		tune: func(cfg map[string]any) { section(cfg, "webhook")["max_mention_hops"] = 2 },
	})
	ping, pong := w.login("ping"), w.login("pong")
	issue := w.createIssue("Talk it over", "Two agents discuss.")
	w.call(w.human, "POST", fmt.Sprintf("/repos/%s/issues/%d/comments", w.repo, issue),
		map[string]any{"body": fmt.Sprintf("@%s what do you think?", ping)}, nil)

	w.eventually("the chain stopped at the hop limit", 2*time.Minute, func() (bool, string) {
		mentions, err := w.store.Mentions(t.Context(), w.repo, issue)
		require.NoError(t, err)
		for _, m := range mentions {
			if m.Outcome == "hop_limit" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v; tasks:%s", mentions, describe(w.tasks()))
	})
	var chain []string
	for _, tk := range w.tasksWhere(isAction(task.ActionMention, "")) {
		assert.Equal(t, task.StatusDone, tk.Status, describe([]task.Task{tk}))
		chain = append(chain, fmt.Sprintf("%s@%d", tk.Agent, tk.HopCount))
	}
	assert.Equal(t, []string{ping + "@0", pong + "@1", ping + "@2"}, chain)
	assert.Len(t, w.commentsBy(issue, ping), 2)
	assert.Len(t, w.commentsBy(issue, pong), 1)
	w.checkRuns()
}

// TestE2EDiscussionAfterGrace: an issue nobody is assigned to is offered to
// every agent once webhook.discussion_grace is over; an issue assigned at
// once is not.
func TestE2EDiscussionAfterGrace(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{
		agents: []agentSpec{{name: "coder", role: "coder"}, {name: "reviewer", role: "reviewer"}},
		tune:   func(cfg map[string]any) { section(cfg, "webhook")["discussion_grace"] = "3s" },
	})
	coder, reviewer := w.login("coder"), w.login("reviewer")
	open := w.createIssue("What should we build next?", "Ideas welcome.")
	assigned := w.createIssue("Fix the typo", "In the README.", coder)

	w.eventually("both agents discussed", 2*time.Minute, func() (bool, string) {
		list := w.tasksWhere(isAction(task.ActionDiscussion, ""))
		done := 0
		for _, tk := range list {
			if tk.Status == task.StatusDone {
				done++
			}
		}
		return done == 2, describe(w.tasks())
	})
	agents := map[string]int{}
	for _, tk := range w.tasksWhere(isAction(task.ActionDiscussion, "")) {
		assert.Equal(t, open, tk.IssueNumber)
		agents[tk.Agent]++
	}
	assert.Equal(t, map[string]int{coder: 1, reviewer: 1}, agents)
	assert.Len(t, w.commentsBy(open, coder), 1)
	assert.Len(t, w.commentsBy(open, reviewer), 1)
	w.waitTask("the assigned issue's task", time.Minute, task.StatusReview, isAction(task.ActionIssueAssigned, coder))
	assert.Empty(t, w.tasksWhere(func(t task.Task) bool { return t.IssueNumber == assigned && t.ActionType == task.ActionDiscussion }))
	w.checkRuns()
}

// TestE2EGiteaOutageTasksRunOnceAfter: while mozi cannot reach Gitea (its
// API and git), assignments keep arriving; their tasks wait without
// failing or spending retries, and once Gitea answers again each runs
// once, within seconds.
func TestE2EGiteaOutageTasksRunOnceAfter(t *testing.T) {
	t.Parallel()
	g := realgitea.Shared(t)
	proxy := newGiteaProxy(t, g.URL)
	w := newWorld(t, worldOptions{gitea: g, giteaURL: proxy.URL(),
		agents: []agentSpec{{name: "coder1", role: "coder"}, {name: "coder2", role: "coder"}}})
	coder1, coder2 := w.login("coder1"), w.login("coder2")
	// mozi has its mirror of the repository, as in any outage but the
	// first minutes of its life.
	warm := w.createIssue("Warm up", "First.", coder2)
	w.waitTask("the warm-up task", 2*time.Minute, task.StatusReview,
		func(t task.Task) bool { return t.ActionType == task.ActionIssueAssigned && t.IssueNumber == warm })
	w.waitRunsRecorded()
	proxy.setDown(true)
	issues := []int{
		w.createIssue("First job", "One.", coder1),
		w.createIssue("Second job", "Two.", coder1),
		w.createIssue("Third job", "Three.", coder2),
	}
	outage := func(t task.Task) bool { return t.ActionType == task.ActionIssueAssigned && t.IssueNumber != warm }
	w.eventually("every task held at least once", time.Minute, func() (bool, string) {
		tasks := w.tasksWhere(outage)
		held := 0
		for _, tk := range tasks {
			if tk.Holds > 0 || tk.LastError != "" {
				held++
			}
		}
		return len(tasks) == len(issues) && held == len(issues), describe(tasks)
	})
	time.Sleep(15 * time.Second) // the outage goes on
	for _, tk := range w.tasksWhere(outage) {
		assert.Contains(t, []task.Status{task.StatusPending, task.StatusClaimed}, tk.Status, describe([]task.Task{tk}))
	}
	proxy.setDown(false)
	back := time.Now()

	w.eventually("every task in review, its run recorded", 3*time.Minute, func() (bool, string) {
		tasks := w.tasksWhere(outage)
		return len(tasks) == 3 && !slices.ContainsFunc(tasks, func(t task.Task) bool {
			return t.Status != task.StatusReview || t.LeaseOwner != ""
		}), describe(tasks)
	})
	first := time.Time{}
	for _, tk := range w.tasksWhere(outage) {
		assert.Equal(t, 1, tk.DispatchCount, describe([]task.Task{tk}))
		assert.Equal(t, 0, tk.RetryCount, describe([]task.Task{tk}))
		attempts, err := w.store.Attempts(t.Context(), tk.ID)
		require.NoError(t, err)
		require.Len(t, attempts, 1)
		assert.Equal(t, "succeeded", attempts[0].Outcome)
		if first.IsZero() || attempts[0].StartedAt.Before(first) {
			first = attempts[0].StartedAt
		}
	}
	t.Logf("first agent started %s after Gitea came back", first.Sub(back).Round(time.Millisecond))
	assert.Less(t, first.Sub(back), 10*time.Second, "held tasks must start within seconds of Gitea's return")
	assert.Len(t, w.pulls(), 4)
	w.checkRuns()
}

// TestE2ECatchUpAfterDowntime: what happened in Gitea while mozi was down
// — an assignment, a pull request with a review request, a comment that
// mentions an agent — is found by the catch-up when it starts again, each
// once; a pull request an agent reviewed without being asked gets no
// review request from it.
func TestE2ECatchUpAfterDowntime(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{agents: []agentSpec{
		{name: "coder", role: "coder"},
		{name: "reviewer", role: "reviewer"},
		{name: "helper", role: "coder"},
	}})
	coder, reviewer, helper := w.login("coder"), w.login("reviewer"), w.login("helper")
	first := w.createIssue("Add a greeting", "Please add a greeting file.", coder)
	w.waitTask("the assigned task", 2*time.Minute, task.StatusReview, isAction(task.ActionIssueAssigned, coder))
	reviewed := w.pulls()[0]
	// The reviewer approves the pull request unasked: Gitea now lists it
	// among the pull request's requested reviewers.
	w.call(w.agents["reviewer"].User, "POST", fmt.Sprintf("/repos/%s/pulls/%d/reviews", w.repo, reviewed.Number),
		map[string]any{"event": "APPROVED", "body": "Nice start."}, nil)
	w.eventually("the review applied", time.Minute, func() (bool, string) {
		return len(w.tasksWhere(isAction(task.ActionReviewResult, coder))) == 1, describe(w.tasks())
	})

	w.stopMozi(syscall.SIGTERM)
	assigned := w.createIssue("Add a farewell", "Please add a farewell file.", coder)
	c := w.clone(w.human)
	c.git("checkout", "-q", "-b", "docs/readme")
	require.NoError(t, os.WriteFile(filepath.Join(c.dir, "NOTES.md"), []byte("notes\n"), 0o644))
	c.git("add", "NOTES.md")
	c.git("commit", "-q", "-m", "Add notes")
	c.git("push", "-q", "origin", "docs/readme")
	var asked pull
	w.call(w.human, "POST", "/repos/"+w.repo+"/pulls", map[string]any{"head": "docs/readme", "base": "main",
		"title": "Add notes", "body": "Notes for the team."}, &asked)
	w.call(w.human, "POST", fmt.Sprintf("/repos/%s/pulls/%d/requested_reviewers", w.repo, asked.Number),
		map[string]any{"reviewers": []string{reviewer}}, nil)
	w.call(w.human, "POST", fmt.Sprintf("/repos/%s/issues/%d/comments", w.repo, first),
		map[string]any{"body": fmt.Sprintf("@%s could you check the greeting's wording?", helper)}, nil)
	w.start()

	w.waitTask("the missed assignment", 2*time.Minute, task.StatusReview,
		func(t task.Task) bool { return t.ActionType == task.ActionIssueAssigned && t.IssueNumber == assigned })
	w.waitTask("the missed review request", 2*time.Minute, task.StatusDone,
		func(t task.Task) bool {
			return t.ActionType == task.ActionReviewRequest && t.IssueNumber == asked.Number
		})
	w.waitTask("the missed mention", 2*time.Minute, task.StatusDone, isAction(task.ActionMention, helper))
	// Two more catch-up passes (every 3 s) find nothing more.
	marks := func() time.Time {
		m, err := w.store.CatchUpMarks(t.Context(), []string{w.repo})
		require.NoError(t, err)
		require.Len(t, m, 1)
		return m[0].At
	}
	after := marks()
	w.eventually("two more catch-up passes", time.Minute, func() (bool, string) {
		return marks().After(after.Add(3 * time.Second)), marks().String()
	})
	assert.Empty(t, w.tasksWhere(func(t task.Task) bool {
		return t.ActionType == task.ActionReviewRequest && t.IssueNumber == reviewed.Number
	}), "a review is not a review request")
	for _, keep := range []func(task.Task) bool{
		func(t task.Task) bool { return t.ActionType == task.ActionIssueAssigned && t.IssueNumber == assigned },
		func(t task.Task) bool {
			return t.ActionType == task.ActionReviewRequest && t.IssueNumber == asked.Number
		},
		isAction(task.ActionMention, helper),
	} {
		list := w.tasksWhere(keep)
		assert.Len(t, list, 1, describe(list))
	}
	assert.Len(t, w.commentsBy(first, helper), 1, "the helper answered once")
	w.checkRuns()
}
