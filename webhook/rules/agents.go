package rules

import "strings"

// Agent is what the mapper needs to know of a registered agent.
type Agent struct {
	Login string
	Lead  bool // receives round reviews
	Infra bool // receives deploy and infrastructure failures
}

// Agents is the set of registered agents, looked up case-insensitively as
// Gitea logins are.
type Agents struct {
	byLogin map[string]Agent
	infra   string
	lead    string
}

// NewAgents indexes the registered agents.
func NewAgents(list []Agent) Agents {
	a := Agents{byLogin: make(map[string]Agent, len(list))}
	for _, ag := range list {
		a.byLogin[strings.ToLower(ag.Login)] = ag
		if ag.Infra && a.infra == "" {
			a.infra = ag.Login
		}
		if ag.Lead && a.lead == "" {
			a.lead = ag.Login
		}
	}
	return a
}

// Lookup returns the registered agent with this login, in its declared
// spelling.
func (a Agents) Lookup(login string) (Agent, bool) {
	ag, ok := a.byLogin[strings.ToLower(login)]
	return ag, ok
}

// Infra is the agent that handles deploy and infrastructure failures.
func (a Agents) Infra() (string, bool) { return a.infra, a.infra != "" }

// Lead is the lead agent.
func (a Agents) Lead() (string, bool) { return a.lead, a.lead != "" }

// Len is the number of registered agents.
func (a Agents) Len() int { return len(a.byLogin) }
