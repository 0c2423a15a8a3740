// Package config loads mozi's configuration: one YAML file (unknown keys
// are errors, reported with file, line and key; validation reports every
// problem at once, in file order) plus environment overrides
// for everything secret or deployment-specific. Secrets are held in the
// Secret type, which never prints its value.
package config

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/moziplus/mozi/cmd/internal/memory"
	"github.com/moziplus/mozi/dispatcher"
	"github.com/moziplus/mozi/repository/gitea"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/spawner"
	"github.com/moziplus/mozi/spawner/backend/container"
	"github.com/moziplus/mozi/spawner/backend/local/workspace"
	"github.com/moziplus/mozi/templates"
	"github.com/moziplus/mozi/templates/yamlpos"
	"github.com/moziplus/mozi/ticker"
	"github.com/moziplus/mozi/webhook"
	"github.com/moziplus/mozi/webhook/rules"
)

// Environment variables that override the file.
const (
	EnvConfig        = "MOZI_CONFIG"
	EnvDatabaseURL   = "MOZI_DATABASE_URL"
	EnvListen        = "MOZI_LISTEN"
	EnvGiteaURL      = "MOZI_GITEA_URL"
	EnvPublicURL     = "MOZI_PUBLIC_URL"
	EnvGiteaToken    = "MOZI_GITEA_TOKEN"
	EnvWebhookSecret = "MOZI_WEBHOOK_SECRET"
	EnvDataDir       = "MOZI_DATA_DIR"
	EnvLogLevel      = "MOZI_LOG_LEVEL"
)

// DefaultFile is read from the working directory when no file is named.
const DefaultFile = "mozi.yaml"

// Config is the whole configuration. Zero values mean "default"; Load fills
// the defaults in.
type Config struct {
	// Listen is the HTTP address for webhooks, metrics and health
	// (default 127.0.0.1:8080; env MOZI_LISTEN).
	Listen string `yaml:"listen"`
	// DataDir holds the embedded PostgreSQL and agent logs (default
	// $XDG_STATE_HOME/mozi; env MOZI_DATA_DIR; flag --data-dir).
	DataDir    string     `yaml:"data_dir"`
	Database   Database   `yaml:"database"`
	Gitea      Gitea      `yaml:"gitea"`
	Webhook    Webhook    `yaml:"webhook"`
	Reviews    Reviews    `yaml:"reviews"`
	Templates  Templates  `yaml:"templates"`
	Dispatcher Dispatcher `yaml:"dispatcher"`
	Spawner    Spawner    `yaml:"spawner"`
	Ticker     Ticker     `yaml:"ticker"`
	Workspace  Workspace  `yaml:"workspace"`
	Sandbox    Sandbox    `yaml:"sandbox"`
	Backend    Backend    `yaml:"backend"`
	Log        Log        `yaml:"log"`
	Agents     []Agent    `yaml:"agents"`
	// UsageLimits: an agent's account at its usage limit (usagelimits.go).
	UsageLimits UsageLimits `yaml:"usage_limits"`
	Progress    Progress    `yaml:"progress"`
	CI          CI          `yaml:"ci"`
	Console     Console     `yaml:"console"`

	// MemoryLimit is the Go runtime's soft memory limit (default 256MiB;
	// the GOMEMLIMIT environment variable wins): near it the garbage
	// collector works harder so the heap stays under it.
	MemoryLimit ByteSize `yaml:"memory_limit"`

	// Source is the file the configuration came from ("" for defaults).
	Source string `yaml:"-"`
	// SecretFiles are the files secrets were read from (*_FILE
	// variables): sandboxed agents must not see them.
	SecretFiles []string `yaml:"-"`
	pos         yamlpos.Positions
}

// Database configures PostgreSQL.
type Database struct {
	// URL of the server (env MOZI_DATABASE_URL). Empty: mozi starts its
	// embedded PostgreSQL.
	URL Secret `yaml:"url"`
	// MaxConns caps the connection pool (default 16).
	MaxConns int32 `yaml:"max_conns"`
}

// Gitea configures access to the Gitea API.
type Gitea struct {
	// URL is Gitea's base URL, e.g. http://gitea:3000 (env MOZI_GITEA_URL).
	URL string `yaml:"url"`
	// Token is mozi's own API token (env MOZI_GITEA_TOKEN).
	Token Secret `yaml:"token"`
	// BotUser is mozi's own Gitea login; its comments never trigger work
	// (default mozi).
	BotUser string `yaml:"bot_user"`
	// Timeout bounds each API request (default 15s).
	Timeout time.Duration `yaml:"timeout"`
	// RatePerSecond and Burst limit mozi's own API calls (defaults 10, 20).
	RatePerSecond float64 `yaml:"rate_per_second"`
	Burst         int     `yaml:"burst"`
	// Repos are the repositories (owner/name) mozi serves: `mozi doctor`
	// checks their webhooks and `mozi webhook install` sets them up.
	// Optional: mozi acts on whatever webhooks reach it.
	Repos []string `yaml:"repos"`
}

// Webhook configures the intake endpoint.
type Webhook struct {
	// PublicURL is the address Gitea POSTs deliveries to, as Gitea sees
	// it, e.g. http://mozi.internal:8080/webhooks/gitea (env
	// MOZI_PUBLIC_URL). `mozi webhook install` and `mozi doctor` use it.
	PublicURL string `yaml:"public_url"`
	// Secrets verify X-Gitea-Signature; several allow rotation (env
	// MOZI_WEBHOOK_SECRET replaces the list with one secret).
	Secrets []Secret `yaml:"secrets"`
	// MaxBodyBytes rejects larger deliveries with 413 (default 10 MiB).
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// MaxPendingBytes bounds the delivery bodies held at once, read and
	// not yet stored; more wait before being read (default 64MiB, at
	// least max_body_bytes).
	MaxPendingBytes ByteSize `yaml:"max_pending_bytes"`
	// MaxAttempts parks a delivery whose processing failed this often
	// (default 8).
	MaxAttempts int `yaml:"max_attempts"`
	// TaskBudgetPerHour caps new tasks per issue per hour (default 30).
	TaskBudgetPerHour int `yaml:"task_budget_per_hour"`
	// MaxMentionHops caps agent-to-agent mention chains (default 4).
	MaxMentionHops int `yaml:"max_mention_hops"`
	// DiscussionGrace is how long an unassigned top-level issue waits for an
	// assignee before every agent is asked to discuss it (default 2m).
	DiscussionGrace time.Duration `yaml:"discussion_grace"`
	// DiscussLabel starts the discussion at once (default mozi/discuss).
	DiscussLabel string `yaml:"discuss_label"`
	// DeployContext is a regular expression matching commit status
	// contexts of deployments (default (?i)deploy).
	DeployContext string `yaml:"deploy_context"`
	// InfraContext matches contexts of runners and infrastructure
	// (default (?i)runner|infra).
	InfraContext string `yaml:"infra_context"`
	// CircuitBreaker pauses new agent runs on a repository whose agents
	// comment in a storm.
	CircuitBreaker CircuitBreaker `yaml:"circuit_breaker"`
}

