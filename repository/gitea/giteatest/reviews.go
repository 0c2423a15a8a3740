package giteatest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// Review states as Gitea's API names them.
const (
	reviewRequest  = "REQUEST_REVIEW"
	reviewApproved = "APPROVED"
	reviewRejected = "REQUEST_CHANGES"
	reviewComment  = "COMMENT"
	reviewPending  = "PENDING"
)

// pullReviews are a recorded pull request's reviews, loaded at first use;
// the caller holds s.mu. ok is false when there is no such pull request.
func (s *Server) pullReviews(n int) (reviews []map[string]any, ok bool) {
	if r, ok := s.reviews[n]; ok {
		return r, true
	}
	var pr map[string]any
	if !s.load(fmt.Sprintf("pull-%d", n), &pr) {
		return nil, false
	}
	s.load(fmt.Sprintf("pull-%d-reviews", n), &reviews)
	s.reviews[n] = reviews
	return reviews, true
}

func reviewer(r map[string]any) string {
	u, _ := r["user"].(map[string]any)
	login, _ := u["login"].(string)
	return login
}

// requestedReviewers is what Gitea 1.25 puts in a pull request's
// requested_reviewers (models/issues/pull.go, LoadRequestedReviewers):
// the latest review of each reviewer, of any kind Gitea counts, dismissed
// ones left out — answered reviews as well as pending requests.
func requestedReviewers(reviews []map[string]any) []any {
	var order []string
	users := map[string]any{}
	for _, r := range reviews {
		login := reviewer(r)
		if login == "" || r["dismissed"] == true || !slices.Contains([]any{reviewRequest, reviewApproved, reviewRejected, reviewComment}, r["state"]) {
			continue
		}
		order = slices.DeleteFunc(order, func(l string) bool { return l == login })
		order = append(order, login)
		users[login] = r["user"]
	}
	out := []any{}
	for _, login := range order {
		out = append(out, users[login])
	}
	return out
}

// pull answers a recorded pull request, its requested_reviewers made of
// its reviews as Gitea makes them.
func (s *Server) pull(w http.ResponseWriter, n int) {
	var pr map[string]any
	if !s.load(fmt.Sprintf("pull-%d", n), &pr) {
		s.notFound(w)
		return
	}
	s.mu.Lock()
	reviews, _ := s.pullReviews(n)
	pr["requested_reviewers"] = requestedReviewers(reviews)
	s.mu.Unlock()
	s.json(w, http.StatusOK, pr)
}

// serveReviews lists a pull request's reviews (paged, oldest first) or
// submits one as login. As Gitea: a submitted review (not a draft) ends
// the reviewer's pending request, and an approval or a rejection
// dismisses the reviewer's earlier ones.
func (s *Server) serveReviews(w http.ResponseWriter, r *http.Request, n int, login string) {
	var in struct {
		Event string `json:"event"`
		Body  string `json:"body"`
	}
	if r.Method == http.MethodPost {
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			s.message(w, http.StatusUnprocessableEntity, "invalid JSON", nil)
			return
		}
		if !slices.Contains([]string{reviewApproved, reviewRejected, reviewComment, reviewPending}, in.Event) {
			s.message(w, http.StatusUnprocessableEntity, "unknown review event "+in.Event, nil)
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	reviews, ok := s.pullReviews(n)
	switch {
	case !ok:
		s.notFound(w)
	case r.Method == http.MethodGet:
		list := slices.Clone(reviews)
		if list == nil {
			list = []map[string]any{}
		}
		s.json(w, http.StatusOK, page(r, list))
	case r.Method == http.MethodPost:
		if in.Event != reviewPending {
			reviews = slices.DeleteFunc(reviews, func(x map[string]any) bool {
				return reviewer(x) == login && x["state"] == reviewRequest
			})
		}
		if in.Event == reviewApproved || in.Event == reviewRejected {
			for _, x := range reviews {
				if reviewer(x) == login && (x["state"] == reviewApproved || x["state"] == reviewRejected) {
					x["dismissed"] = true
				}
			}
		}
		review := s.newReviewLocked(login, in.Event, in.Body)
		s.reviews[n] = append(reviews, review)
		s.json(w, http.StatusOK, review)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

// serveReviewRequests asks reviewers for a review (POST) or withdraws the
// request (DELETE). Asking a reviewer whose request is pending changes
// nothing.
func (s *Server) serveReviewRequests(w http.ResponseWriter, r *http.Request, n int) {
	var in struct {
		Reviewers []string `json:"reviewers"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		s.message(w, http.StatusUnprocessableEntity, "invalid JSON", nil)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	reviews, ok := s.pullReviews(n)
	if !ok {
		s.notFound(w)
		return
	}
	switch r.Method {
	case http.MethodPost:
		created := []map[string]any{}
		for _, login := range in.Reviewers {
			pending := false
			for _, x := range reviews {
				if reviewer(x) == login && x["state"] == reviewRequest {
					pending = true
				}
			}
			if !pending {
				review := s.newReviewLocked(login, reviewRequest, "")
				reviews = append(reviews, review)
				created = append(created, review)
			}
		}
		s.reviews[n] = reviews
		s.json(w, http.StatusCreated, created)
	case http.MethodDelete:
		s.reviews[n] = slices.DeleteFunc(reviews, func(x map[string]any) bool {
			return slices.Contains(in.Reviewers, reviewer(x)) && x["state"] == reviewRequest
		})
		w.WriteHeader(http.StatusNoContent)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func (s *Server) newReviewLocked(login, state, body string) map[string]any {
	s.nextID++
	review := map[string]any{"id": s.nextID, "user": map[string]any{"login": login, "username": login}, "state": state,
		"body": body, "dismissed": false, "stale": false, "official": false}
	if state != reviewPending && state != reviewRequest {
		review["submitted_at"] = time.Now().UTC().Format(time.RFC3339) // Gitea's: a submitted review's
	}
	return review
}
