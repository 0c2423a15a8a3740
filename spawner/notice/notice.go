// Package notice is what mozi itself says on Gitea: the one comment when a
// task fails for good (SPEC §10: every failed run is visible, never
// "success with no comment") and the one when a repository's circuit
// breaker trips.
//
// Invariants: a comment is queued in the outbox (repository.Comment) in
// the transaction of the change that calls for it — the failure, the trip
// — so a change is never made without its comment nor a comment queued
// for a change that rolled back; the Poster posts each queued comment
// until Gitea takes it, and never twice: every body carries its row's
// marker, which a retry looks for in the issue before it posts again.
package notice

import (
	"fmt"
	"strings"
	"time"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/task"
)

// Notices words mozi's comments. A nil *Notices words no failure comment
// (spawner.failure_comment: false, or no Gitea to post to).
type Notices struct{}

// New returns the comment wording.
func New() *Notices { return &Notices{} }

// TaskFailed is the comment that says why task t failed for good ("" for
// a nil Notices).
func (n *Notices) TaskFailed(t task.Task, reason string) string {
	if n == nil {
		return ""
	}
	return fmt.Sprintf("**mozi**: the `%s` task of @%s on this issue failed after %s: %s.\n\n"+
		"mozi will not run it again by itself. Details: `mozi task show %d`; to try again: `mozi task retry %d`.",
		t.ActionType, t.Agent, runs(t.DispatchCount), strings.TrimSuffix(oneLine(reason), "."), t.ID, t.ID)
}

// BreakerTripped is the comment where a repository's circuit breaker
// tripped, queued in the same transaction as the trip.
func BreakerTripped(b repository.Breaker, window time.Duration) repository.Comment {
	return repository.Comment{
		Repo: b.Repo, Issue: b.Issue, Kind: "breaker",
		Key: fmt.Sprintf("%s@%d", b.Repo, b.OpenUntil.Unix()),
		Body: fmt.Sprintf("**mozi**: agents posted %d comments on %s within %s, so mozi paused new agent runs on this repository "+
			"until %s UTC (circuit breaker). Runs in progress finish; waiting tasks start after that, by themselves.",
			b.Comments, b.Repo, window, b.OpenUntil.UTC().Format("2006-01-02 15:04")),
	}
}

// runs counts a task's runs for people: every dispatch that was not a
// hold (follow-ups and rescues included).
func runs(n int) string {
	switch n {
	case 0:
		return "no run"
	case 1:
		return "1 run"
	}
	return fmt.Sprintf("%d runs", n)
}

// oneLine keeps a reason to one line of reasonable length.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 400 {
		s = string(r[:400]) + "…"
	}
	return s
}
