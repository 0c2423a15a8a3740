package console

import (
	"cmp"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/task"
)

// AgentLimits are an agent's configured limits, as the agents page shows
// them beside what the agent used. The console gets them as plain values
// from mozi serve, not from its configuration package.
type AgentLimits struct {
	Login string
	// MaxConcurrency caps its simultaneous runs across replicas.
	MaxConcurrency int
	// MaxCostUSD and MaxTokens stop one run that reports more (0: none).
	MaxCostUSD float64
	MaxTokens  int64
	Disabled   bool
}

// budgetWindow is the spawn budget's window (the dispatcher's: a day).
const budgetWindow = 24 * time.Hour

// agentRow is one agent on the agents page.
type agentRow struct {
	repository.AgentWork
	Limits     AgentLimits
	Configured bool
	Pending    int // queued and held
	Held       string
	Waiting    string
	WaitingN   int
	Cost       string // the window's, in dollars
	RunLimits  string // per-run cost and token caps ("" when none)
	Pause      *repository.AgentPause
	// PausedForAPerson: the credential's daily cap of unattended resumes
	// is spent; the agents wait for mozi task resume.
	PausedForAPerson bool
}

type agentsData struct {
	Agents      []agentRow
	SpawnBudget int
	Window      time.Duration
	Breakers    []repository.Breaker
}

// agents shows each agent's live work, what its tasks wait for, its
// budgets used and whether it is paused, and the open circuit breakers
// of readable repositories. The per-agent figures are counts across
// repositories, which say nothing of a repository's tasks, so every
// signed-in user (or allowed anonymous reader) sees them; a breaker
// names its repository and is shown only to who can read it.
func (s *Server) agents(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	works, err := s.store.AgentWorks(ctx, budgetWindow)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	pauses, err := s.store.AgentPauses(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	breakers, err := s.store.OpenBreakerList(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d := agentsData{Agents: s.agentRows(works, pauses), SpawnBudget: s.cfg.SpawnsPerAgentPerDay, Window: budgetWindow}
	v := viewerOf(ctx)
	for _, b := range breakers {
		p, err := s.permission(ctx, v, b.Repo)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if p.Read {
			d.Breakers = append(d.Breakers, b)
		}
	}
	s.render(w, r, "agents", d)
}

// agentRows are the configured agents and any other agent with work or
// pauses, by name.
func (s *Server) agentRows(works map[string]*repository.AgentWork, pauses []repository.AgentPause) []agentRow {
	rows := map[string]*agentRow{}
	row := func(login string) *agentRow {
		if rows[login] == nil {
			rows[login] = &agentRow{AgentWork: repository.AgentWork{Agent: login}, Limits: AgentLimits{Login: login}}
		}
		return rows[login]
	}
	for _, l := range s.cfg.Agents {
		a := row(l.Login)
		a.Limits, a.Configured = l, true
	}
	for login, w := range works {
		row(login).AgentWork = *w
	}
	for _, p := range pauses {
		a := row(p.Agent)
		a.Pause = &p
		a.PausedForAPerson = !p.Until.Before(task.HeldForAPerson)
	}
	out := make([]agentRow, 0, len(rows))
	for _, login := range slices.Sorted(maps.Keys(rows)) {
		a := rows[login]
		a.Held = breakdown(a.AgentWork.Held)
		a.Waiting = breakdown(a.AgentWork.Waiting)
		for _, n := range a.AgentWork.Held {
			a.Pending += n
		}
		for _, n := range a.AgentWork.Waiting {
			a.WaitingN += n
		}
		a.Pending += a.Queued
		a.Cost = fmt.Sprintf("$%.2f", a.CostUSD)
		a.RunLimits = runLimits(a.Limits)
		out = append(out, *a)
	}
	return out
}

// breakdown writes counts by reason as "gitea 2, budget 1", largest first.
func breakdown[K ~string](m map[K]int) string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b K) int { return cmp.Or(m[b]-m[a], strings.Compare(string(a), string(b))) })
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// runLimits writes an agent's per-run caps.
func runLimits(l AgentLimits) string {
	var parts []string
	if l.MaxCostUSD > 0 {
		parts = append(parts, fmt.Sprintf("$%.2f", l.MaxCostUSD))
	}
	if l.MaxTokens > 0 {
		parts = append(parts, fmt.Sprintf("%d tokens", l.MaxTokens))
	}
	return strings.Join(parts, ", ")
}
