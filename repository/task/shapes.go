package task

import "time"

// Issue is what mozi knows of a Gitea issue (or the issue side of a pull
// request): collaboration data cached from webhooks and API reads.
type Issue struct {
	Repo        string
	Number      int
	IsPull      bool
	Title       string
	Body        string
	State       string // open or closed
	Author      string
	Labels      []string
	Assignees   []string
	ParentIssue int
	DependsOn   []int
	CreatedAt   time.Time // Gitea's created_at
	UpdatedAt   time.Time // Gitea's updated_at: orders competing payloads
	ClosedAt    time.Time
	ClosedBy    string
	// DiscussionDueAt is when an unassigned top-level issue gets its
	// discussion broadcast; DiscussedAt records that it happened.
	DiscussionDueAt time.Time
	DiscussedAt     time.Time
	SyncedAt        time.Time
}

// Closed reports whether the issue is closed.
func (i Issue) Closed() bool { return i.State == "closed" }

// PullRequest is what mozi knows of a Gitea pull request.
type PullRequest struct {
	Repo     string
	Number   int
	Author   string
	Title    string
	HeadRef  string
	HeadSHA  string
	BaseRef  string
	State    string // open or closed
	Merged   bool
	MergedBy string
	// LinkedIssues are the issues the PR closes, as owner/name#N.
	LinkedIssues []string
	// ChangesRequestedBy are reviewers whose latest verdict asked for changes.
	ChangesRequestedBy []string
	UpdatedAt          time.Time
	ClosedAt           time.Time
}

// CommitStatus is a failing commit status kept until its commit is known.
type CommitStatus struct {
	Repo        string
	ID          int64
	SHA         string
	Context     string
	State       string
	TargetURL   string
	Description string
	Sender      string
}
