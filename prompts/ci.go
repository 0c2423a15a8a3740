package prompts

import (
	"context"
	"fmt"
	"strings"

	"github.com/moziplus/mozi/repository/task"
)

// CILogReader reads the tail of the log of the Gitea Actions job a commit
// status links (gitea.Client.JobLogTail).
type CILogReader interface {
	JobLogTail(ctx context.Context, repo, targetURL string, lines int) (string, error)
}

// CILog is what a repair round's prompt says of the failed job's log: its
// last lines, or why they could not be read.
type CILog struct {
	Round, Rounds int
	Tail          string
	Unreadable    string // why the log could not be read ("" when Tail is it)
}

// ciLog reads the failed job's log for a repair round; a log that cannot
// be read is said so in the prompt, it does not stop the run.
func (a *Assembler) ciLog(ctx context.Context, t task.Task) *CILog {
	out := &CILog{Round: t.Meta.CIRound, Rounds: a.cfg.MaxRepairRounds}
	if out.Rounds <= 0 {
		out.Rounds = task.DefaultMaxRepairRounds
	}
	lines := a.cfg.LogTailLines
	if lines <= 0 {
		lines = task.DefaultLogTailLines
	}
	switch {
	case a.cfg.CILogs == nil:
		out.Unreadable = "mozi has no Gitea client to read it with"
	case t.Meta.TargetURL == "":
		out.Unreadable = "the status links no log"
	default:
		tail, err := a.cfg.CILogs.JobLogTail(ctx, t.Repo, t.Meta.TargetURL, lines)
		if err != nil {
			out.Unreadable = oneLine(err.Error())
		} else {
			out.Tail = tail
		}
	}
	return out
}

// waitDetails are the texts of a repair round (what failed, the job's
// log) and of a task a person answered (the question and the answer).
func waitDetails(r *Renderer) []string {
	t, m := r.In.Task, r.In.Task.Meta
	var out []string
	if l := r.In.CILog; l != nil && t.ActionType == task.ActionCIFailure {
		var b strings.Builder
		if l.Round > 0 {
			fmt.Fprintf(&b, "## %s\n", r.Label("repair_round", "round", fmt.Sprint(l.Round), "rounds", fmt.Sprint(l.Rounds)))
		}
		if d := strings.TrimSpace(m.StatusDesc); d != "" {
			fmt.Fprintf(&b, "- description: %s\n", oneLine(d))
		}
		if strings.TrimSpace(l.Tail) != "" {
			fmt.Fprintf(&b, "\n%s\n```\n%s\n```", r.Label("job_log_tail"), r.Cut(lastBytes(l.Tail, 16<<10), 16<<10))
		} else {
			b.WriteString(r.Label("job_log_unreadable", "reason", l.Unreadable))
		}
		out = append(out, strings.TrimRight(b.String(), "\n"))
	}
	if strings.TrimSpace(m.Answer) != "" {
		block := "## " + r.Label("answer", "person", m.AnsweredBy)
		if q := strings.TrimSpace(m.Question); q != "" {
			block += "\n" + r.Label("asked") + "\n" + r.Cut(quote(q), 4<<10)
		}
		block += "\n" + r.Label("answered") + "\n" + r.Cut(quote(m.Answer), 8<<10)
		out = append(out, block)
	}
	return out
}
