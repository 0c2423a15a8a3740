package console

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/task"
)

//go:embed templates/*.html templates/console.js
var files embed.FS

type pages struct {
	byName map[string]*template.Template
}

var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"dur": func(d time.Duration) string { return d.Round(time.Millisecond).String() },
	"exit": func(c *int) string {
		if c == nil {
			return "–"
		}
		return strconv.Itoa(*c)
	},
	"cost": func(c *float64) string {
		if c == nil {
			return "–"
		}
		return fmt.Sprintf("$%.4f", *c)
	},
}

func parsePages() (*pages, error) {
	p := &pages{byName: map[string]*template.Template{}}
	for _, name := range []string{"tasks", "task", "run", "deliveries", "agents"} {
		t, err := template.New(name).Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console templates: %w", err)
		}
		p.byName[name] = t
	}
	return p, nil
}

// page is what every template gets: the viewer, the page's data, links.
type page struct {
	Viewer viewer
	Gitea  string
	Data   any
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	err := s.pages.byName[name].ExecuteTemplate(w, "layout", page{Viewer: viewerOf(r.Context()),
		Gitea: s.cfg.BrowserGiteaURL, Data: data})
	if err != nil {
		s.log.Error("console render", "page", name, "error", err)
	}
}

type taskListData struct {
	Tasks    []task.Task
	Repos    []string
	Filter   url.Values
	Next     string // the next page's query, "" on the last
	Statuses []task.Status
	Actions  []task.ActionType
}

const pageSize = 50

// taskList is the tasks page: newest first, filtered, only of readable
// repositories, paged by id.
func (s *Server) taskList(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	f := repository.TaskPage{Repo: q.Get("repo"), Agent: q.Get("agent"), Limit: pageSize + 1}
	if v := q.Get("status"); v != "" {
		st, err := task.ParseStatus(v)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.Status = st
	}
	if v := q.Get("action"); v != "" {
		a, err := task.ParseActionType(v)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.ActionType = a
	}
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			http.Error(w, "before: not a task id", http.StatusBadRequest)
			return
		}
		f.Before = n
	}
	all, err := s.store.TaskRepos(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if f.Repos, err = s.readable(ctx, viewerOf(ctx), all); err != nil {
		s.fail(w, r, err)
		return
	}
	tasks, err := s.store.TasksPage(ctx, f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d := taskListData{Tasks: tasks, Repos: f.Repos, Filter: q, Statuses: task.Statuses, Actions: task.ActionTypes}
	if len(tasks) > pageSize {
		d.Tasks = tasks[:pageSize]
		next := url.Values{}
		for k, v := range q {
			next[k] = v
		}
		next.Set("before", strconv.FormatInt(d.Tasks[pageSize-1].ID, 10))
		d.Next = next.Encode()
	}
	s.render(w, r, "tasks", d)
}

// visibleTask reads a task the viewer may read; one the viewer may not
// read is as absent as one that does not exist.
func (s *Server) visibleTask(w http.ResponseWriter, r *http.Request) (task.Task, perm, bool) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id <= 0 {
		http.Error(w, "not a task id", http.StatusBadRequest)
		return task.Task{}, perm{}, false
	}
	t, err := s.store.Task(r.Context(), id)
	if errors.Is(err, task.ErrNotFound) {
		http.NotFound(w, r)
		return task.Task{}, perm{}, false
	}
	if err != nil {
		s.fail(w, r, err)
		return task.Task{}, perm{}, false
	}
	p, err := s.permission(r.Context(), viewerOf(r.Context()), t.Repo)
	if err != nil {
		s.fail(w, r, err)
		return task.Task{}, perm{}, false
	}
	if !p.Read {
		http.NotFound(w, r)
		return task.Task{}, perm{}, false
	}
	return t, p, true
}

type taskData struct {
	Task     task.Task
	Events   []repository.TaskEvent
	Attempts []task.Attempt
	Prompts  []attemptPrompt
	CanWrite bool
	Live     bool
	Failed   bool
}

func (s *Server) taskPage(w http.ResponseWriter, r *http.Request) {
	t, p, ok := s.visibleTask(w, r)
	if !ok {
		return
	}
	events, err := s.store.TaskEvents(r.Context(), t.ID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	attempts, err := s.store.Attempts(r.Context(), t.ID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	prompts, err := s.store.AttemptPrompts(r.Context(), t.ID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, "task", taskData{Task: t, Events: events, Attempts: attempts, Prompts: promptsOf(attempts, prompts),
		CanWrite: p.Write, Live: !t.Status.Terminal(),
		Failed: t.Status == task.StatusFailed || t.Status == task.StatusCancelled})
}

type deliveriesData struct {
	Deliveries []repository.Delivery
	Failed     bool
	Writable   map[string]bool
}

// deliveries lists the inbox (or only its failed and parked deliveries),
// of readable repositories.
func (s *Server) deliveries(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	v := viewerOf(ctx)
	failed := r.URL.Query().Get("failed") != ""
	list, err := s.store.ListDeliveries(ctx, repository.DeliveryFilter{Failed: failed, Limit: 200})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d := deliveriesData{Failed: failed, Writable: map[string]bool{}}
	for _, del := range list {
		if del.Repo == "" {
			continue // an organisation's or the instance's event: no repository to check access on
		}
		p, err := s.permission(ctx, v, del.Repo)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if p.Read {
			d.Deliveries = append(d.Deliveries, del)
			d.Writable[del.Repo] = p.Write
		}
	}
	s.render(w, r, "deliveries", d)
}

func serveScript(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	http.ServeFileFS(w, r, files, "templates/console.js")
}