// CircuitBreaker configures the per-repository circuit breaker (SPEC §10).
type CircuitBreaker struct {
	// Comments by agents within Window above which the breaker trips
	// (default 30 in 10m); it stays open for Cooldown (default 30m), then
	// closes by itself.
	Comments int           `yaml:"comments"`
	Window   time.Duration `yaml:"window"`
	Cooldown time.Duration `yaml:"cooldown"`
}

// Templates selects the toolchain templates.
type Templates struct {
	// Locale of the embedded default set: en or zh (default en).
	Locale string `yaml:"locale"`
	// Override is a YAML file merged over the default set (optional).
	Override string `yaml:"override"`
}

// Dispatcher configures claiming and the guardrails.
type Dispatcher struct {
	// MaxConcurrency caps the agent processes this mozi runs at once
	// (default 4).
	MaxConcurrency int `yaml:"max_concurrency"`
	// LeaseTTL is how long a run's lease lasts without a heartbeat; a run
	// whose lease expires is rescued (default 60s).
	LeaseTTL time.Duration `yaml:"lease_ttl"`
	// PollInterval is the safety-net claim interval (default 5s).
	PollInterval time.Duration `yaml:"poll_interval"`
	// SpawnsPerIssuePerDay and SpawnsPerAgentPerDay are spawn budgets
	// (defaults 20 and 200).
	SpawnsPerIssuePerDay int `yaml:"spawns_per_issue_per_day"`
	SpawnsPerAgentPerDay int `yaml:"spawns_per_agent_per_day"`
	// MaxRetries of new tasks: failed runs retried before the task fails
	// (default 2).
	MaxRetries *int `yaml:"max_retries"`
	// HoldBase and HoldMax shape the wait of a task held for a reason
	// outside it — Gitea unreachable, a dependency open, a branch in use —
	// doubling per consecutive hold (defaults 15s and 10m). Tasks held for
	// Gitea start as soon as it answers again, whatever their wait.
	HoldBase time.Duration `yaml:"hold_base"`
	HoldMax  time.Duration `yaml:"hold_max"`
}

// Spawner configures agent processes.
type Spawner struct {
	// KillGrace is how long SIGTERM has before SIGKILL (default 10s).
	KillGrace time.Duration `yaml:"kill_grace"`
	// ShutdownGrace is how long running agents may finish when mozi stops
	// before they are killed and their attempts recorded as interrupted
	// (default 30s).
	ShutdownGrace time.Duration `yaml:"shutdown_grace"`
	// FailureComment posts one comment on the issue when a task fails for
	// good (default true).
	FailureComment *bool `yaml:"failure_comment"`
	// OutputTailBytes of each attempt's output kept in the database (default
	// 16384); the whole output is in the attempt's log file.
	OutputTailBytes int `yaml:"output_tail_bytes"`
	// RetryBase and RetryMax shape the backoff between attempts (defaults
	// 30s and 30m).
	RetryBase time.Duration `yaml:"retry_base"`
	RetryMax  time.Duration `yaml:"retry_max"`
}

// Ticker configures the periodic safety net.
type Ticker struct {
	// LeaderTTL is the ticker leader's lease; a replica that dies is
	// replaced after at most this long (default 15s).
	LeaderTTL time.Duration `yaml:"leader_ttl"`
	// SweepEvery runs the quick sweeps: runs whose lease expired, complete
	// rounds, due discussions, queued mentions, orphaned tasks (default 10s).
	SweepEvery time.Duration `yaml:"sweep_every"`
	// ReconcileEvery re-reads from Gitea the issues live tasks wait on
	// (default 5m).
	ReconcileEvery time.Duration `yaml:"reconcile_every"`
	// StatusPollEvery polls commit statuses of pull requests in review
	// (default 2m).
	StatusPollEvery time.Duration `yaml:"status_poll_every"`
	// Retention keeps processed deliveries and finished tasks' logs
	// (default 720h, 30 days).
	Retention time.Duration `yaml:"retention"`
	// WatchdogQuiet is how long a task may wait on its agent's output (a
	// pull request, an [Action Report], a push, a review) after the
	// agent's run ended; then the agent runs once more with a prompt that
	// says what is missing, and if it is still missing the task fails
	// with a comment (default 30m).
	WatchdogQuiet time.Duration `yaml:"watchdog_quiet"`
}

// Workspace configures the worktrees agents work in.
type Workspace struct {
	// Root holds the repositories' mirrors and the tasks' worktrees
	// (default <data dir>/workspaces).
	Root string `yaml:"root"`
	// Remote is the clone URL of a repository, {repo} standing for
	// owner/name (default {gitea.url}/{repo}.git). It holds no
	// credentials: mozi fetches with its token, agents push with theirs.
	Remote string `yaml:"remote"`
	// KeepFinished is how long a finished task's worktree is kept
	// (default 1h).
	KeepFinished time.Duration `yaml:"keep_finished"`
	// SweepEvery is how often finished tasks' worktrees are looked for
	// (default 1m).
	SweepEvery time.Duration `yaml:"sweep_every"`
	// DiskBudget caps the disk all worktrees use (e.g. 20GiB); over it,
	// finished tasks' worktrees are removed oldest first (default: no cap).
	DiskBudget ByteSize `yaml:"disk_budget"`
	// CheckoutsPerRepo is how many new worktrees of one repository check
	// their files out at once; the others wait their turn, so the first
	// agent starts after one checkout, not after all of them (default 1;
	// -1: no cap).
	CheckoutsPerRepo int `yaml:"checkouts_per_repo"`
}

