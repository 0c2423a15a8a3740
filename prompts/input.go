package prompts

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/repository/task/conventions"
	"github.com/moziplus/mozi/templates"
)

// Input is everything a prompt is built from, resolved beforehand (Gather
// does it from a task).
type Input struct {
	Task  task.Task
	Issue task.Issue // the issue or pull request the task is about
	Agent Agent
	// GiteaURL is Gitea's base URL (for the API and wiki links).
	GiteaURL string
	// Lead is the lead agent's login (discussions escalate to it).
	Lead string
	// Prior are the issues this one builds on (Depends, Parent, blocked by).
	Prior []Related
	// SubIssues are the parent's sub-issues (round reviews).
	SubIssues []Related
	// Round is what a review task answers: every review and comment since
	// the author's last turn (nil when not read).
	Round *task.ReviewRound
	// Retry describes the previous attempt when this is not the first.
	Retry *Retry
	// Checkout is the worktree mozi prepared for the run; nil when the
	// agent works in its own directory (workspace: none).
	Checkout *Checkout
	// CILog is the failed job's log of a repair round (ci_failure); nil
	// for other tasks.
	CILog *CILog
}

// Checkout is where a run works: a git worktree mozi prepared.
type Checkout struct {
	Dir string
	// Branch is the branch checked out; "" for a detached checkout of Ref.
	Branch string
	Ref    string
	// Base is the repository's default branch.
	Base string
	// Note is a workspace note to pass on ("uncommitted", "diverged"), or "".
	Note string
}

// Agent is what the prompt says about the agent it is for.
type Agent struct {
	Login   string
	Workdir string
	// TokenEnv names the environment variable holding the agent's Gitea
	// token. The prompt names it; it never holds the value.
	TokenEnv string
	// Role is the text of the agent's role files (L1).
	Role   string
	Skills []string
}

// Related is another issue shown for context, with its latest report.
type Related struct {
	Number   int
	Title    string
	State    string
	Relation string // depends, parent, blocked by, sub-issue
	Report   string
}

// Retry is what the previous attempt left.
type Retry struct {
	Attempt    int // this attempt's number, from 2
	Error      string
	OutputTail string
}

// DefaultTokenEnv is the variable the spawner always sets to the agent's
// token.
const DefaultTokenEnv = "GITEA_TOKEN"

// vars fills the placeholders the templates may use for this input.
func (in *Input) vars() templates.Vars {
	t, m := in.Task, in.Task.Meta
	title := in.Issue.Title
	if title == "" {
		title = m.Title
	}
	// Steps quote the title in shell commands ('…'): a straight quote in it
	// would end the string.
	title = strings.ReplaceAll(title, "'", "’")
	author := in.Issue.Author
	if author == "" {
		author = m.IssueAuthor
	}
	repoName := t.Repo
	if _, name, ok := strings.Cut(t.Repo, "/"); ok {
		repoName = name
	}
	tokenEnv := in.Agent.TokenEnv
	if tokenEnv == "" {
		tokenEnv = DefaultTokenEnv
	}
	v := templates.Vars{
		"repo": t.Repo, "repo_name": repoName, "title": title, "brief": conventions.Brief(title),
		"agent": in.Agent.Login, "author": author, "gitea_url": in.GiteaURL,
		"gitea_api": strings.TrimSuffix(in.GiteaURL, "/") + "/api/v1", "workdir": in.Agent.Workdir,
		"token_env": tokenEnv, "lead": in.Lead, "head_sha": m.HeadSHA, "head_branch": m.HeadBranch,
		"status_context": m.StatusCtx, "target_url": m.TargetURL, "reviewer": m.Reviewer,
		"review_state": reviewState(m.ReviewState), "mentioned_by": m.Sender, "closed_by": m.Sender,
		"merged_by": m.Sender,
	}
	if t.IssueNumber > 0 {
		v["issue_number"] = strconv.Itoa(t.IssueNumber)
		v["report_issue"] = strconv.Itoa(t.IssueNumber)
	} else {
		// A repository-level task: the agent opens the issue it reports on.
		v["issue_number"], v["report_issue"] = "<issue>", "<issue>"
	}
	if t.PRNumber > 0 {
		v["pr_number"] = strconv.Itoa(t.PRNumber)
	}
	if m.Round > 0 {
		v["round"] = strconv.Itoa(m.Round)
	}
	if in.Lead == "" {
		v["lead"] = "the lead"
	}
	v["branch"] = conventions.TaskBranch(t, v["brief"])
	v["base"] = "main"
	var ref string
	if c := in.Checkout; c != nil {
		v["workdir"] = c.Dir
		if c.Branch != "" {
			v["branch"] = c.Branch
		}
		if c.Base != "" {
			v["base"] = c.Base
		}
		ref = c.Ref
	}
	v["checkout"] = ref
	if ref == "" {
		v["checkout"] = "origin/" + v["base"]
	}
	return v
}

// Branch is the branch the task's work belongs on, as its prompt names
// it: the pull request's head for work on a pull request, else a new
// <kind>/<issue>-<brief> branch.
func (in *Input) Branch() string {
	t := in.Task
	title := in.Issue.Title
	if title == "" {
		title = t.Meta.Title
	}
	return conventions.TaskBranch(t, conventions.Brief(strings.ReplaceAll(title, "'", "’")))
}

func reviewState(s string) string {
	switch s {
	case "rejected":
		return "changes requested"
	case "comment":
		return "commented"
	}
	return s
}

// maxRoleFile bounds one role file read into a prompt (the L1 budget cuts
// the whole role further).
const maxRoleFile = 64 << 10

// ReadRole concatenates an agent's role files (L1 of its prompts).
func ReadRole(paths []string) (string, error) {
	var parts []string
	for _, p := range paths {
		data, err := readLimited(p, maxRoleFile)
		if err != nil {
			return "", fmt.Errorf("role file %s: %w", p, err)
		}
		parts = append(parts, strings.TrimSpace(string(data)))
	}
	return strings.Join(parts, "\n\n"), nil
}

func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit))
}
