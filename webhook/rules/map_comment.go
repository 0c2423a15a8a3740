package rules

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/gitea/payload"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/repository/task/build"
	"github.com/moziplus/mozi/spawner/notice"
	"github.com/moziplus/mozi/webhook/rules/conventions"
)

// onComment handles issue and pull request comments, created or edited:
// an [Action Report] finishes its author's report-finished tasks;
// @mentions of registered agents become mention tasks; anything else is
// discussion.
func (e *eventCtx) onComment(ctx context.Context) error {
	c, number := e.ev.Comment, e.ev.Issue.Number
	if err := e.lock(ctx, number); err != nil {
		return err
	}
	if err := e.countAgentComment(ctx, number); err != nil {
		return err
	}
	if err := e.onReport(ctx, number); err != nil {
		return err
	}
	answered, err := e.onAnswer(ctx, number)
	if err != nil {
		return err
	}
	if err := e.onMentions(ctx, number, c.Author); err != nil {
		return err
	}
	if answered {
		return nil // the resumed task's next run reads it: no second turn for it
	}
	return e.onLooseComment(ctx, number)
}

// countAgentComment feeds the repository's circuit breaker (SPEC §10):
// agents answering agents in a storm pause new agent runs on the
// repository until it calms down.
func (e *eventCtx) countAgentComment(ctx context.Context, number int) error {
	c := e.ev.Comment
	if _, isAgent := e.agent(c.Author); !isAgent || e.ev.Action != payload.ActionCreated {
		return nil
	}
	b, tripped, err := e.tx.RecordAgentComment(ctx, e.ev.Repo, number, c.Author, c.ID, e.m.cfg.Breaker)
	if err != nil || !tripped {
		return err
	}
	e.log.Warn("circuit breaker tripped: agents comment too much, new agent runs on the repository are paused",
		"comments", b.Comments, "window", e.m.cfg.Breaker.Window.String(), "until", b.OpenUntil.UTC().Format(time.RFC3339))
	e.m.cfg.Metrics.breakerTrips.Inc()
	if !e.m.cfg.Comments {
		return nil
	}
	// People see why the agents went quiet: one comment per trip, queued
	// with the trip itself.
	_, err = e.tx.QueueComment(ctx, notice.BreakerTripped(b, e.m.cfg.Breaker.Window))
	return err
}

// onReport applies an [Action Report]: its fields are stored on the
// author's live tasks of the issue (and their repository-level failure
// tasks), and the report-finished ones are completed.
func (e *eventCtx) onReport(ctx context.Context, number int) error {
	c := e.ev.Comment
	match, fields := conventions.ActionReport(c.Body)
	if match == conventions.NoReport {
		return nil
	}
	if match == conventions.ReportSomewhere {
		e.log.Info("[Action Report] marker is not at the start of the comment: accepted", "comment_id", c.ID)
	}
	at := c.UpdatedAt
	if at.IsZero() {
		at = e.m.cfg.Now()
	}
	if err := e.tx.SetLatestReport(ctx, e.ev.Repo, number, clip(c.Body, 64<<10), at); err != nil {
		return err
	}
	tasks, err := e.tx.LiveTasks(ctx, e.ev.Repo, number)
	if err != nil {
		return err
	}
	repoLevel, err := e.tx.LiveTasks(ctx, e.ev.Repo, 0)
	if err != nil {
		return err
	}
	answered := answeredFailures(repoLevel, c.Author, c.Body, number)
	if len(answered) == 0 && slices.ContainsFunc(repoLevel, func(t task.Task) bool { return strings.EqualFold(t.Agent, c.Author) }) {
		e.log.Info("[Action Report] names none of its author's open deploy or infrastructure failures: they stay open",
			"comment_id", c.ID, "agent", c.Author)
	}
	for _, t := range append(tasks, answered...) {
		if !strings.EqualFold(t.Agent, c.Author) || awaitsOwnTurn(t) {
			continue
		}
		meta := task.Meta{Report: fields, CommentID: c.ID}
		if t.IssueNumber == 0 {
			meta.LinkedIssue = number // later reports on this issue answer it too
		}
		if e.m.cfg.ReportFields != nil {
			for _, want := range e.m.cfg.ReportFields(t.ActionType, t.BusinessType) {
				if v, ok := fields[want]; !ok || strings.TrimSpace(v) == "" {
					meta.ReportMissed = append(meta.ReportMissed, want)
				}
			}
		}
		if len(meta.ReportMissed) > 0 {
			e.log.Info("incomplete [Action Report]", "task_id", t.ID, "agent", t.Agent, "missing", meta.ReportMissed)
			e.m.cfg.Metrics.incompleteReports.WithLabelValues(string(t.ActionType)).Inc()
		}
		var clear []string
		if len(meta.ReportMissed) == 0 {
			clear = append(clear, task.MetaReportMissing) // an earlier report's gaps are filled
		}
		if err := e.tx.PatchTaskMeta(ctx, t.ID, meta, clear...); err != nil {
			return err
		}
		if q := task.ReportQuestion(fields); q != "" && t.Status == task.StatusWorking {
			if err := e.waitForPerson(ctx, t, task.WaitQuestion, q, ""); err != nil {
				return err
			}
			continue // a question does not finish the task: the answer resumes it
		}
		if t.ActionType.FinishedByReport() {
			if err := e.apply(ctx, t, task.EventComplete, repository.Change{}); err != nil {
				return err
			}
			if err := e.nextRound(ctx, t); err != nil {
				return err
			}
		}
	}
	return nil
}

