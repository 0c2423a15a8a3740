package main

import (
	"fmt"

	"github.com/moziplus/mozi/cmd/mozi/internal/config"
	"github.com/moziplus/mozi/prompts"
	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/gitea"
	"github.com/moziplus/mozi/templates"
	"github.com/moziplus/mozi/webhook/rules"
)

// webhookAgents is the intake's view of the declared agents.
func webhookAgents(cfg *config.Config) rules.Agents {
	list := make([]rules.Agent, 0, len(cfg.Agents))
	for _, a := range cfg.Agents {
		list = append(list, rules.Agent{Login: a.Login, Lead: a.Lead, Infra: a.Infra})
	}
	return rules.NewAgents(list)
}

// promptAgent is what prompts say about a declared agent.
func promptAgent(a config.Agent) (prompts.Agent, error) {
	role, err := prompts.ReadRole(a.RoleFiles)
	if err != nil {
		return prompts.Agent{}, fmt.Errorf("agent %s: %w", a.Login, err)
	}
	return prompts.Agent{Login: a.Login, Workdir: a.Workdir, TokenEnv: a.TokenEnv, Role: role, Skills: a.Skills}, nil
}

// leadLogin is the lead agent's login, "" when none is declared.
func leadLogin(cfg *config.Config) string {
	for _, a := range cfg.Agents {
		if a.Lead {
			return a.Login
		}
	}
	return ""
}

// agentLogins lists the declared agents' logins.
func agentLogins(cfg *config.Config) []string {
	out := make([]string, len(cfg.Agents))
	for i, a := range cfg.Agents {
		out[i] = a.Login
	}
	return out
}

// newAssembler builds the one prompt assembler of serve and prompt render.
func newAssembler(cfg *config.Config, set *templates.Set, reader *gitea.IssueReader, store *repository.Store, client *gitea.Client) (*prompts.Assembler, error) {
	profiles := map[string]prompts.Agent{}
	for _, a := range cfg.Agents {
		pa, err := promptAgent(a)
		if err != nil {
			return nil, err
		}
		profiles[a.Login] = pa
	}
	var logs prompts.CILogReader
	if client != nil {
		logs = client
	}
	return prompts.NewAssembler(prompts.AssemblerConfig{Set: set, Reader: reader, Attempts: store,
		Agents: profiles, GiteaURL: cfg.Gitea.URL, Lead: leadLogin(cfg), Reviews: reader, BotUser: cfg.Gitea.BotUser,
		CILogs: logs, LogTailLines: cfg.CI.LogTailLines, MaxRepairRounds: cfg.CI.MaxRepairRounds}), nil
}
