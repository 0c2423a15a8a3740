package payload

import (
	"encoding/json"
	"time"

	"github.com/moziplus/mozi/repository/task"
)

// The ticker finds what lost webhooks would have said (an issue closed
// while mozi was down, a status Gitea never sent) and feeds it through the
// inbox as a delivery of the same shape, so the same rules apply once.

type synthUser struct {
	Login string `json:"login"`
}

func user(login string) *synthUser {
	if login == "" {
		return nil
	}
	return &synthUser{Login: login}
}

type synthRepo struct {
	FullName string `json:"full_name"`
}

func stampPtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// IssueEventBody is an "issues" delivery body with action for the issue's
// current state; the closer is unknown (no sender).
func IssueEventBody(action string, i task.Issue) ([]byte, error) {
	type label struct {
		Name string `json:"name"`
	}
	labels := make([]label, len(i.Labels))
	for k, l := range i.Labels {
		labels[k] = label{l}
	}
	assignees := make([]*synthUser, len(i.Assignees))
	for k, a := range i.Assignees {
		assignees[k] = user(a)
	}
	return json.Marshal(map[string]any{
		"action": action, "number": i.Number,
		"issue": map[string]any{"number": i.Number, "title": i.Title, "body": i.Body, "state": i.State,
			"user": user(i.Author), "labels": labels, "assignees": assignees,
			"created_at": stampPtr(i.CreatedAt), "updated_at": stampPtr(i.UpdatedAt), "closed_at": stampPtr(i.ClosedAt)},
		"repository": synthRepo{i.Repo}, "sender": map[string]string{"login": ""},
	})
}

// PullClosedBody is a "pull_request closed" delivery body.
func PullClosedBody(p task.PullRequest) ([]byte, error) {
	p.State = task.StateClosed
	return pullBody(ActionClosed, p, "", p.MergedBy)
}

// PullOpenedBody is a "pull_request opened" delivery body for a pull
// request in its current state (its author opened it).
func PullOpenedBody(p task.PullRequest) ([]byte, error) {
	return pullBody(ActionOpened, p, "", p.Author)
}

// ReviewRequestedBody is a "pull_request review_requested" delivery body
// asking reviewer; who asked is unknown (no sender).
func ReviewRequestedBody(p task.PullRequest, reviewer string) ([]byte, error) {
	return pullBody(ActionReviewRequested, p, reviewer, "")
}

func pullBody(action string, p task.PullRequest, requested, sender string) ([]byte, error) {
	reviewers := make([]*synthUser, len(p.RequestedReviewers))
	for k, r := range p.RequestedReviewers {
		reviewers[k] = user(r)
	}
	doc := map[string]any{
		"action": action, "number": p.Number,
		"pull_request": map[string]any{"number": p.Number, "title": p.Title, "body": p.Body, "state": p.State,
			"user": user(p.Author), "head": map[string]string{"ref": p.HeadRef, "sha": p.HeadSHA},
			"base": map[string]string{"ref": p.BaseRef}, "merged": p.Merged, "merged_by": user(p.MergedBy),
			"requested_reviewers": reviewers,
			"updated_at":          stampPtr(p.UpdatedAt), "closed_at": stampPtr(p.ClosedAt)},
		"repository": synthRepo{p.Repo}, "sender": map[string]string{"login": sender},
	}
	if requested != "" {
		doc["requested_reviewer"] = user(requested)
	}
	return json.Marshal(doc)
}

// StatusBody is a "status" delivery body; the reporter is unknown (no
// sender).
func StatusBody(s task.CommitStatus) ([]byte, error) {
	return json.Marshal(map[string]any{
		"id": s.ID, "sha": s.SHA, "context": s.Context, "state": s.State, "target_url": s.TargetURL,
		"description": s.Description, "updated_at": stampPtr(s.UpdatedAt),
		"repository": synthRepo{s.Repo}, "sender": map[string]string{"login": ""},
	})
}

// CommentCreatedBody is an "issue_comment created" delivery body for a
// comment on issue (or pull request) number, sent by its author.
func CommentCreatedBody(repo string, number int, isPull bool, c task.Comment) ([]byte, error) {
	issue := map[string]any{"number": number}
	if isPull {
		issue["pull_request"] = map[string]any{}
	}
	return json.Marshal(map[string]any{
		"action": ActionCreated, "issue": issue, "is_pull": isPull,
		"comment": map[string]any{"id": c.ID, "user": user(c.Author), "body": c.Body,
			"created_at": stampPtr(c.CreatedAt), "updated_at": stampPtr(c.UpdatedAt)},
		"repository": synthRepo{repo}, "sender": user(c.Author),
	})
}
