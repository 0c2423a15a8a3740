package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/cmd/internal/memory"
	"github.com/moziplus/mozi/dispatcher"
	"github.com/moziplus/mozi/repository/gitea"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/spawner"
	"github.com/moziplus/mozi/spawner/backend/local/workspace"
	"github.com/moziplus/mozi/templates"
	"github.com/moziplus/mozi/ticker"
	"github.com/moziplus/mozi/webhook"
	"github.com/moziplus/mozi/webhook/rules"
)

// A configuration that says nothing gets each package's own defaults, so
// that mozi serve and a package used on its own (tests, mozi-bench) agree.
func TestEmptyConfigGetsTheOwningPackagesDefaults(t *testing.T) {
	cfg, err := Parse("empty.yaml", []byte("agents: [{login: coder1, command: [agent]}]\n"))
	require.NoError(t, err)
	require.Len(t, cfg.Agents, 1)
	a := cfg.Agents[0]
	w, d, sp, tk := cfg.Webhook, cfg.Dispatcher, cfg.Spawner, cfg.Ticker
	require.NotNil(t, d.MaxRetries)
	require.NotNil(t, sp.FailureComment)
	tests := []struct {
		key       string
		got, want any
	}{
		{"listen", cfg.Listen, DefaultListen},
		{"memory_limit", int64(cfg.MemoryLimit), int64(memory.DefaultLimit)},
		{"database.max_conns", cfg.Database.MaxConns, DefaultDatabaseMaxConns},
		{"gitea.bot_user", cfg.Gitea.BotUser, rules.DefaultBotUser},
		{"gitea.timeout", cfg.Gitea.Timeout, gitea.DefaultTimeout},
		{"gitea.rate_per_second", cfg.Gitea.RatePerSecond, float64(gitea.DefaultRatePerSecond)},
		{"gitea.burst", cfg.Gitea.Burst, gitea.DefaultBurst},
		{"webhook.max_body_bytes", w.MaxBodyBytes, int64(webhook.DefaultMaxBodyBytes)},
		{"webhook.max_pending_bytes", int64(w.MaxPendingBytes), int64(webhook.DefaultMaxPendingBytes)},
		{"webhook.max_attempts", w.MaxAttempts, webhook.DefaultMaxAttempts},
		{"webhook.task_budget_per_hour", w.TaskBudgetPerHour, rules.DefaultTaskBudgetPerHour},
		{"webhook.max_mention_hops", w.MaxMentionHops, rules.DefaultMaxMentionHops},
		{"webhook.discussion_grace", w.DiscussionGrace, rules.DefaultDiscussionGrace},
		{"webhook.discuss_label", w.DiscussLabel, rules.DefaultDiscussLabel},
		{"webhook.deploy_context", w.DeployContext, rules.DefaultDeployContext},
		{"webhook.infra_context", w.InfraContext, rules.DefaultInfraContext},
		{"webhook.circuit_breaker.comments", w.CircuitBreaker.Comments, rules.DefaultBreakerComments},
		{"webhook.circuit_breaker.window", w.CircuitBreaker.Window, rules.DefaultBreakerWindow},
		{"webhook.circuit_breaker.cooldown", w.CircuitBreaker.Cooldown, rules.DefaultBreakerCooldown},
		{"templates.locale", cfg.Templates.Locale, templates.DefaultLocale},
		{"log.level", cfg.Log.Level, DefaultLogLevel},
		{"log.format", cfg.Log.Format, DefaultLogFormat},
		{"dispatcher.max_concurrency", d.MaxConcurrency, dispatcher.DefaultMaxConcurrency},
		{"dispatcher.lease_ttl", d.LeaseTTL, dispatcher.DefaultLeaseTTL},
		{"dispatcher.poll_interval", d.PollInterval, dispatcher.DefaultPollInterval},
		{"dispatcher.spawns_per_issue_per_day", d.SpawnsPerIssuePerDay, dispatcher.DefaultSpawnsPerIssuePerDay},
		{"dispatcher.spawns_per_agent_per_day", d.SpawnsPerAgentPerDay, dispatcher.DefaultSpawnsPerAgentPerDay},
		{"dispatcher.hold_base", d.HoldBase, dispatcher.DefaultHoldBase},
		{"dispatcher.hold_max", d.HoldMax, dispatcher.DefaultHoldMax},
		{"dispatcher.max_retries", *d.MaxRetries, task.DefaultMaxRetries},
		{"spawner.kill_grace", sp.KillGrace, spawner.DefaultKillGrace},
		{"spawner.shutdown_grace", sp.ShutdownGrace, DefaultShutdownGrace},
		{"spawner.failure_comment", *sp.FailureComment, true},
		{"spawner.output_tail_bytes", sp.OutputTailBytes, spawner.DefaultTailBytes},
		{"spawner.retry_base", sp.RetryBase, spawner.DefaultRetryBase},
		{"spawner.retry_max", sp.RetryMax, spawner.DefaultRetryMax},
		{"ticker.leader_ttl", tk.LeaderTTL, ticker.DefaultLeaderTTL},
		{"ticker.sweep_every", tk.SweepEvery, ticker.DefaultSweepEvery},
		{"ticker.reconcile_every", tk.ReconcileEvery, ticker.DefaultReconcileEvery},
		{"ticker.status_poll_every", tk.StatusPollEvery, ticker.DefaultStatusesEvery},
		{"ticker.retention", tk.Retention, ticker.DefaultRetention},
		{"ticker.watchdog_quiet", tk.WatchdogQuiet, ticker.DefaultWatchdogQuiet},
		{"agents[].max_concurrency", a.MaxConcurrency, dispatcher.DefaultAgentConcurrency},
		{"agents[].timeout", a.Timeout, spawner.DefaultTimeout},
		{"agents[].workspace", a.Workspace, WorkspaceAuto},
		{"agents[].sandbox", a.Sandbox, SandboxBwrap},
		{"agents[].limits.memory", a.Limits.Memory, DefaultAgentMemory},
		{"agents[].limits.processes", a.Limits.Processes, DefaultAgentProcesses},
		{"agents[].limits.cpu_time", a.Limits.CPUTime, DefaultAgentCPUTime},
		{"agents[].limits.open_files", a.Limits.OpenFiles, DefaultAgentOpenFiles},
		{"workspace.keep_finished", cfg.Workspace.KeepFinished, workspace.DefaultKeepFinished},
		{"workspace.sweep_every", cfg.Workspace.SweepEvery, workspace.DefaultSweepEvery},
		{"workspace.checkouts_per_repo", cfg.Workspace.CheckoutsPerRepo, workspace.DefaultCheckoutsPerRepo},
		{"sandbox.bwrap", cfg.Sandbox.Bwrap, DefaultBwrap},
		{"sandbox.user", cfg.Sandbox.User, DefaultSandboxUser},
	}
	for _, tt := range tests {
		assert.EqualValues(t, tt.want, tt.got, tt.key)
		assert.NotZero(t, tt.got, "%s has a default", tt.key)
	}
}
