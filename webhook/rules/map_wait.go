package rules

import (
	"context"
	"errors"
	"strings"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/gitea/payload"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/spawner/notice"
	"github.com/moziplus/mozi/webhook/rules/conventions"
)

// waitForPerson moves t to waiting for reason, with one comment that
// mentions the issue's author (body: the comment; "" words a question).
func (e *eventCtx) waitForPerson(ctx context.Context, t task.Task, reason task.WaitReason, question, body string) error {
	if body == "" {
		author := t.Meta.IssueAuthor
		if issue, err := e.tx.Issue(ctx, t.Repo, t.IssueNumber); err == nil && issue.Author != "" {
			author = issue.Author
		} else if err != nil && !errors.Is(err, task.ErrNotFound) {
			return err
		}
		body = notice.Question(t, author, question)
	}
	if !e.m.cfg.Comments {
		body = ""
	}
	return e.apply(ctx, t, task.EventWait, repository.Change{WaitReason: reason, Question: question, Notice: body})
}

// onAnswer resumes the tasks that wait for a person on this issue (or, on
// a pull request, on the issues it closes) when a person comments: the
// comment is the answer in the next run's prompt. Agents' comments and
// edits answer nothing (mozi's own never reach the rules). It reports
// whether the comment answered a task, so that it is not also feedback.
func (e *eventCtx) onAnswer(ctx context.Context, number int) (answered bool, err error) {
	c := e.ev.Comment
	if _, isAgent := e.agent(c.Author); isAgent || e.ev.Action != payload.ActionCreated || c.Author == "" {
		return false, nil
	}
	numbers := []int{number}
	if pr, err := e.tx.PullRequest(ctx, e.ev.Repo, number); err == nil {
		for _, s := range pr.LinkedIssues {
			if ref, ok := conventions.ParseIssueRef(s); ok && ref.Repo == e.ev.Repo && ref.Number != number {
				if err := e.tx.LockIssue(ctx, ref.Repo, ref.Number); err != nil {
					return false, err
				}
				numbers = append(numbers, ref.Number)
			}
		}
	} else if !errors.Is(err, task.ErrNotFound) {
		return false, err
	}
	for _, n := range numbers {
		tasks, err := e.tx.LiveTasks(ctx, e.ev.Repo, n)
		if err != nil {
			return false, err
		}
		for _, t := range tasks {
			if t.Status != task.StatusWaiting {
				continue
			}
			if err := e.apply(ctx, t, task.EventAnswer, repository.Change{
				Answer: clip(strings.TrimSpace(c.Body), 16<<10), AnsweredBy: c.Author}); err != nil {
				return false, err
			}
			answered = true
		}
	}
	return answered, nil
}
