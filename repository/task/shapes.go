package task

import "time"

// The shapes below are what mozi knows of Gitea's collaboration data, the
// same whoever produced it: a webhook payload (repository/gitea/payload),
// Gitea's API (repository/gitea) or mozi's copy in the database
// (repository). A field one producer cannot know stays zero there; each
// field says who fills it when not everyone does.

// States of issues and pull requests, as Gitea names them.
const (
	StateOpen   = "open"
	StateClosed = "closed"
)

// Issue is a Gitea issue (or the issue side of a pull request).
type Issue struct {
	Repo        string
	Number      int
	IsPull      bool
	Title       string
	Body        string
	State       string // StateOpen or StateClosed
	Author      string
	Labels      []string
	Assignees   []string
	ParentIssue int       // database: from the title or a Parent: line
	DependsOn   []int     // database: from Depends: lines
	CreatedAt   time.Time // Gitea's created_at
	UpdatedAt   time.Time // Gitea's updated_at: orders competing payloads (zero: Gitea sent a placeholder)
	ClosedAt    time.Time
	ClosedBy    string // database: who closed it, when a webhook said
	// DiscussionDueAt is when an unassigned top-level issue gets its
	// discussion broadcast; DiscussedAt records that it happened
	// (database).
	DiscussionDueAt time.Time
	DiscussedAt     time.Time
	SyncedAt        time.Time // database: when Gitea last confirmed the copy
}

// Closed reports whether the issue is closed.
func (i Issue) Closed() bool { return i.State == StateClosed }

// PullRequest is a Gitea pull request.
type PullRequest struct {
	Repo     string
	Number   int
	Author   string
	Title    string
	Body     string // payloads and the API; the database keeps none
	HeadRef  string
	HeadSHA  string
	BaseRef  string
	State    string // StateOpen or StateClosed
	Merged   bool
	MergedBy string
	// RequestedReviewers are the reviewers a payload lists.
	RequestedReviewers []string
	// LinkedIssues are the issues the PR closes, as owner/name#N
	// (database: mozi's reading of its title, body and branch).
	LinkedIssues []string
	// ChangesRequestedBy are reviewers whose latest verdict asked for
	// changes (database: mozi's record of the reviews).
	ChangesRequestedBy []string
	UpdatedAt          time.Time
	ClosedAt           time.Time
}

// CommitStatus is one status of a commit: a webhook's, one read from
// Gitea, or a failing one kept until a pull request names its commit.
type CommitStatus struct {
	Repo        string
	ID          int64
	SHA         string
	Context     string
	State       string // pending, success, error, failure, warning
	TargetURL   string
	Description string
	Sender      string    // payloads: who reported it
	UpdatedAt   time.Time // payloads and the API; the database keeps none
}

// Comment is a comment on an issue or pull request.
type Comment struct {
	ID        int64
	Author    string
	Body      string
	CreatedAt time.Time
	UpdatedAt time.Time // payloads
}

// MergedTask is a task with its issue's collaboration data (what
// gitea.IssueReader.MergeTask, the SPEC's GetTask, answers).
type MergedTask struct {
	Task
	Issue Issue
}
