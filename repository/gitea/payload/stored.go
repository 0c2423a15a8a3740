package payload

import (
	"errors"
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/moziplus/mozi/repository/task"
)

// storedEventVersion is the first byte of an encoded event. Bump it
// whenever Parse fills an Event differently (a new field, a fix): events
// encoded by an older mozi are then refused by DecodeEvent, and their
// deliveries parsed again from the body.
const storedEventVersion = 1

// storedEvent is an Event as the inbox keeps it.
type storedEvent struct {
	Kind              Kind               `json:"kind"`
	Action            string             `json:"action"`
	Repo              string             `json:"repo"`
	Sender            string             `json:"sender,omitempty"`
	Issue             *task.Issue        `json:"issue,omitempty"`
	PullRequest       *task.PullRequest  `json:"pull_request,omitempty"`
	Comment           *task.Comment      `json:"comment,omitempty"`
	Review            *Review            `json:"review,omitempty"`
	Status            *task.CommitStatus `json:"status,omitempty"`
	RequestedReviewer string             `json:"requested_reviewer,omitempty"`
	IssueBodyDigest   []byte             `json:"issue_body_digest,omitempty"`
}

// Options that make nil slices and maps come back nil.
var storedOptions = jsonv2.JoinOptions(jsonv2.FormatNilSliceAsNull(true), jsonv2.FormatNilMapAsNull(true))

// Encode writes the event as the inbox keeps it beside the delivery's
// body, so that processing need not read and parse the body again: what
// Parse made of it, its issue body as mozi keeps it included, in a few
// KiB whatever the body's size. DecodeEvent reads it back.
func (e Event) Encode() ([]byte, error) {
	s := storedEvent{Kind: e.Kind, Action: e.Action, Repo: e.Repo, Sender: e.Sender, Issue: e.Issue,
		PullRequest: e.PullRequest, Comment: e.Comment, Review: e.Review, Status: e.Status,
		RequestedReviewer: e.RequestedReviewer, IssueBodyDigest: e.issueBodyDigest}
	out, err := jsonv2.Marshal(s, storedOptions)
	if err != nil {
		return nil, fmt.Errorf("encode %s event: %w", e.Kind, err)
	}
	return append([]byte{storedEventVersion}, out...), nil
}

// ErrStaleEvent means an encoded event was written by a mozi that parsed
// differently: parse the delivery's body again.
var ErrStaleEvent = errors.New("event encoded by another version of mozi")

// DecodeEvent reads an event written by Encode.
func DecodeEvent(b []byte) (Event, error) {
	if len(b) == 0 || b[0] != storedEventVersion {
		return Event{}, ErrStaleEvent
	}
	var s storedEvent
	if err := jsonv2.Unmarshal(b[1:], &s, storedOptions); err != nil {
		return Event{}, fmt.Errorf("decode stored event: %s", jsonProblem(err))
	}
	return Event{Kind: s.Kind, Action: s.Action, Repo: s.Repo, Sender: s.Sender, Issue: s.Issue,
		PullRequest: s.PullRequest, Comment: s.Comment, Review: s.Review, Status: s.Status,
		RequestedReviewer: s.RequestedReviewer, issueBodyDigest: s.IssueBodyDigest}, nil
}
