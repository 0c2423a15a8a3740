package task

import "strings"

// WaitReason says what a waiting task waits for a person about.
type WaitReason string

// Wait reasons.
const (
	WaitQuestion WaitReason = "question" // its agent asked a question in its [Action Report]
	WaitCIRed    WaitReason = "ci_red"   // its pull request is still red after the last repair round
)

// HeldForCI is the hold of a reviewer's task while its pull request's head
// is red or pending: reviewer runs are not spent on a red pull request.
const HeldForCI HoldReason = "ci"

// ReportQuestionField is the [Action Report] field in which an agent that
// cannot go on without a person's answer asks its question.
const ReportQuestionField = "question"

// ReportQuestion returns the question of a parsed [Action Report] ("" when
// it asks none). Field names are matched case-insensitively, and "none",
// "n/a" or "-" mean no question.
func ReportQuestion(fields map[string]string) string {
	for name, v := range fields {
		if !strings.EqualFold(strings.TrimSpace(name), ReportQuestionField) {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.ToLower(v) {
		case "", "none", "n/a", "-", "无":
			return ""
		}
		return v
	}
	return ""
}

// DefaultMaxRepairRounds is how many ci_failure tasks (repair rounds) a
// pull request gets before its task waits for a person.
const DefaultMaxRepairRounds = 2

// DefaultLogTailLines is how many last lines of a failed Actions job's log
// a repair round's prompt carries.
const DefaultLogTailLines = 80
