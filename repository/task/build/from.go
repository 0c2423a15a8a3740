package build

import (
	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/task"
)

// FromIssue is a task about issue i: it copies what the prompt and the
// guardrails need again (title, labels, author, body, parent and
// dependencies) and takes its priority from the priority/P* labels.
// BusinessType is the caller's (it routes labels by its templates).
func FromIssue(i task.Issue, action task.ActionType, agent string) repository.NewTask {
	return repository.NewTask{
		Repo: i.Repo, IssueNumber: i.Number, ParentIssue: i.ParentIssue, ActionType: action,
		Agent: agent, Priority: task.PriorityFromLabels(i.Labels), DependsOn: i.DependsOn,
		IssueBody: i.Body, IssueUpdatedAt: i.UpdatedAt,
		Meta: task.Meta{Title: i.Title, Labels: i.Labels, IssueAuthor: i.Author},
	}
}

// FromPull is a task about pull request pr at the default priority; the
// caller adds what it knows of the linked issue (priority, labels) and the
// body, which mozi's copy of a pull request does not keep.
func FromPull(pr task.PullRequest, action task.ActionType, agent string) repository.NewTask {
	return repository.NewTask{
		Repo: pr.Repo, IssueNumber: pr.Number, PRNumber: pr.Number, ActionType: action, Agent: agent,
		Priority: task.DefaultPriority,
		Meta:     task.Meta{Title: pr.Title, IssueAuthor: pr.Author, HeadSHA: pr.HeadSHA, HeadBranch: pr.HeadRef},
	}
}

// FromRepo is a task about repository repo itself (a deploy or
// infrastructure failure no pull request explains), at priority.
func FromRepo(repo string, action task.ActionType, agent string, priority int) repository.NewTask {
	return repository.NewTask{Repo: repo, ActionType: action, Agent: agent, Priority: priority}
}

// Preview is the pending task n would become once created, without
// creating it (what `mozi prompt render` renders for an issue that has no
// task yet).
func (b *Builder) Preview(n repository.NewTask) task.Task {
	n = b.Prepare(n)
	return task.Task{Repo: n.Repo, IssueNumber: n.IssueNumber, PRNumber: n.PRNumber, ParentIssue: n.ParentIssue,
		ActionType: n.ActionType, BusinessType: n.BusinessType, Agent: n.Agent, Status: task.StatusPending,
		MaxRetries: task.EffectiveMaxRetries(n.MaxRetries), Priority: n.Priority, DependsOn: n.DependsOn,
		Meta: n.Meta, IssueBodyCache: task.CapBody(n.IssueBody), IssueUpdatedAt: n.IssueUpdatedAt,
		DedupeKey: n.DedupeKey, HopCount: n.HopCount, NotBefore: n.NotBefore}
}