// Sandbox configures how sandboxed agents run.
type Sandbox struct {
	// Bwrap is the bubblewrap binary (default bwrap, on PATH).
	Bwrap string `yaml:"bwrap"`
	// User is who agents run as when mozi runs as root (default nobody;
	// better, a dedicated user such as mozi-agent). mozi never runs an
	// agent as root.
	User string `yaml:"user"`
}

// Backend says where agents' processes run (docs/backends.md).
type Backend struct {
	// Kind is local (default: on this machine, in bubblewrap), container
	// (a container per run, through the Docker Engine API of podman or
	// Docker) or kubernetes (a Job per run).
	Kind string `yaml:"kind"`
	// Images name the image of each repository's runs (owner/name →
	// image), over the agent's own image: the repository's toolchain.
	Images    map[string]string `yaml:"images"`
	Container Container         `yaml:"container"`
	Kube      Kube              `yaml:"kubernetes"`
}

// Container configures the container backend.
type Container struct {
	// Socket is the engine's API socket (default: DOCKER_HOST's unix
	// path, else /run/podman/podman.sock, else /var/run/docker.sock).
	Socket string `yaml:"socket"`
	// Network is the containers' network mode (default host: agents reach
	// Gitea and their model API as mozi does).
	Network string `yaml:"network"`
	// Image is the image of agents that name none.
	Image string `yaml:"image"`
}

// Kube configures the Kubernetes backend.
type Kube struct {
	// Kubeconfig is the kubeconfig file ("": in-cluster credentials).
	Kubeconfig string `yaml:"kubeconfig"`
	// Namespace holds the Jobs, pods and Secrets (default: the in-cluster
	// service account's namespace, else default).
	Namespace string `yaml:"namespace"`
	// Remote is each repository's clone URL as pods reach it, with {repo}
	// for owner/name (default: workspace.remote, else gitea.url's).
	Remote string `yaml:"remote"`
	// HostNetwork runs the pods in their node's network.
	HostNetwork bool `yaml:"host_network"`
	// PullPolicy of the images: IfNotPresent (default), Always or Never.
	PullPolicy string `yaml:"pull_policy"`
	// Image is the image of agents that name none; CheckoutImage the one
	// of the init step that clones the repository (default: the agent's).
	Image         string `yaml:"image"`
	CheckoutImage string `yaml:"checkout_image"`
	// TTLAfterFinished is how long a finished Job stays (default 10m).
	TTLAfterFinished time.Duration `yaml:"ttl_after_finished"`
}

// Backend kinds.
const (
	BackendLocal      = "local"
	BackendContainer  = "container"
	BackendKubernetes = "kubernetes"
)

// Limits bound one agent run (sandboxed agents); 0 means no limit.
type Limits struct {
	// Memory each process may allocate (default 8GiB).
	Memory ByteSize `yaml:"memory"`
	// Processes the agents' user may run at once (default 1024).
	Processes int `yaml:"processes"`
	// CPUTime each process may use (default 2h).
	CPUTime time.Duration `yaml:"cpu_time"`
	// OpenFiles each process may hold (default 8192).
	OpenFiles int `yaml:"open_files"`
}

// Log configures mozi's own logging.
type Log struct {
	// Level is debug, info, warn or error (default info; env MOZI_LOG_LEVEL).
	Level string `yaml:"level"`
	// Format is text or json (default text).
	Format string `yaml:"format"`
}

// Agent declares one agent: a Gitea user that mozi spawns a CLI for.
type Agent struct {
	// Login is the agent's Gitea user name (required, unique).
	Login string `yaml:"login"`
	// Preset names a known CLI (claude-code, codex, aider, opencode, goose,
	// openclaw, shell); exactly one of Preset and Command is set.
	Preset string `yaml:"preset"`
	// Command is the agent's own argv; {prompt_file} and {prompt} are
	// filled per run, else the prompt goes to stdin.
	Command []string `yaml:"command"`
	// Script is the shell script of the shell preset.
	Script string `yaml:"script"`
	// Args are extra arguments for a preset's CLI (not the shell preset),
	// inserted into the preset's argv before its positional arguments (the
	// trailing "-" of codex), e.g. [--model, claude-sonnet-4-5]: the preset
	// keeps its flags for unattended runs and its usage parsing, which a
	// copy of its argv in command: would lose.
	Args []string `yaml:"args"`
	// Workspace is auto (each run gets a git worktree of its task's
	// repository, on the branch the task needs) or none (the agent works in
	// Workdir and manages its checkout itself). Default: auto, or none when
	// a workdir is given.
	Workspace string `yaml:"workspace"`
	// Workdir is where the agent runs with workspace: none (default
	// <data dir>/agents/<login>/work; relative to the file).
	Workdir string `yaml:"workdir"`
	// Sandbox is bwrap (default: each run inside bubblewrap, mozi's
	// files out of sight) or none (the run sees what mozi's user sees;
	// mozi doctor warns).
	Sandbox string `yaml:"sandbox"`
	// Home is the agent's persistent HOME, where its CLI keeps its
	// settings (default <data dir>/agents/<login>/home).
	Home string `yaml:"home"`
	// Limits bound each run (sandboxed agents).
	Limits Limits `yaml:"limits"`
	// Image is the container image the agent runs in on the container and
	// kubernetes backends: its CLI and the toolchain it needs.
	Image string `yaml:"image"`
	// TokenFile is a file holding the agent's Gitea token (Docker or
	// systemd secrets); an alternative to TokenEnv.
	TokenFile string `yaml:"token_file"`
	// MaxConcurrency caps the agent's simultaneous runs (default 1).
	MaxConcurrency int `yaml:"max_concurrency"`
	// TokenEnv names the environment variable holding the agent's own
	// Gitea token; mozi passes it to the agent, never anything else.
	TokenEnv string `yaml:"token_env"`
	// RoleFiles are the agent's identity/soul files (L1 of the prompt).
	RoleFiles []string `yaml:"role_files"`
	// Skills are listed in L3 of the prompt.
	Skills []string `yaml:"skills"`
	// Lead marks the agent that receives round reviews (at most one).
	Lead bool `yaml:"lead"`
	// Infra marks the agent that receives deploy and infrastructure
	// failures (at most one).
	Infra bool `yaml:"infra"`
	// Disabled agents are known (their mentions are not loops) but never
	// spawned.
	Disabled bool `yaml:"disabled"`
	// Timeout is the wall-clock limit of one run (default 30m).
	Timeout time.Duration `yaml:"timeout"`
	// MaxCostUSD and MaxTokens kill a run that reports more (presets that
	// report usage, or a MOZI_USAGE line); 0: no limit.
	MaxCostUSD float64 `yaml:"max_cost_usd"`
	MaxTokens  int64   `yaml:"max_tokens"`
	// Env are extra environment variables for the agent.
	Env map[string]string `yaml:"env"`
	// PassEnv names variables of mozi's environment the agent gets too
	// (an API key its CLI needs); MOZI_* variables are never passed.
	PassEnv []string `yaml:"pass_env"`
	// Credential names the provider account (API key or subscription)
	// the agent's CLI runs on: agents naming the same one are paused
	// together at its usage limit. Default: a hash of the first provider
	// key it gets (ANTHROPIC_API_KEY, OPENAI_API_KEY…), else its own.
	Credential string `yaml:"credential"`
}

