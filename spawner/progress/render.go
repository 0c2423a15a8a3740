// Package progress keeps one status comment per issue that mozi edits in
// place as the issue's tasks move, and reacts 👀 on what triggered a task
// it took (issue 21).
package progress

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/moziplus/mozi/repository/task"
)

// Marker is the hidden line that makes a comment mozi's status comment of
// its issue: a retry of a first post finds an earlier try by it.
const Marker = "<!-- mozi:status -->"

// Item is a task as its issue's status comment shows it.
type Item struct {
	Task task.Task
	// CIRound of CIRounds count the repair rounds of a task waiting
	// because CI stayed red.
	CIRound  int
	CIRounds int
	// OpenDeps are the open issues a pending task waits for (the claim
	// skips it without a hold).
	OpenDeps []int
}

// Facts are what the comment says beyond the tasks' rows.
type Facts struct {
	Now          time.Time
	BreakerUntil time.Time       // the repository's circuit breaker is open until then
	Busy         map[string]bool // agents running something now
}

// Render is the status comment of an issue's tasks: one line per live
// task, or the latest task's outcome when none is live. Empty: nothing to
// show.
func Render(items []Item, f Facts) string {
	shown := live(items)
	if len(shown) == 0 {
		if latest, ok := newest(items); ok {
			shown = []Item{latest}
		}
	}
	if len(shown) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("**mozi** · status of the work on this issue (this comment is edited as it moves)\n\n")
	for _, it := range shown {
		t := it.Task
		fmt.Fprintf(&b, "- %s · `%s` · %s\n", line(it, f), t.Agent, strings.ReplaceAll(string(t.ActionType), "_", " "))
	}
	b.WriteString("\n" + Marker)
	return b.String()
}

// live are the non-terminal items, oldest task first.
func live(items []Item) []Item {
	var out []Item
	for _, it := range items {
		if !it.Task.Status.Terminal() {
			out = append(out, it)
		}
	}
	slices.SortFunc(out, func(a, b Item) int { return int(a.Task.ID - b.Task.ID) })
	return out
}

func newest(items []Item) (Item, bool) {
	if len(items) == 0 {
		return Item{}, false
	}
	return slices.MaxFunc(items, func(a, b Item) int {
		if c := a.Task.UpdatedAt.Compare(b.Task.UpdatedAt); c != 0 {
			return c
		}
		return int(a.Task.ID - b.Task.ID)
	}), true
}

// line is one task's state in words.
func line(it Item, f Facts) string {
	t := it.Task
	switch t.Status {
	case task.StatusPending:
		return "⏳ **queued**" + queuedWhy(it, f)
	case task.StatusClaimed:
		return fmt.Sprintf("▶️ **starting** — attempt %d", max(t.DispatchCount, 1))
	case task.StatusWorking:
		return fmt.Sprintf("▶️ **running** — attempt %d, since %s", max(t.DispatchCount, 1), clock(t.UpdatedAt))
	case task.StatusReview:
		if t.PRNumber > 0 {
			return fmt.Sprintf("🔍 **PR #%d opened** — in review", t.PRNumber)
		}
		return "🔍 **in review**"
	case task.StatusDone:
		if t.PRNumber > 0 {
			return fmt.Sprintf("✅ **done** — PR #%d", t.PRNumber)
		}
		return "✅ **done**"
	case task.StatusFailed:
		if why := firstLine(t.LastError); why != "" {
			return "❌ **failed** — " + why
		}
		return "❌ **failed**"
	case task.StatusCancelled:
		if t.EndedBy != "" {
			return "⛔ **cancelled** by " + strings.TrimPrefix(t.EndedBy, "@")
		}
		return "⛔ **cancelled**"
	}
	return "⏸ **waiting**: " + waitWhy(it)
}

// waitWhy names what a task that waits for a person waits for.
func waitWhy(it Item) string {
	switch it.Task.WaitReason {
	case task.WaitQuestion:
		return "an answer to the agent's question"
	case task.WaitCIRed:
		if it.CIRounds > 0 {
			return fmt.Sprintf("CI red (round %d of %d)", it.CIRound, it.CIRounds)
		}
		return "CI red"
	case "":
		return string(it.Task.Status)
	}
	return string(it.Task.WaitReason)
}

// queuedWhy says why a pending task has not started (empty: it is next).
func queuedWhy(it Item, f Facts) string {
	t := it.Task
	until := ""
	if t.NotBefore.After(f.Now) {
		until = ", until " + clock(t.NotBefore)
	}
	switch t.HeldFor {
	case "":
	case task.HeldForDependency:
		if len(t.DependsOn) > 0 {
			return " — waits: dependency open (" + issues(t.DependsOn) + ")"
		}
		return " — waits: dependency open"
	case task.HeldForBudget:
		return " — waits: spawn budget spent" + until
	case task.HeldForUsageLimit:
		if !t.NotBefore.Before(task.HeldForAPerson) {
			return fmt.Sprintf(" — waits: the agent's usage limit; unattended resumes for today are spent, "+
				"so it waits for `mozi task resume %d`", t.ID)
		}
		return " — waits: the agent's usage limit" + until
	case task.HeldForBranch:
		return " — waits: another run has its branch checked out"
	case task.HeldForGitea:
		return " — waits: Gitea did not answer"
	case task.HeldForBackend:
		return " — waits: the execution backend could not take the run"
	case task.HeldForDatabase:
		return " — waits: the database did not answer"
	case task.HeldForShutdown:
		return " — waits: mozi restarted before it started"
	default:
		return " — waits: " + strings.ReplaceAll(string(t.HeldFor), "_", " ")
	}
	switch {
	case len(it.OpenDeps) > 0:
		return " — waits: dependency open (" + issues(it.OpenDeps) + ")"
	case f.BreakerUntil.After(f.Now):
		return " — waits: circuit breaker open (agents commented too much), until " + clock(f.BreakerUntil)
	case t.RetryCount > 0 && t.NotBefore.After(f.Now):
		return fmt.Sprintf(" — retry %d after a failed attempt%s", t.RetryCount, until)
	case f.Busy[t.Agent]:
		return " — waits: agent busy"
	}
	return ""
}

func issues(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprintf("#%d", n)
	}
	return strings.Join(s, ", ")
}

func clock(t time.Time) string { return t.UTC().Format("Jan 2 15:04 UTC") }

// firstLine is the reason in one line, short enough for a list item.
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}
