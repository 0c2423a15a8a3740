package giteatest

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
)

// reviewCommentsRE is a review's inline comments, below the repository.
var reviewCommentsRE = regexp.MustCompile(`^/pulls/(\d+)/reviews/(\d+)/comments$`)

// serveReviewComments lists a review's inline comments. The fake's
// reviews have none (they are submitted without comments[]): an empty
// list for a review it knows, 404 as Gitea for one it does not.
func (s *Server) serveReviewComments(w http.ResponseWriter, rest string) {
	m := reviewCommentsRE.FindStringSubmatch(rest)
	n, _ := strconv.Atoi(m[1])
	s.mu.Lock()
	defer s.mu.Unlock()
	reviews, ok := s.pullReviews(n)
	if !ok {
		s.notFound(w)
		return
	}
	for _, x := range reviews {
		if fmt.Sprint(x["id"]) == m[2] {
			s.json(w, http.StatusOK, []map[string]any{})
			return
		}
	}
	s.notFound(w)
}