// Load reads the configuration. path is the --config flag; when empty,
// $MOZI_CONFIG, then ./mozi.yaml if it exists, else built-in defaults.
// Environment overrides are applied last, then everything is validated:
// the error lists every problem found, one per line, in file order.
func Load(path string, getenv func(string) string) (*Config, error) {
	if path == "" {
		path = getenv(EnvConfig)
	}
	if path == "" {
		if _, err := os.Stat(DefaultFile); err == nil {
			path = DefaultFile
		}
	}
	cfg := &Config{pos: yamlpos.Positions{}}
	if path != "" {
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: config file not found", path)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if err := cfg.parse(path, data); err != nil {
			return nil, err
		}
	}
	if err := cfg.applyEnv(getenv); err != nil {
		return nil, err
	}
	cfg.applyDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Parse reads a configuration from memory (for tests and `mozi doctor`),
// naming it source in errors. No environment is applied.
func Parse(source string, data []byte) (*Config, error) {
	cfg := &Config{pos: yamlpos.Positions{}}
	if err := cfg.parse(source, data); err != nil {
		return nil, err
	}
	cfg.applyDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

func (c *Config) parse(source string, data []byte) error {
	c.Source = source
	pos, err := yamlpos.Decode(source, data, c)
	if err != nil {
		return err
	}
	c.pos = pos
	// Paths in the file are relative to the file, not to mozi's cwd.
	base := filepath.Dir(source)
	for i := range c.Agents {
		a := &c.Agents[i]
		a.Workdir = resolvePath(base, a.Workdir)
		a.Home = resolvePath(base, a.Home)
		a.TokenFile = resolvePath(base, a.TokenFile)
		for j, f := range a.RoleFiles {
			a.RoleFiles[j] = resolvePath(base, f)
		}
	}
	c.Templates.Override = resolvePath(base, c.Templates.Override)
	c.Workspace.Root = resolvePath(base, c.Workspace.Root)
	c.DataDir = resolvePath(base, c.DataDir)
	return nil
}

func resolvePath(base, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	if strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, p[2:])
		}
	}
	return filepath.Join(base, p)
}

func (c *Config) applyEnv(getenv func(string) string) error {
	if v := getenv(EnvListen); v != "" {
		c.Listen = v
	}
	if v := getenv(EnvGiteaURL); v != "" {
		c.Gitea.URL = v
	}
	if v := getenv(EnvPublicURL); v != "" {
		c.Webhook.PublicURL = v
	}
	if v := getenv(EnvDataDir); v != "" {
		c.DataDir = v
	}
	if v := getenv(EnvLogLevel); v != "" {
		c.Log.Level = v
	}
	// Secrets come from the variable, or from the file its _FILE
	// variable names (Docker and systemd secrets).
	for _, sec := range []struct {
		env string
		set func(Secret)
	}{
		{EnvDatabaseURL, func(v Secret) { c.Database.URL = v }},
		{EnvGiteaToken, func(v Secret) { c.Gitea.Token = v }},
		{EnvWebhookSecret, func(v Secret) { c.Webhook.Secrets = []Secret{v} }},
	} {
		v, file, err := secretFromEnv(getenv, sec.env)
		if err != nil {
			return err
		}
		if file != "" {
			c.SecretFiles = append(c.SecretFiles, file)
		}
		if v != "" {
			sec.set(Secret(v))
		}
	}
	return nil
}

