package giteatest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// hookEvents is what Gitea 1.25 keeps of the events a hook is created or
// edited with (routers/api/v1/utils/hook.go, updateHookEvents): the names
// it knows, "issues" and "pull_request" standing for every event of their
// group, reviews as the one event "pull_request_review"; anything else is
// dropped. No events means push only. A Forgejo has no commit status
// event (nor Gitea's workflow events): it drops them silently.
func (s *Server) hookEvents(raw any) []string {
	var in []string
	switch v := raw.(type) {
	case []string:
		in = v
	case []any:
		for _, e := range v {
			if s, ok := e.(string); ok {
				in = append(in, s)
			}
		}
	}
	if len(in) == 0 {
		return []string{"push"}
	}
	has := func(e string) bool { return slices.Contains(in, e) }
	var out []string
	for _, e := range []string{"create", "push", "delete", "fork", "repository", "wiki", "release", "package",
		"status", "workflow_run", "workflow_job"} {
		if s.forgejo && (e == "status" || strings.HasPrefix(e, "workflow_")) {
			continue
		}
		if has(e) {
			out = append(out, e)
		}
	}
	groups := []struct {
		all, only string
		members   []string
	}{
		{"issues", "issues_only", []string{"issue_assign", "issue_label", "issue_milestone", "issue_comment"}},
		{"pull_request", "pull_request_only", []string{"pull_request_assign", "pull_request_label", "pull_request_milestone",
			"pull_request_comment", "pull_request_review", "pull_request_review_request", "pull_request_sync"}},
	}
	for _, g := range groups {
		if has(g.all) || has(g.only) {
			out = append(out, g.all)
		}
		for _, m := range g.members {
			if has(g.all) || has(m) {
				out = append(out, m)
			}
		}
	}
	slices.Sort(out)
	return out
}

// AddHook installs a webhook of type gitea as an operator would in
// Gitea's UI; key is "owner/name" or "org:NAME".
func (s *Server) AddHook(key, url, contentType string, events []string, active bool) {
	s.AddHookOfType(key, "gitea", url, contentType, events, active)
}

// AddHookOfType installs a webhook of another type (forgejo, slack…).
func (s *Server) AddHookOfType(key, hookType, url, contentType string, events []string, active bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addHookLocked(key, map[string]any{"type": hookType, "events": s.hookEvents(events), "active": active,
		"config": map[string]any{"url": url, "content_type": contentType}})
}

func (s *Server) addHookLocked(key string, h map[string]any) map[string]any {
	if s.hooks == nil {
		s.hooks = map[string][]map[string]any{}
	}
	s.hookID++
	h["id"] = s.hookID
	s.hooks[key] = append(s.hooks[key], h)
	return h
}

// Hooks returns the webhooks of key ("owner/name" or "org:NAME") with
// their secrets, which Gitea's API never shows.
func (s *Server) Hooks(key string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.hooks[key])
}

func (s *Server) serveHooks(w http.ResponseWriter, r *http.Request, key, id string) {
	var in map[string]any
	if r.Method == http.MethodPost || r.Method == http.MethodPatch {
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, `{"message":"invalid JSON"}`, http.StatusUnprocessableEntity)
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	public := func(h map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range h {
			out[k] = v
		}
		cfg := map[string]any{}
		for k, v := range h["config"].(map[string]any) {
			if k != "secret" {
				cfg[k] = v
			}
		}
		out["config"] = cfg
		return out
	}
	switch {
	case r.Method == http.MethodGet && id == "":
		list := []map[string]any{}
		for _, h := range s.hooks[key] {
			list = append(list, public(h))
		}
		_ = json.NewEncoder(w).Encode(list)
	case r.Method == http.MethodPost && id == "":
		in["events"] = s.hookEvents(in["events"])
		h := s.addHookLocked(key, in)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(public(h))
	case r.Method == http.MethodPatch && id != "":
		for _, h := range s.hooks[key] {
			if fmt.Sprint(h["id"]) != id {
				continue
			}
			// As Gitea 1.25's editHook: url and content type change, the
			// secret does not; events are replaced.
			if cfg, ok := in["config"].(map[string]any); ok {
				for _, k := range []string{"url", "content_type"} {
					if v, ok := cfg[k]; ok {
						h["config"].(map[string]any)[k] = v
					}
				}
			}
			h["events"] = s.hookEvents(in["events"])
			if active, ok := in["active"]; ok {
				h["active"] = active
			}
			_ = json.NewEncoder(w).Encode(public(h))
			return
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"message":"hook not found"}`))
	case r.Method == http.MethodDelete && id != "":
		for i, h := range s.hooks[key] {
			if fmt.Sprint(h["id"]) == id {
				s.hooks[key] = slices.Delete(s.hooks[key], i, i+1)
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"message":"hook not found"}`))
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}
