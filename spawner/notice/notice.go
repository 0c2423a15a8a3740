// Package notice tells the people on an issue, in one Gitea comment, that
// mozi gave up on a task there: SPEC §10's "every failed run is visible,
// never success with no comment". The spawner (retries exhausted), the
// dispatcher (guardrails) and the ticker (completion watchdog) all fail
// tasks through it.
//
// Invariant: at most one comment per task, whoever fails it and however
// often: the comment's id is kept in the task's meta and checked first.
package notice

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/moziplus/mozi/repository/task"
)

// Commenter posts a comment on an issue (gitea.Client).
type Commenter interface {
	PostComment(ctx context.Context, repo string, number int, body string) (int64, error)
}

// Store reads and annotates tasks (repository.Store).
type Store interface {
	Task(ctx context.Context, id int64) (task.Task, error)
	PatchTaskMeta(ctx context.Context, id int64, patch task.Meta, clear ...string) error
}

// metaKey is where the comment's id is kept in the task's meta.
const metaKey = "failure_comment_id"

// Notifier posts failure notices. A nil Notifier, or one without a
// commenter (no Gitea configured), posts nothing.
type Notifier struct {
	commenter Commenter
	store     Store
	logger    *slog.Logger
}

// New builds a notifier; commenter may be nil (no Gitea: nothing is posted).
func New(commenter Commenter, store Store, logger *slog.Logger) *Notifier {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Notifier{commenter: commenter, store: store, logger: logger}
}

// TaskFailed posts, once, why task id failed. Repository-level tasks have
// no issue to comment on.
func (n *Notifier) TaskFailed(ctx context.Context, id int64, reason string) {
	if n == nil || n.commenter == nil {
		return
	}
	log := n.logger.With("task_id", id)
	t, err := n.store.Task(ctx, id)
	if err != nil {
		log.Error("failure comment skipped", "error", err)
		return
	}
	if t.IssueNumber == 0 || t.Meta.Extra[metaKey] != "" {
		return
	}
	body := fmt.Sprintf("**mozi**: the `%s` task of @%s on this issue failed after %s: %s.\n\n"+
		"mozi will not run it again by itself. Details: `mozi task show %d`; to try again: `mozi task retry %d`.",
		t.ActionType, t.Agent, runs(t.DispatchCount), strings.TrimSuffix(oneLine(reason), "."), t.ID, t.ID)
	commentID, err := n.commenter.PostComment(ctx, t.Repo, t.IssueNumber, body)
	if err != nil {
		log.Error("failure comment not posted", "repo", t.Repo, "issue", t.IssueNumber, "error", err)
		return
	}
	if err := n.store.PatchTaskMeta(ctx, t.ID, task.Meta{Extra: map[string]string{metaKey: fmt.Sprint(commentID)}}); err != nil {
		log.Error("failure comment id not kept", "error", err)
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