// secretFromEnv reads a secret from $NAME, else from the file $NAME_FILE
// names (one trailing newline dropped). The error never holds the secret.
func secretFromEnv(getenv func(string) string, name string) (value, file string, err error) {
	if v := getenv(name); v != "" {
		return v, "", nil
	}
	file = getenv(name + "_FILE")
	if file == "" {
		return "", "", nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return "", "", fmt.Errorf("%s_FILE: %w", name, err)
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	if v == "" {
		return "", "", fmt.Errorf("%s_FILE: %s is empty", name, file)
	}
	return v, file, nil
}

func (c *Config) applyDefaults() {
	c.Listen = cmp.Or(c.Listen, DefaultListen)
	c.applyUsageLimitDefaults()
	c.MemoryLimit = cmp.Or(c.MemoryLimit, memory.DefaultLimit)
	c.Database.MaxConns = cmp.Or(c.Database.MaxConns, DefaultDatabaseMaxConns)
	c.Gitea.BotUser = cmp.Or(c.Gitea.BotUser, rules.DefaultBotUser)
	c.Gitea.Timeout = cmp.Or(c.Gitea.Timeout, gitea.DefaultTimeout)
	c.Gitea.RatePerSecond = cmp.Or(c.Gitea.RatePerSecond, gitea.DefaultRatePerSecond)
	c.Gitea.Burst = cmp.Or(c.Gitea.Burst, gitea.DefaultBurst)
	w := &c.Webhook
	w.MaxBodyBytes = cmp.Or(w.MaxBodyBytes, webhook.DefaultMaxBodyBytes)
	w.MaxPendingBytes = cmp.Or(w.MaxPendingBytes, webhook.DefaultMaxPendingBytes)
	w.MaxAttempts = cmp.Or(w.MaxAttempts, webhook.DefaultMaxAttempts)
	w.TaskBudgetPerHour = cmp.Or(w.TaskBudgetPerHour, rules.DefaultTaskBudgetPerHour)
	w.MaxMentionHops = cmp.Or(w.MaxMentionHops, rules.DefaultMaxMentionHops)
	w.DiscussionGrace = cmp.Or(w.DiscussionGrace, rules.DefaultDiscussionGrace)
	w.DiscussLabel = cmp.Or(w.DiscussLabel, rules.DefaultDiscussLabel)
	w.DeployContext = cmp.Or(w.DeployContext, rules.DefaultDeployContext)
	w.InfraContext = cmp.Or(w.InfraContext, rules.DefaultInfraContext)
	w.CircuitBreaker.Comments = cmp.Or(w.CircuitBreaker.Comments, rules.DefaultBreakerComments)
	w.CircuitBreaker.Window = cmp.Or(w.CircuitBreaker.Window, rules.DefaultBreakerWindow)
	w.CircuitBreaker.Cooldown = cmp.Or(w.CircuitBreaker.Cooldown, rules.DefaultBreakerCooldown)
	c.Reviews.applyDefaults()
	c.Templates.Locale = cmp.Or(c.Templates.Locale, templates.DefaultLocale)
	c.Log.Level = cmp.Or(c.Log.Level, DefaultLogLevel)
	c.Log.Format = cmp.Or(c.Log.Format, DefaultLogFormat)
	c.CI.applyDefaults()
	d := &c.Dispatcher
	d.MaxConcurrency = cmp.Or(d.MaxConcurrency, dispatcher.DefaultMaxConcurrency)
	d.LeaseTTL = cmp.Or(d.LeaseTTL, dispatcher.DefaultLeaseTTL)
	d.PollInterval = cmp.Or(d.PollInterval, dispatcher.DefaultPollInterval)
	d.SpawnsPerIssuePerDay = cmp.Or(d.SpawnsPerIssuePerDay, dispatcher.DefaultSpawnsPerIssuePerDay)
	d.SpawnsPerAgentPerDay = cmp.Or(d.SpawnsPerAgentPerDay, dispatcher.DefaultSpawnsPerAgentPerDay)
	d.HoldBase = cmp.Or(d.HoldBase, dispatcher.DefaultHoldBase)
	d.HoldMax = cmp.Or(d.HoldMax, dispatcher.DefaultHoldMax)
	if d.MaxRetries == nil {
		n := task.DefaultMaxRetries
		d.MaxRetries = &n
	}
	sp := &c.Spawner
	sp.KillGrace = cmp.Or(sp.KillGrace, spawner.DefaultKillGrace)
	sp.ShutdownGrace = cmp.Or(sp.ShutdownGrace, DefaultShutdownGrace)
	if sp.FailureComment == nil {
		yes := true
		sp.FailureComment = &yes
	}
	sp.OutputTailBytes = cmp.Or(sp.OutputTailBytes, spawner.DefaultTailBytes)
	sp.RetryBase = cmp.Or(sp.RetryBase, spawner.DefaultRetryBase)
	sp.RetryMax = cmp.Or(sp.RetryMax, spawner.DefaultRetryMax)
	tk := &c.Ticker
	tk.LeaderTTL = cmp.Or(tk.LeaderTTL, ticker.DefaultLeaderTTL)
	tk.SweepEvery = cmp.Or(tk.SweepEvery, ticker.DefaultSweepEvery)
	tk.ReconcileEvery = cmp.Or(tk.ReconcileEvery, ticker.DefaultReconcileEvery)
	tk.StatusPollEvery = cmp.Or(tk.StatusPollEvery, ticker.DefaultStatusesEvery)
	tk.Retention = cmp.Or(tk.Retention, ticker.DefaultRetention)
	tk.WatchdogQuiet = cmp.Or(tk.WatchdogQuiet, ticker.DefaultWatchdogQuiet)
	c.Progress.applyDefaults()
	for i := range c.Agents {
		a := &c.Agents[i]
		a.MaxConcurrency = cmp.Or(a.MaxConcurrency, dispatcher.DefaultAgentConcurrency)
		a.Timeout = cmp.Or(a.Timeout, spawner.DefaultTimeout)
		if a.Workspace == "" {
			// An agent given its own directory keeps working there, as it
			// did before mozi prepared worktrees.
			a.Workspace = WorkspaceAuto
			if a.Workdir != "" {
				a.Workspace = WorkspaceNone
			}
		}
		a.Sandbox = cmp.Or(a.Sandbox, SandboxBwrap)
		l := &a.Limits
		l.Memory = cmp.Or(l.Memory, DefaultAgentMemory)
		l.Processes = cmp.Or(l.Processes, DefaultAgentProcesses)
		l.CPUTime = cmp.Or(l.CPUTime, DefaultAgentCPUTime)
		l.OpenFiles = cmp.Or(l.OpenFiles, DefaultAgentOpenFiles)
	}
	c.Workspace.KeepFinished = cmp.Or(c.Workspace.KeepFinished, workspace.DefaultKeepFinished)
	c.Workspace.SweepEvery = cmp.Or(c.Workspace.SweepEvery, workspace.DefaultSweepEvery)
	c.Workspace.CheckoutsPerRepo = cmp.Or(c.Workspace.CheckoutsPerRepo, workspace.DefaultCheckoutsPerRepo)
	c.Sandbox.Bwrap = cmp.Or(c.Sandbox.Bwrap, DefaultBwrap)
	c.Sandbox.User = cmp.Or(c.Sandbox.User, DefaultSandboxUser)
	c.Backend.Kind = cmp.Or(c.Backend.Kind, BackendLocal)
	c.Backend.Container.Network = cmp.Or(c.Backend.Container.Network, container.DefaultNetwork)
	c.Backend.Kube.TTLAfterFinished = cmp.Or(c.Backend.Kube.TTLAfterFinished, DefaultKubeTTLAfterFinished)
}

// Agent workspace and sandbox modes.
const (
	WorkspaceAuto = "auto"
	WorkspaceNone = "none"
	SandboxBwrap  = "bwrap"
	SandboxNone   = "none"
)

var (
	loginRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	envVarRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// problems collects what validation finds, so that every error is
// reported at once: one per key (the first found), each at the line of
// its key (or of its closest ancestor that has a line), in file order.
type problems struct {
	c    *Config
	list []problem
	seen map[string]bool
}

type problem struct {
	line int
	msg  string
}

func (c *Config) problems() *problems { return &problems{c: c, seen: map[string]bool{}} }

// add records a problem with key.
func (p *problems) add(key, format string, args ...any) {
	if p.seen[key] {
		return
	}
	p.seen[key] = true
	msg := key + ": " + fmt.Sprintf(format, args...)
	line := 0
	switch {
	case p.c.Source == "":
		msg = "configuration: " + msg
	default:
		if line = p.c.pos.Line(key); line > 0 {
			msg = fmt.Sprintf("%s:%d: %s", p.c.Source, line, msg)
		} else {
			msg = p.c.Source + ": " + msg
		}
	}
	p.list = append(p.list, problem{line: line, msg: msg})
}

// err is every problem, one per line, in the order of their keys in the
// file (those without a line first, in the order they were checked); nil
// when there is none.
func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	slices.SortStableFunc(p.list, func(a, b problem) int { return cmp.Compare(a.line, b.line) })
	msgs := make([]string, len(p.list))
	for i, pr := range p.list {
		msgs[i] = pr.msg
	}
	return errors.New(strings.Join(msgs, "\n"))
}

// durationKey, intKey and stringKey pair a key with its value, for checks
// that go through several keys in their order.
type (
	durationKey struct {
		key string
		d   time.Duration
	}
	intKey struct {
		key string
		n   int
	}
	stringKey struct {
		key, s string
	}
)

// validate checks the whole configuration and reports every problem.
func (c *Config) validate() error {
	p := c.problems()
	c.validateServer(p)
	c.validateGitea(p)
	c.validateWebhook(p)
	c.Reviews.validate(p)
	c.validateEngine(p)
	c.validateBackend(p)
	c.validateAgents(p)
	c.validateUsageLimits(p)
	c.validateProgress(p)
	c.CI.validate(p)
	c.validateConsole(p)
	return p.err()
}

func (c *Config) validateServer(p *problems) {
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		p.add("listen", "%q is not host:port", c.Listen)
	}
	if c.Database.MaxConns < 2 {
		p.add("database.max_conns", "must be at least 2, got %d", c.Database.MaxConns)
	}
	if c.MemoryLimit < memory.MinLimit {
		p.add("memory_limit", "must be at least 64MiB, got %d bytes", c.MemoryLimit)
	}
	if !slices.Contains([]string{"en", "zh"}, c.Templates.Locale) {
		p.add("templates.locale", "unknown locale %q (want en or zh)", c.Templates.Locale)
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.Log.Level) {
		p.add("log.level", "unknown level %q (want debug, info, warn or error)", c.Log.Level)
	}
	if !slices.Contains([]string{"text", "json"}, c.Log.Format) {
		p.add("log.format", "unknown format %q (want text or json)", c.Log.Format)
	}
}

