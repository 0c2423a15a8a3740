package task

import (
	"strconv"
	"time"
)

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

// RoundQuery says whose round to read and from where.
type RoundQuery struct {
	// Agent is the pull request's author, whose last comment there ends
	// its previous turn.
	Agent string
	// Ignore names further authors whose loose comments are not feedback.
	Ignore []string
	// FromComment, when set, is the first loose comment the task was made
	// for: it and later ones belong to the round even when the author
	// commented after them (a turn that was running when they came).
	FromComment int64
}

// ExtraRoundFrom is the Meta.Extra key of a review task's first loose
// comment (RoundQuery.FromComment), as a decimal id.
const ExtraRoundFrom = "round_from"

// ExtraRoundNext is the Meta.Extra key of a running review_comment
// task's first loose comment that came after its prompt was read: the
// turn's [Action Report] starts the next round there.
const ExtraRoundNext = "round_next"

// RoundFrom is the first loose comment a review task was made for, 0 when
// none.
func (m Meta) RoundFrom() int64 {
	id, _ := strconv.ParseInt(m.Extra[ExtraRoundFrom], 10, 64)
	return id
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
