package main

import (
	"github.com/moziplus/mozi/cmd/mozi/internal/config"
	"github.com/moziplus/mozi/webhook"
)

// webhookAgents is the intake's view of the declared agents.
func webhookAgents(cfg *config.Config) webhook.Agents {
	list := make([]webhook.Agent, 0, len(cfg.Agents))
	for _, a := range cfg.Agents {
		list = append(list, webhook.Agent{Login: a.Login, Lead: a.Lead, Infra: a.Infra})
	}
	return webhook.NewAgents(list)
}