func (c *Config) validateGitea(p *problems) {
	if c.Gitea.URL != "" {
		u, err := url.Parse(c.Gitea.URL)
		switch {
		case err == nil && u.User != nil:
			// Not echoed: the URL holds a secret.
			p.add("gitea.url", "holds credentials (user:password@): give mozi its token in MOZI_GITEA_TOKEN, not in the URL (agents see the URL)")
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			p.add("gitea.url", "%q is not an http(s) URL", c.Gitea.URL)
		}
	}
	if r := c.Workspace.Remote; r != "" {
		if u, err := url.Parse(r); err == nil && u.User != nil && u.Scheme != "ssh" {
			p.add("workspace.remote", "holds credentials (user:password@): mozi and the agents authenticate with their Gitea tokens; the URL is visible to agents")
		} else if !strings.Contains(r, "{repo}") {
			p.add("workspace.remote", "%q has no {repo} (owner/name) in it", r)
		}
	}
	if n := c.Workspace.CheckoutsPerRepo; n < 1 && n != -1 {
		p.add("workspace.checkouts_per_repo", "must be at least 1, or -1 for no cap, got %d", n)
	}
	for i, r := range c.Gitea.Repos {
		if owner, name, ok := strings.Cut(r, "/"); !ok || owner == "" || name == "" || strings.ContainsAny(name, "/ ") {
			p.add(fmt.Sprintf("gitea.repos[%d]", i), "%q is not owner/name", r)
		}
	}
	if !loginRE.MatchString(c.Gitea.BotUser) {
		p.add("gitea.bot_user", "%q is not a Gitea login", c.Gitea.BotUser)
	}
	if c.Gitea.Timeout < 0 {
		p.add("gitea.timeout", "must be positive")
	}
	if c.Gitea.RatePerSecond < 0 || c.Gitea.Burst < 0 {
		p.add("gitea.rate_per_second", "the rate limit must be positive")
	}
}

