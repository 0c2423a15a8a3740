package task

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"time"
)

var repoRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$`)

// ValidRepo reports whether repo is an owner/name Gitea could have made:
// no control characters, separators or path tricks, which would otherwise
// travel into SQL rows, paths and prompts.
func ValidRepo(repo string) bool {
	owner, name, _ := strings.Cut(repo, "/")
	return repoRE.MatchString(repo) && owner != "." && owner != ".." && name != "." && name != ".."
}

// Status is the execution state of a task.
type Status string

// Task statuses. Done, failed and cancelled are terminal.
const (
	StatusPending   Status = "pending"
	StatusClaimed   Status = "claimed"
	StatusWorking   Status = "working"
	StatusReview    Status = "review"
	StatusWaiting   Status = "waiting" // waits for a person (WaitReason says why)
	StatusDone      Status = "done"
	StatusFailed    Status = "failed"
	StatusCancelled Status = "cancelled"
)

// Statuses lists every status in state-machine order.
var Statuses = []Status{
	StatusPending, StatusClaimed, StatusWorking, StatusReview, StatusWaiting,
	StatusDone, StatusFailed, StatusCancelled,
}

// LiveStatuses are the non-terminal statuses.
var LiveStatuses = []Status{StatusPending, StatusClaimed, StatusWorking, StatusReview, StatusWaiting}

// Terminal reports whether no event moves the task any further.
func (s Status) Terminal() bool {
	return s == StatusDone || s == StatusFailed || s == StatusCancelled
}

// ParseStatus validates a status name given by a user.
func ParseStatus(s string) (Status, error) {
	if slices.Contains(Statuses, Status(s)) {
		return Status(s), nil
	}
	return "", fmt.Errorf("unknown status %q (want one of %v)", s, Statuses)
}

// ActionType names the Gitea event that caused a task; it decides the action
// hint and the template the agent's prompt is built from.
type ActionType string

// Action types of SPEC §4 and §5.
const (
	ActionIssueAssigned         ActionType = "issue_assigned"
	ActionCIFailure             ActionType = "ci_failure"
	ActionReviewResult          ActionType = "review_result"
	ActionReviewRequest         ActionType = "review_request"
	ActionReviewUpdated         ActionType = "review_updated"
	ActionReviewComment         ActionType = "review_comment"
	ActionMention               ActionType = "mention"
	ActionDeployFailure         ActionType = "deploy_failure"
	ActionInfrastructureFailure ActionType = "infrastructure_failure"
	ActionIssueClosed           ActionType = "issue_closed"
	ActionReviewMerged          ActionType = "review_merged"
	ActionDiscussion            ActionType = "discussion"
	ActionRoundReview           ActionType = "round_review"
)

// ActionTypes lists every action type.
var ActionTypes = []ActionType{
	ActionIssueAssigned, ActionCIFailure, ActionReviewResult, ActionReviewRequest,
	ActionReviewUpdated, ActionReviewComment, ActionMention, ActionDeployFailure,
	ActionInfrastructureFailure, ActionIssueClosed, ActionReviewMerged,
	ActionDiscussion, ActionRoundReview,
}

// ParseActionType validates an action type name given by a user.
func ParseActionType(s string) (ActionType, error) {
	if slices.Contains(ActionTypes, ActionType(s)) {
		return ActionType(s), nil
	}
	return "", fmt.Errorf("unknown action type %q (want one of %v)", s, ActionTypes)
}

// Notification reports whether the action is a pure notification that is
// done as soon as its agent has been spawned (auto-pass).
func (a ActionType) Notification() bool {
	return a == ActionIssueClosed || a == ActionReviewMerged
}

// FinishedByReport reports whether an [Action Report] comment by the task's
// agent finishes the task (SPEC §4, issue_comment (a)).
func (a ActionType) FinishedByReport() bool {
	switch a {
	case ActionCIFailure, ActionDeployFailure, ActionInfrastructureFailure,
		ActionMention, ActionReviewComment, ActionDiscussion, ActionRoundReview:
		return true
	}
	return false
}

// FinishedOnExit reports whether the task is done once its agent exits
// successfully: pure notifications (auto-pass), and discussions and round
// reviews, whose output is the comments and sub-issues the agent posts
// while it runs. Other tasks wait for Gitea's terminal event.
func (a ActionType) FinishedOnExit() bool {
	return a.Notification() || a == ActionDiscussion || a == ActionRoundReview
}

// OpensPullRequest reports whether the agent's work ends in a new pull
// request: the issue's work, or a fix for a broken deployment or
// infrastructure.
func (a ActionType) OpensPullRequest() bool {
	return a == ActionIssueAssigned || a.RepositoryLevel()
}

// PushesCode reports whether the agent pushes commits: to a new pull
// request, or to its own one answering CI or a review.
func (a ActionType) PushesCode() bool {
	return a.OpensPullRequest() || a == ActionCIFailure || a == ActionReviewResult || a == ActionReviewComment
}

// RepositoryLevel reports whether a task of this action may belong to the
// repository rather than an issue (IssueNumber 0): a deploy or
// infrastructure failure on a commit that no pull request explains.
func (a ActionType) RepositoryLevel() bool {
	return a == ActionDeployFailure || a == ActionInfrastructureFailure
}

// BusinessType refines issue_assigned tasks by the kind of work (SPEC §5).
type BusinessType string

// Business types; the empty value means "not an issue_assigned task".
const (
	BusinessFeature        BusinessType = "feature"
	BusinessImpl           BusinessType = "impl"
	BusinessBug            BusinessType = "bug"
	BusinessDocs           BusinessType = "docs"
	BusinessRefactor       BusinessType = "refactor"
	BusinessTest           BusinessType = "test"
	BusinessInfrastructure BusinessType = "infrastructure"
)

// BusinessTypes lists every business type.
var BusinessTypes = []BusinessType{
	BusinessFeature, BusinessImpl, BusinessBug, BusinessDocs,
	BusinessRefactor, BusinessTest, BusinessInfrastructure,
}

// ParseBusinessType validates a business type name given by a user.
func ParseBusinessType(s string) (BusinessType, error) {
	if slices.Contains(BusinessTypes, BusinessType(s)) {
		return BusinessType(s), nil
	}
	return "", fmt.Errorf("unknown business type %q (want one of %v)", s, BusinessTypes)
}

// Priority levels, from the priority/P0…P3 labels. Lower is more urgent.
const (
	PriorityP0      = 0
	PriorityP3      = 3
	DefaultPriority = 2
)

// PriorityFromLabels reads priority/P0…P3 (the most urgent wins; default
// DefaultPriority).
func PriorityFromLabels(labels []string) int {
	best := -1
	for _, l := range labels {
		l = strings.ToLower(strings.TrimSpace(l))
		if len(l) == len("priority/p0") && strings.HasPrefix(l, "priority/p") {
			if p := int(l[len(l)-1] - '0'); p >= PriorityP0 && p <= PriorityP3 && (best < 0 || p < best) {
				best = p
			}
		}
	}
	if best < 0 {
		return DefaultPriority
	}
	return best
}

// DefaultMaxRetries is how many times a failed run is retried before the
// task fails.
const DefaultMaxRetries = 2

// NoRetries, as NewTask.MaxRetries, fails a task at its first failed run.
const NoRetries = -1

// EffectiveMaxRetries is the max_retries a task gets for
// NewTask.MaxRetries n: 0 and other non-positive values take
// DefaultMaxRetries, NoRetries none.
func EffectiveMaxRetries(n int) int {
	switch {
	case n == NoRetries:
		return 0
	case n <= 0:
		return DefaultMaxRetries
	}
	return n
}

// MaxRetriesSetting turns a configured number of retries into
// NewTask.MaxRetries (where 0 means the default).
func MaxRetriesSetting(n int) int {
	if n == 0 {
		return NoRetries
	}
	return n
}

// Task is one unit of agent work: mozi's execution state for an issue or
// pull request, as stored in task_state.
type Task struct {
	ID             int64
	Repo           string // owner/name
	IssueNumber    int    // the issue or pull request the work is about; 0: the repository
	PRNumber       int    // 0 when no pull request is linked
	ParentIssue    int    // 0 when the issue is not a sub-issue
	ActionType     ActionType
	BusinessType   BusinessType // empty unless ActionType is issue_assigned
	Agent          string       // Gitea login of the agent to spawn
	Status         Status
	RetryCount     int
	DispatchCount  int        // claims that were not given back: runs, and runs whose runner was lost
	Holds          int        // consecutive claims given back without a run (see EventRelease)
	HeldFor        HoldReason // why the last hold waits ("" when not held)
	WaitReason     WaitReason // why a waiting task waits ("" unless waiting)
	EndedBy        string     // who ended the task (a Gitea login, mozi), when terminal
	MaxRetries     int
	Priority       int
	DependsOn      []int
	Meta           Meta
	IssueBodyCache string
	IssueUpdatedAt time.Time // zero when unknown
	DedupeKey      string
	HopCount       int
	NotBefore      time.Time
	LeaseOwner     string
	LeaseExpiresAt time.Time
	HeartbeatAt    time.Time
	LastError      string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	FinishedAt     time.Time
}

// Meta is the task's daemon_meta: what mozi learned from the event that made
// the task and needs again when it builds the prompt.
type Meta struct {
	Event        string            `json:"event,omitempty"`
	DeliveryID   string            `json:"delivery_id,omitempty"`
	Title        string            `json:"title,omitempty"`
	Labels       []string          `json:"labels,omitempty"`
	IssueAuthor  string            `json:"issue_author,omitempty"`
	Sender       string            `json:"sender,omitempty"`
	LinkedIssue  int               `json:"linked_issue,omitempty"`
	HeadSHA      string            `json:"head_sha,omitempty"`
	HeadBranch   string            `json:"head_branch,omitempty"`
	CommentID    int64             `json:"comment_id,omitempty"`
	CommentBody  string            `json:"comment_body,omitempty"`
	ReviewState  string            `json:"review_state,omitempty"`
	ReviewBody   string            `json:"review_body,omitempty"`
	Reviewer     string            `json:"reviewer,omitempty"`
	StatusCtx    string            `json:"status_context,omitempty"`
	StatusState  string            `json:"status_state,omitempty"`
	TargetURL    string            `json:"target_url,omitempty"`
	Round        int               `json:"round,omitempty"`
	Report       map[string]string `json:"report,omitempty"`
	ReportMissed []string          `json:"report_missing,omitempty"` // JSON name: MetaReportMissing
	// FollowUp names what the agent's last run left undone (a FollowUp*
	// constant) when the completion watchdog runs it once more.
	FollowUp string `json:"follow_up,omitempty"`
	// WorkBranch is the branch the task's own work went on, recorded when
	// its first run was prepared: later runs keep it.
	WorkBranch string `json:"work_branch,omitempty"`
	// Question is what the task waits for a person to answer (its agent's
	// question, or what is still red); Answer and AnsweredBy are the
	// person's comment that resumed it.
	Question   string            `json:"question,omitempty"`
	Answer     string            `json:"answer,omitempty"`
	AnsweredBy string            `json:"answered_by,omitempty"`
	StatusDesc string            `json:"status_description,omitempty"`
	CIRound    int               `json:"ci_round,omitempty"` // ci_failure: which repair round of the pull request
	Extra      map[string]string `json:"extra,omitempty"`
}

// MetaReportMissing is Meta.ReportMissed's JSON name, for
// PatchTaskMeta's clear list.
const MetaReportMissing = "report_missing"

// Dedupe keys name the object an event is about (issue, pull request,
// commit and context, round), so two events about two objects never share
// one: the database refuses a repeated key per repository and action, for
// ever. Round keys are built where rounds are found (DueRounds).

// DiscussionKey is the one discussion broadcast of an issue to an agent.
func DiscussionKey(issue int, agent string) string {
	return fmt.Sprintf("discussion#%d/%s", issue, strings.ToLower(agent))
}

// MergedKey is the one review_merged notice of a pull request.
func MergedKey(pr int) string { return fmt.Sprintf("merged#%d", pr) }

// ClosedKey is the issue_closed notice of one close of an issue (an issue
// closed, reopened and closed again is two closes).
func ClosedKey(issue int, at time.Time) string {
	stamp := "unknown"
	if !at.IsZero() {
		stamp = at.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("closed#%d@%s", issue, stamp)
}

// CIFailureKey is one failing check of one head commit of a pull request.
func CIFailureKey(pr int, sha, context string) string {
	return fmt.Sprintf("ci#%d/%s/%s", pr, sha, context)
}

// CommitFailureKey is one failing check of a commit no pull request
// explains (deploy and infrastructure failures).
func CommitFailureKey(sha, context string) string { return fmt.Sprintf("commit@%s/%s", sha, context) }

// DefaultMaxMentionHops caps agent-to-agent mention chains: the rules
// create no mention task deeper than this, the dispatcher fails one.
const DefaultMaxMentionHops = 4

// The wait of a task held for a reason outside it (Gitea unreachable, a
// dependency still open, a branch in use): DefaultHoldBase doubling per
// consecutive hold (see Backoff), capped at DefaultHoldMax.
const (
	DefaultHoldBase = 15 * time.Second
	DefaultHoldMax  = 10 * time.Minute
)

// Backoff is how long the attempt-th try of something (counting from 1)
// waits after the previous one failed: base·2^(attempt-1) capped at limit,
// with "equal jitter" (between half and all of it) so that work failing
// together — a Gitea or database outage — does not come back together.
func Backoff(attempt int, base, limit time.Duration) time.Duration {
	d := base << min(max(attempt, 1)-1, 30)
	if d <= 0 || d > limit {
		d = limit
	}
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// What a run that exited 0 can have left undone, as Meta.FollowUp: the
// step whose Gitea event would have moved its task on.
const (
	FollowUpPullRequest = "pull_request" // issue_assigned: no pull request opened
	FollowUpPullClosed  = "pull_closed"  // issue_assigned: its pull request closed unmerged
	FollowUpReport      = "report"       // no [Action Report] posted
	FollowUpPush        = "push"         // review_result: no commits pushed after "changes requested"
	FollowUpReview      = "review"       // review_request, review_updated: no review submitted
)