// answeredFailures picks, among the live repository-level failures (deploy
// and infrastructure, on no issue), those of author that a report posted
// on issue number answers: the ones whose commit (7 characters or more)
// or status context it names, or that an earlier report linked to this
// issue; failing that, the author's only one. One report must not finish
// failures it says nothing about.
func answeredFailures(repoLevel []task.Task, author, body string, number int) []task.Task {
	var mine, named []task.Task
	for _, t := range repoLevel {
		if !strings.EqualFold(t.Agent, author) || !t.ActionType.FinishedByReport() {
			continue
		}
		mine = append(mine, t)
		if t.Meta.LinkedIssue == number || namesCommit(body, t.Meta.HeadSHA) ||
			t.Meta.StatusCtx != "" && strings.Contains(body, t.Meta.StatusCtx) {
			named = append(named, t)
		}
	}
	if len(named) == 0 && len(mine) == 1 {
		return mine
	}
	return named
}

// shaWordRE finds hexadecimal words that may be (abbreviated) commit ids.
var shaWordRE = regexp.MustCompile(`\b[0-9a-fA-F]{7,40}\b`)

// namesCommit reports whether text names commit sha, in full or
// abbreviated to 7 characters or more.
func namesCommit(text, sha string) bool {
	if len(sha) < 7 {
		return false
	}
	sha = strings.ToLower(sha)
	for _, w := range shaWordRE.FindAllString(text, -1) {
		if strings.HasPrefix(sha, strings.ToLower(w)) {
			return true
		}
	}
	return false
}

// onMentions queues every @login of a registered agent other than the
// author and turns it into a mention task, unless the chain of agents
// mentioning agents is too long.
func (e *eventCtx) onMentions(ctx context.Context, number int, author string) error {
	c := e.ev.Comment
	hops := 0
	if _, isAgent := e.agent(author); isAgent {
		// An agent's comment continues the chain that spawned it.
		prev, err := e.tx.LatestTask(ctx, e.ev.Repo, number, author)
		switch {
		case err == nil:
			hops = prev.HopCount + 1
		case errors.Is(err, task.ErrNotFound):
			hops = 1
		default:
			return err
		}
	}
	for _, login := range conventions.Mentions(c.Body) {
		ag, ok := e.agent(login)
		if !ok || strings.EqualFold(ag.Login, author) || strings.EqualFold(ag.Login, e.m.cfg.BotUser) {
			continue
		}
		id, queued, err := e.tx.EnqueueMention(ctx, repository.Mention{Repo: e.ev.Repo, IssueNumber: number,
			CommentID: c.ID, Author: author, Mentioned: ag.Login, HopCount: hops})
		if err != nil {
			return err
		}
		if !queued {
			continue // this comment already mentioned this agent (an edit)
		}
		if hops > e.m.cfg.MaxMentionHops {
			e.log.Warn("mention chain too long: not spawning", "agent", ag.Login, "hops", hops,
				"max_hops", e.m.cfg.MaxMentionHops, "issue", number)
			e.m.cfg.Metrics.hopLimits.Inc()
			if err := e.tx.ConsumeMention(ctx, id, 0, "hop_limit"); err != nil {
				return err
			}
			continue
		}
		n := e.mentionTask(ctx, number, ag.Login, hops)
		t, created, err := e.create(ctx, spawn{task: n, cause: build.Cause{At: c.CreatedAt}})
		if err != nil {
			return err
		}
		outcome := "task"
		if !created {
			outcome = "skipped"
		}
		if err := e.tx.ConsumeMention(ctx, id, t.ID, outcome); err != nil {
			return err
		}
	}
	return nil
}

func (e *eventCtx) mentionTask(ctx context.Context, number int, agent string, hops int) repository.NewTask {
	var n repository.NewTask
	if pr, err := e.tx.PullRequest(ctx, e.ev.Repo, number); err == nil {
		n = e.prTask(ctx, pr, task.ActionMention, agent)
	} else if issue, err := e.tx.Issue(ctx, e.ev.Repo, number); err == nil {
		n = e.issueTask(issue, task.ActionMention, agent)
	} else {
		pi := e.ev.Issue
		n = e.issueTask(*pi, task.ActionMention, agent)
		if pi.IsPull {
			n.PRNumber = number
		}
	}
	c := e.ev.Comment
	n.HopCount = hops
	n.Meta.CommentID, n.Meta.CommentBody, n.Meta.Sender = c.ID, clip(c.Body, 16<<10), c.Author
	return n
}