func (c *Config) validateWebhook(p *problems) {
	w := c.Webhook
	if w.PublicURL != "" {
		u, err := url.Parse(w.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.add("webhook.public_url", "%q is not an http(s) URL", w.PublicURL)
		}
	}
	for i, s := range w.Secrets {
		if s == "" {
			p.add(fmt.Sprintf("webhook.secrets[%d]", i), "is empty")
		}
	}
	if w.MaxBodyBytes < 1024 {
		p.add("webhook.max_body_bytes", "must be at least 1024, got %d", w.MaxBodyBytes)
	}
	if int64(w.MaxPendingBytes) < w.MaxBodyBytes {
		p.add("webhook.max_pending_bytes", "must be at least webhook.max_body_bytes (%d), got %d", w.MaxBodyBytes, w.MaxPendingBytes)
	}
	for _, k := range []intKey{{"webhook.max_attempts", w.MaxAttempts},
		{"webhook.task_budget_per_hour", w.TaskBudgetPerHour}, {"webhook.max_mention_hops", w.MaxMentionHops},
		{"webhook.circuit_breaker.comments", w.CircuitBreaker.Comments}} {
		if k.n < 1 {
			p.add(k.key, "must be at least 1, got %d", k.n)
		}
	}
	for _, k := range []stringKey{{"webhook.deploy_context", w.DeployContext}, {"webhook.infra_context", w.InfraContext}} {
		if _, err := regexp.Compile(k.s); err != nil {
			p.add(k.key, "%q is not a regular expression: %v", k.s, err)
		}
	}
	for _, k := range []durationKey{{"webhook.circuit_breaker.window", w.CircuitBreaker.Window},
		{"webhook.circuit_breaker.cooldown", w.CircuitBreaker.Cooldown}} {
		if k.d < 0 {
			p.add(k.key, "must be positive, got %s", k.d)
		}
	}
}

// validateEngine checks the dispatcher, spawner and ticker sections.
func (c *Config) validateEngine(p *problems) {
	d, sp, tk := c.Dispatcher, c.Spawner, c.Ticker
	for _, k := range []durationKey{{"dispatcher.lease_ttl", d.LeaseTTL}, {"dispatcher.poll_interval", d.PollInterval},
		{"dispatcher.hold_base", d.HoldBase}, {"dispatcher.hold_max", d.HoldMax},
		{"spawner.kill_grace", sp.KillGrace}, {"spawner.shutdown_grace", sp.ShutdownGrace},
		{"spawner.retry_base", sp.RetryBase}, {"spawner.retry_max", sp.RetryMax},
		{"ticker.leader_ttl", tk.LeaderTTL}, {"ticker.sweep_every", tk.SweepEvery},
		{"ticker.reconcile_every", tk.ReconcileEvery}, {"ticker.status_poll_every", tk.StatusPollEvery},
		{"ticker.retention", tk.Retention}, {"ticker.watchdog_quiet", tk.WatchdogQuiet}} {
		if k.d < 0 {
			p.add(k.key, "must be positive, got %s", k.d)
		}
	}
	if d.LeaseTTL < 3*time.Second {
		p.add("dispatcher.lease_ttl", "must be at least 3s (heartbeats renew it every third), got %s", d.LeaseTTL)
	}
	if d.HoldMax < d.HoldBase {
		p.add("dispatcher.hold_max", "must not be less than dispatcher.hold_base (%s), got %s", d.HoldBase, d.HoldMax)
	}
	if n := *d.MaxRetries; n < 0 || n > 100 {
		p.add("dispatcher.max_retries", "must be between 0 and 100, got %d", n)
	}
	for _, k := range []intKey{{"dispatcher.max_concurrency", d.MaxConcurrency},
		{"dispatcher.spawns_per_issue_per_day", d.SpawnsPerIssuePerDay},
		{"dispatcher.spawns_per_agent_per_day", d.SpawnsPerAgentPerDay},
		{"spawner.output_tail_bytes", sp.OutputTailBytes}} {
		if k.n < 1 {
			p.add(k.key, "must be at least 1, got %d", k.n)
		}
	}
}

// validateAgents checks each agent, and that logins, the lead and the
// infra agent are unique.
func (c *Config) validateAgents(p *problems) {
	seen := map[string]int{}
	var lead, infra string
	for i, a := range c.Agents {
		key := fmt.Sprintf("agents[%d]", i)
		switch {
		case a.Login == "":
			p.add(key+".login", "is required")
		case !loginRE.MatchString(a.Login):
			p.add(key+".login", "%q is not a Gitea login", a.Login)
		}
		if j, dup := seen[strings.ToLower(a.Login)]; dup {
			p.add(key+".login", "%q is already declared by agents[%d]", a.Login, j)
		} else {
			seen[strings.ToLower(a.Login)] = i
		}
		if strings.EqualFold(a.Login, c.Gitea.BotUser) {
			p.add(key+".login", "%q is mozi's own bot user (gitea.bot_user)", a.Login)
		}
		c.validateCommand(p, key, a)
		c.validateRun(p, key, a)
		if a.Lead {
			if lead != "" {
				p.add(key+".lead", "both %s and %s are lead: at most one agent leads", lead, a.Login)
			}
			lead = cmp.Or(lead, a.Login)
		}
		if a.Infra {
			if infra != "" {
				p.add(key+".infra", "both %s and %s are infra: at most one agent handles infrastructure", infra, a.Login)
			}
			infra = cmp.Or(infra, a.Login)
		}
	}
}

// validateCommand checks what an agent runs: a preset or a command, its
// script and args.
func (c *Config) validateCommand(p *problems, key string, a Agent) {
	switch {
	case a.Preset == "" && len(a.Command) == 0:
		p.add(key, "agent %s needs a preset or a command", a.Login)
	case a.Preset != "" && len(a.Command) > 0:
		p.add(key+".command", "agent %s has both a preset and a command: keep one", a.Login)
	case len(a.Command) > 0 && strings.TrimSpace(a.Command[0]) == "":
		p.add(key+".command", "the program (first element) is empty")
	}
	if a.Preset != "" {
		if _, ok := spawner.LookupPreset(a.Preset); !ok {
			p.add(key+".preset", "unknown preset %q (want one of %s)", a.Preset,
				strings.Join(spawner.PresetNames(), ", "))
		}
	}
	if a.Preset == "shell" && a.Script == "" {
		p.add(key+".script", "the shell preset needs a script")
	}
	if a.Script != "" && a.Preset != "shell" {
		p.add(key+".script", "script is only used by the shell preset")
	}
	if len(a.Args) > 0 {
		switch a.Preset {
		case "":
			p.add(key+".args", "args extend a preset's command: put them in command itself")
		case "shell":
			p.add(key+".args", "the shell preset takes no args: put them in its script")
		}
		for j, arg := range a.Args {
			if arg == "" {
				p.add(fmt.Sprintf("%s.args[%d]", key, j), "is empty")
			}
		}
	}
}

