package console

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/task"
)

// writableTask reads the task of an action: the viewer must be signed in,
// send the session's CSRF token and have write access to its repository.
func (s *Server) writableTask(w http.ResponseWriter, r *http.Request) (task.Task, viewer, bool) {
	v := viewerOf(r.Context())
	if !checkCSRF(w, r, v) {
		return task.Task{}, v, false
	}
	t, p, ok := s.visibleTask(w, r)
	if !ok {
		return task.Task{}, v, false
	}
	if !p.Write {
		http.Error(w, "refused: you need write access to "+t.Repo, http.StatusForbidden)
		return task.Task{}, v, false
	}
	return t, v, true
}

// stop cancels a live task: the engine stops a running agent whose task
// someone else ended, as it does when the issue is unassigned.
func (s *Server) stop(w http.ResponseWriter, r *http.Request) {
	t, v, ok := s.writableTask(w, r)
	if !ok {
		return
	}
	s.act(w, r, v, "stop", "task "+strconv.FormatInt(t.ID, 10), "/tasks/"+strconv.FormatInt(t.ID, 10),
		func(tx *repository.Tx) (bool, error) {
			res, err := tx.Apply(r.Context(), t.ID, task.EventCancel, repository.Change{
				Error: "stopped from the console by " + v.Login, Actor: "console:" + v.Login})
			return res.Applied, err
		})
}

// retry puts a failed or cancelled task back to pending, as mozi task
// retry does.
func (s *Server) retry(w http.ResponseWriter, r *http.Request) {
	t, v, ok := s.writableTask(w, r)
	if !ok {
		return
	}
	s.act(w, r, v, "retry", "task "+strconv.FormatInt(t.ID, 10), "/tasks/"+strconv.FormatInt(t.ID, 10),
		func(tx *repository.Tx) (bool, error) {
			res, err := tx.Apply(r.Context(), t.ID, task.EventRequeue, repository.Change{})
			return res.Applied, err
		})
}

// requeue puts a parked or failing delivery back in the inbox.
func (s *Server) requeue(w http.ResponseWriter, r *http.Request) {
	v := viewerOf(r.Context())
	if !checkCSRF(w, r, v) {
		return
	}
	id := chi.URLParam(r, "id")
	d, err := s.store.Delivery(r.Context(), id)
	if errors.Is(err, task.ErrNotFound) {
		http.NotFound(w, r)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p := perm{}
	if d.Repo != "" {
		if p, err = s.permission(r.Context(), v, d.Repo); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	if !p.Read {
		http.NotFound(w, r)
		return
	}
	if !p.Write {
		http.Error(w, "refused: you need write access to "+d.Repo, http.StatusForbidden)
		return
	}
	s.act(w, r, v, "requeue", "delivery "+id, "/deliveries?failed=1", func(tx *repository.Tx) (bool, error) {
		return tx.RequeueDelivery(r.Context(), id)
	})
}

// act runs an action as the viewer and goes back to where it came from;
// an action that found nothing to do (the task had moved on) says so.
func (s *Server) act(w http.ResponseWriter, r *http.Request, v viewer, action, target, back string,
	fn func(tx *repository.Tx) (bool, error)) {
	applied, err := s.store.ConsoleAction(r.Context(), v.Login, action, target, fn)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("console action", "login", v.Login, "action", action, "target", target, "applied", applied)
	if !applied {
		http.Error(w, fmt.Sprintf("%s of %s did nothing: it is no longer in a state that allows it (reload)", action, target),
			http.StatusConflict)
		return
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}
