package payload

import (
	"strings"
	"time"

	"github.com/moziplus/mozi/repository/task"
)

// The wire structs mirror the parts of Gitea's JSON that mozi reads.

type wireUser struct {
	Login    string `json:"login"`
	Username string `json:"username"`
}

// logins lists the users' logins, skipping empty ones (nil when none).
func logins(users []*wireUser) []string {
	var out []string
	for _, u := range users {
		if login := u.login(); login != "" {
			out = append(out, login)
		}
	}
	return out
}

func (u *wireUser) login() string {
	if u == nil {
		return ""
	}
	if u.Login != "" {
		return Clean(u.Login)
	}
	return Clean(u.Username)
}

type wireLabel struct {
	Name string `json:"name"`
}

type wireIssue struct {
	Number      int         `json:"number"`
	Title       string      `json:"title"`
	Body        wireText    `json:"body"`
	State       string      `json:"state"`
	User        *wireUser   `json:"user"`
	Labels      []wireLabel `json:"labels"`
	Assignees   []*wireUser `json:"assignees"`
	PullRequest *struct{}   `json:"pull_request"`
	CreatedAt   *time.Time  `json:"created_at"`
	UpdatedAt   *time.Time  `json:"updated_at"`
	ClosedAt    *time.Time  `json:"closed_at"`
}

func (w *wireIssue) normalise(repo string) *task.Issue {
	i := &task.Issue{
		Repo: repo, Number: w.Number, Title: Clean(w.Title), Body: w.Body.text, State: strings.ToLower(w.State),
		Author: w.User.login(), IsPull: w.PullRequest != nil,
		CreatedAt: gitTime(w.CreatedAt), UpdatedAt: gitTime(w.UpdatedAt), ClosedAt: gitTime(w.ClosedAt),
	}
	if i.State != task.StateClosed {
		i.State = task.StateOpen
	}
	for _, l := range w.Labels {
		if l.Name != "" {
			i.Labels = append(i.Labels, Clean(l.Name))
		}
	}
	i.Assignees = logins(w.Assignees)
	return i
}

type wireBranch struct {
	Ref string `json:"ref"`
	SHA string `json:"sha"`
}

type wirePullRequest struct {
	Number             int         `json:"number"`
	Title              string      `json:"title"`
	Body               string      `json:"body"`
	State              string      `json:"state"`
	User               *wireUser   `json:"user"`
	Head               wireBranch  `json:"head"`
	Base               wireBranch  `json:"base"`
	Merged             bool        `json:"merged"`
	MergedBy           *wireUser   `json:"merged_by"`
	RequestedReviewers []*wireUser `json:"requested_reviewers"`
	UpdatedAt          *time.Time  `json:"updated_at"`
	ClosedAt           *time.Time  `json:"closed_at"`
}

func (w *wirePullRequest) normalise(repo string) *task.PullRequest {
	p := &task.PullRequest{
		Repo: repo, Number: w.Number, Title: Clean(w.Title), Body: Clean(w.Body), State: strings.ToLower(w.State),
		Author: w.User.login(), HeadRef: Clean(w.Head.Ref), HeadSHA: Clean(w.Head.SHA), BaseRef: Clean(w.Base.Ref),
		Merged: w.Merged, MergedBy: w.MergedBy.login(),
		UpdatedAt: gitTime(w.UpdatedAt), ClosedAt: gitTime(w.ClosedAt),
	}
	if p.State != task.StateClosed {
		p.State = task.StateOpen
	}
	p.RequestedReviewers = logins(w.RequestedReviewers)
	return p
}

type wireComment struct {
	ID        int64      `json:"id"`
	User      *wireUser  `json:"user"`
	Body      string     `json:"body"`
	CreatedAt *time.Time `json:"created_at"`
	UpdatedAt *time.Time `json:"updated_at"`
}

func (w *wireComment) normalise() *task.Comment {
	return &task.Comment{ID: w.ID, Author: w.User.login(), Body: Clean(w.Body),
		CreatedAt: gitTime(w.CreatedAt), UpdatedAt: gitTime(w.UpdatedAt)}
}

type wireEvent struct {
	Action     string `json:"action"`
	Repository struct {
		FullName string `json:"full_name"`
	} `json:"repository"`
	Sender            *wireUser        `json:"sender"`
	Issue             *wireIssue       `json:"issue"`
	Comment           *wireComment     `json:"comment"`
	PullRequest       *wirePullRequest `json:"pull_request"`
	RequestedReviewer *wireUser        `json:"requested_reviewer"`
	IsPull            bool             `json:"is_pull"`
	Review            *struct {
		Type    string `json:"type"`
		Content string `json:"content"`
	} `json:"review"`

	// status
	ID          int64      `json:"id"`
	SHA         string     `json:"sha"`
	Context     string     `json:"context"`
	State       string     `json:"state"`
	TargetURL   string     `json:"target_url"`
	Description string     `json:"description"`
	UpdatedAt   *time.Time `json:"updated_at"`

	WorkflowRun *struct {
		ID           int64      `json:"id"`
		RunAttempt   int64      `json:"run_attempt"`
		Name         string     `json:"name"`
		DisplayTitle string     `json:"display_title"`
		HeadSHA      string     `json:"head_sha"`
		Status       string     `json:"status"`
		Conclusion   string     `json:"conclusion"`
		HTMLURL      string     `json:"html_url"`
		UpdatedAt    *time.Time `json:"updated_at"`
	} `json:"workflow_run"`
}