// BackendImage is the configured backend's default image.
func (c *Config) BackendImage() string {
	switch c.Backend.Kind {
	case BackendContainer:
		return c.Backend.Container.Image
	case BackendKubernetes:
		return c.Backend.Kube.Image
	}
	return ""
}

// validateBackend checks the backend's kind and settings.
func (c *Config) validateBackend(p *problems) {
	switch c.Backend.Kind {
	case BackendLocal, BackendContainer, BackendKubernetes:
	default:
		p.add("backend.kind", "%q is not local, container or kubernetes", c.Backend.Kind)
	}
	for repo := range c.Backend.Images {
		if owner, name, ok := strings.Cut(repo, "/"); !ok || owner == "" || name == "" {
			p.add("backend.images", "%q is not owner/name", repo)
		}
	}
	switch c.Backend.Kube.PullPolicy {
	case "", "IfNotPresent", "Always", "Never":
	default:
		p.add("backend.kubernetes.pull_policy", "%q is not IfNotPresent, Always or Never", c.Backend.Kube.PullPolicy)
	}
	if r := c.Backend.Kube.Remote; r != "" && !strings.Contains(r, "{repo}") {
		p.add("backend.kubernetes.remote", "%q has no {repo} (owner/name) in it", r)
	}
	if c.Backend.Kube.TTLAfterFinished < 0 {
		p.add("backend.kubernetes.ttl_after_finished", "must not be negative")
	}
}

// validateRun checks where and how an agent runs: workspace, sandbox,
// limits, token, concurrency, budgets, environment and role files.
func (c *Config) validateRun(p *problems, key string, a Agent) {
	switch a.Workspace {
	case WorkspaceAuto:
		if a.Workdir != "" {
			p.add(key+".workdir", "agent %s works in a worktree per task (workspace: auto): workdir is for workspace: none", a.Login)
		}
	case WorkspaceNone:
	default:
		p.add(key+".workspace", "%q is not auto or none", a.Workspace)
	}
	if a.Sandbox != SandboxBwrap && a.Sandbox != SandboxNone {
		p.add(key+".sandbox", "%q is not bwrap or none", a.Sandbox)
	}
	if c.Backend.Kind != BackendLocal && a.Image == "" && c.BackendImage() == "" && len(c.Backend.Images) == 0 {
		p.add(key+".image", "agent %s runs on the %s backend: name its image (or a default in backend.%s.image)",
			a.Login, c.Backend.Kind, map[string]string{BackendContainer: "container", BackendKubernetes: "kubernetes"}[c.Backend.Kind])
	}
	if a.Limits.Memory < 0 || a.Limits.Processes < 0 || a.Limits.CPUTime < 0 || a.Limits.OpenFiles < 0 {
		p.add(key+".limits", "limits must not be negative")
	}
	if a.TokenEnv != "" && a.TokenFile != "" {
		p.add(key+".token_file", "agent %s has both token_env and token_file: keep one", a.Login)
	}
	if a.MaxConcurrency < 1 || a.MaxConcurrency > 256 {
		p.add(key+".max_concurrency", "must be between 1 and 256, got %d", a.MaxConcurrency)
	}
	if a.TokenEnv != "" && !envVarRE.MatchString(a.TokenEnv) {
		p.add(key+".token_env", "%q is not an environment variable name", a.TokenEnv)
	}
	if a.Timeout < 0 {
		p.add(key+".timeout", "must be positive")
	}
	if a.MaxCostUSD < 0 || a.MaxTokens < 0 {
		p.add(key, "budgets must not be negative")
	}
	for j, name := range a.PassEnv {
		if why := c.notForAgent(a, name); why != "" {
			p.add(fmt.Sprintf("%s.pass_env[%d]", key, j), "%q cannot be passed to an agent: %s", name, why)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(a.Env)) {
		if why := c.notForAgent(a, name); why != "" {
			p.add(key+".env."+name, "%q cannot be set for an agent: %s", name, why)
		}
	}
	for j, f := range a.RoleFiles {
		if f == "" {
			p.add(fmt.Sprintf("%s.role_files[%d]", key, j), "is empty")
		}
	}
}

// notForAgent says why an environment variable may not reach agent a
// ("" when it may): mozi's own settings and secrets, PostgreSQL's, and
// other agents' tokens.
func (c *Config) notForAgent(a Agent, name string) string {
	switch {
	case !envVarRE.MatchString(name):
		return "not an environment variable name"
	case strings.HasPrefix(name, "MOZI_"):
		return "MOZI_* variables are mozi's own configuration and secrets"
	case strings.HasPrefix(name, "PG"):
		return "PG* variables configure PostgreSQL connections"
	}
	for _, other := range c.Agents {
		if other.Login != a.Login && other.TokenEnv == name {
			return "it holds agent " + other.Login + "'s Gitea token"
		}
	}
	return ""
}

// Agent returns the declared agent with the given login (case-insensitive,
// as Gitea logins are).
func (c *Config) Agent(login string) (Agent, bool) {
	for _, a := range c.Agents {
		if strings.EqualFold(a.Login, login) {
			return a, true
		}
	}
	return Agent{}, false
}

// ByteSize is a size in bytes, written as a number of bytes or with a unit
// (512MiB, 8GiB, 2GB).
type ByteSize int64

// UnmarshalYAML reads 8GiB, 512MiB, 2GB, 100KiB or a plain number of bytes.
func (b *ByteSize) UnmarshalYAML(node *yaml.Node) error {
	n, err := ParseByteSize(node.Value)
	if err != nil {
		return err
	}
	*b = n
	return nil
}

var sizeRE = regexp.MustCompile(`^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*$`)

// ParseByteSize reads a size such as 8GiB.
func ParseByteSize(s string) (ByteSize, error) {
	m := sizeRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q is not a size (write e.g. 512MiB, 8GiB or a number of bytes)", s)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size: %w", s, err)
	}
	unit := map[string]float64{"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
		"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}[m[2]]
	return ByteSize(v * unit), nil
}
