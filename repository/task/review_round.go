package task

import "time"

// ReviewRound is what people said on a pull request since its author's
// last turn: the reviews submitted, each with its inline comments, and the
// loose comments. The author answers the whole round in one run.
type ReviewRound struct {
	Reviews []RoundReview
	Loose   []Comment
	// Since is the author's last comment on the pull request (zero: it
	// never commented there): the round is what came after it.
	Since time.Time
}

// Empty reports whether the round holds nothing to answer.
func (r ReviewRound) Empty() bool { return len(r.Reviews) == 0 && len(r.Loose) == 0 }

// RoundReview is one submitted review of a round.
type RoundReview struct {
	ID       int64
	Reviewer string
	State    string // Gitea's: APPROVED, REQUEST_CHANGES, COMMENT
	Body     string
	At       time.Time
	Comments []LineComment
}

// LineComment is an inline review comment: where in the diff it is and
// what it says.
type LineComment struct {
	ID   int64
	Path string
	// Line is its line in the new file (Gitea's position); OldLine its
	// line in the old one (original_position) for a comment on a removed
	// line. Zero when Gitea does not say.
	Line, OldLine int
	DiffHunk      string
	Body          string
}
