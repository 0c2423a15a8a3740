package progress

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/moziplus/mozi/repository/task"
)

func TestRenderSaysWhereEachTaskIs(t *testing.T) {
	now := time.Date(2026, 11, 25, 23, 30, 0, 0, time.UTC)
	later := now.Add(20 * time.Minute)
	base := task.Task{ID: 7, Agent: "coder", ActionType: task.ActionIssueAssigned, UpdatedAt: now.Add(-5 * time.Minute)}
	with := func(f func(*task.Task)) task.Task { t := base; f(&t); return t }
	tests := []struct {
		name  string
		item  Item
		facts Facts
		want  string
	}{
		{"queued, next", Item{Task: with(func(t *task.Task) { t.Status = task.StatusPending })}, Facts{},
			"⏳ **queued**"},
		{"queued behind the agent's other run", Item{Task: with(func(t *task.Task) { t.Status = task.StatusPending })},
			Facts{Busy: map[string]bool{"coder": true}}, "⏳ **queued** — waits: agent busy"},
		{"queued on a dependency", Item{Task: with(func(t *task.Task) {
			t.Status, t.HeldFor, t.DependsOn = task.StatusPending, task.HeldForDependency, []int{3, 5}
		})}, Facts{}, "⏳ **queued** — waits: dependency open (#3, #5)"},
		{"queued behind open issues it depends on", Item{Task: with(func(t *task.Task) { t.Status = task.StatusPending }),
			OpenDeps: []int{4}}, Facts{Busy: map[string]bool{"coder": true}}, "⏳ **queued** — waits: dependency open (#4)"},
		{"queued on the budget", Item{Task: with(func(t *task.Task) {
			t.Status, t.HeldFor, t.NotBefore = task.StatusPending, task.HeldForBudget, later
		})}, Facts{Now: now}, "⏳ **queued** — waits: spawn budget spent, until Nov 25 23:50 UTC"},
		{"queued on the usage limit", Item{Task: with(func(t *task.Task) {
			t.Status, t.HeldFor, t.NotBefore = task.StatusPending, task.HeldForUsageLimit, later
		})}, Facts{Now: now}, "⏳ **queued** — waits: the agent's usage limit, until Nov 25 23:50 UTC"},
		{"held for a person after the day's unattended resumes", Item{Task: with(func(t *task.Task) {
			t.Status, t.HeldFor, t.NotBefore = task.StatusPending, task.HeldForUsageLimit, task.HeldForAPerson
		})}, Facts{Now: now}, "⏳ **queued** — waits: the agent's usage limit; unattended resumes for today are spent, " +
			"so it waits for `mozi task resume 7`"},
		{"queued behind the breaker", Item{Task: with(func(t *task.Task) { t.Status = task.StatusPending })},
			Facts{Now: now, BreakerUntil: later},
			"⏳ **queued** — waits: circuit breaker open (agents commented too much), until Nov 25 23:50 UTC"},
		{"a breaker closed again says nothing", Item{Task: with(func(t *task.Task) { t.Status = task.StatusPending })},
			Facts{Now: later, BreakerUntil: now}, "⏳ **queued**"},
		{"queued for a retry", Item{Task: with(func(t *task.Task) {
			t.Status, t.RetryCount, t.NotBefore = task.StatusPending, 2, later
		})}, Facts{Now: now}, "⏳ **queued** — retry 2 after a failed attempt, until Nov 25 23:50 UTC"},
		{"an unknown hold is named", Item{Task: with(func(t *task.Task) {
			t.Status, t.HeldFor = task.StatusPending, "moon_phase"
		})}, Facts{}, "⏳ **queued** — waits: moon phase"},
		{"starting", Item{Task: with(func(t *task.Task) { t.Status, t.DispatchCount = task.StatusClaimed, 1 })}, Facts{},
			"▶️ **starting** — attempt 1"},
		{"running", Item{Task: with(func(t *task.Task) { t.Status, t.DispatchCount = task.StatusWorking, 2 })}, Facts{},
			"▶️ **running** — attempt 2, since Nov 25 23:25 UTC"},
		{"pull request in review", Item{Task: with(func(t *task.Task) { t.Status, t.PRNumber = task.StatusReview, 12 })},
			Facts{}, "🔍 **PR #12 opened** — in review"},
		{"done", Item{Task: with(func(t *task.Task) { t.Status, t.PRNumber = task.StatusDone, 12 })}, Facts{},
			"✅ **done** — PR #12"},
		{"failed, the reason in one line", Item{Task: with(func(t *task.Task) {
			t.Status, t.LastError = task.StatusFailed, "agent exited 1\nstack trace…"
		})}, Facts{}, "❌ **failed** — agent exited 1"},
		{"cancelled by a person", Item{Task: with(func(t *task.Task) { t.Status, t.EndedBy = task.StatusCancelled, "alice" })},
			Facts{}, "⛔ **cancelled** by alice"},
		{"waiting for an answer", Item{Task: with(func(t *task.Task) { t.Status, t.WaitReason = task.StatusWaiting, task.WaitQuestion })},
			Facts{}, "⏸ **waiting**: an answer to the agent's question"},
		{"CI red", Item{Task: with(func(t *task.Task) { t.Status, t.WaitReason = task.StatusWaiting, task.WaitCIRed }), CIRound: 2, CIRounds: 3},
			Facts{}, "⏸ **waiting**: CI red (round 2 of 3)"},
		{"an unknown status is named", Item{Task: with(func(t *task.Task) { t.Status = "parked" })}, Facts{},
			"⏸ **waiting**: parked"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Render([]Item{tt.item}, tt.facts)
			assert.Equal(t, "**mozi** · status of the work on this issue (this comment is edited as it moves)\n\n- "+
				tt.want+" · `coder` · issue assigned\n\n"+Marker, got)
		})
	}
}

func TestRenderShowsLiveTasksOrTheLatestOutcome(t *testing.T) {
	at := time.Date(2026, 11, 25, 23, 0, 0, 0, time.UTC)
	done := Item{Task: task.Task{ID: 1, Agent: "coder", ActionType: task.ActionIssueAssigned, Status: task.StatusDone, UpdatedAt: at}}
	failed := Item{Task: task.Task{ID: 2, Agent: "reviewer", ActionType: task.ActionMention, Status: task.StatusFailed, UpdatedAt: at.Add(time.Minute)}}
	running := Item{Task: task.Task{ID: 4, Agent: "coder", ActionType: task.ActionMention, Status: task.StatusWorking, DispatchCount: 1, UpdatedAt: at}}
	queued := Item{Task: task.Task{ID: 3, Agent: "tester", ActionType: task.ActionMention, Status: task.StatusPending, UpdatedAt: at}}

	assert.Empty(t, Render(nil, Facts{}), "no task: no comment")
	assert.Contains(t, Render([]Item{done, failed}, Facts{}), "- ❌ **failed** · `reviewer` · mention\n",
		"without a live task, the latest outcome")
	assert.NotContains(t, Render([]Item{done, failed}, Facts{}), "done")

	got := Render([]Item{running, done, queued}, Facts{})
	assert.Contains(t, got, "- ⏳ **queued** · `tester` · mention\n- ▶️ **running** — attempt 1, since Nov 25 23:00 UTC · `coder` · mention\n",
		"live tasks, oldest first")
	assert.NotContains(t, got, "done", "a finished task beside live ones is not shown")
	assert.NotContains(t, got, "@", "the comment mentions nobody: a mention would make work")
}
