package payload

// Actions of Gitea's events (Event.Action) that mozi's rules tell apart.
// An event's action is free text from Gitea: these are the ones with a
// rule of their own; others fall to their kind's default.
const (
	ActionOpened               = "opened"
	ActionEdited               = "edited"
	ActionClosed               = "closed"
	ActionReopened             = "reopened"
	ActionAssigned             = "assigned"
	ActionUnassigned           = "unassigned"
	ActionLabelUpdated         = "label_updated"
	ActionCreated              = "created" // a comment
	ActionSynchronized         = "synchronized"
	ActionReviewRequested      = "review_requested"
	ActionReviewRequestRemoved = "review_request_removed"
)

// Review verdicts (Review.Verdict).
const (
	VerdictApproved = "approved"
	VerdictRejected = "rejected" // changes requested
	VerdictComment  = "comment"
)
