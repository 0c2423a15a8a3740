package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/moziplus/mozi/cmd/mozi/internal/config"
	"github.com/moziplus/mozi/repository/gitea"
	"github.com/moziplus/mozi/spawner/backend/local"
	"github.com/moziplus/mozi/templates"
)

// verdict is one line of the doctor's report.
type verdict int

const (
	verdictOK verdict = iota
	verdictWarn
	verdictFail
)

func (v verdict) String() string {
	return [...]string{"ok", "WARN", "FAIL"}[v]
}

// doctor collects the checks' verdicts.
type doctor struct {
	out      io.Writer
	getenv   func(string) string
	asJSON   bool
	checks   []checkResult
	failures int
	warnings int
}

// checkResult is one check, as --json prints it.
type checkResult struct {
	Verdict string `json:"verdict"` // ok, warn, fail
	Check   string `json:"check"`
	Found   string `json:"found"`
	Hint    string `json:"hint,omitempty"`
}

// report prints one check: verdict, subject, what was found and, when it
// is not ok, what to do (with --json, it is kept for the document printed
// at the end).
func (d *doctor) report(v verdict, subject, found, hint string) {
	if v == verdictOK {
		hint = ""
	}
	d.checks = append(d.checks, checkResult{Verdict: strings.ToLower(v.String()), Check: subject, Found: found, Hint: hint})
	if !d.asJSON {
		line := fmt.Sprintf("%-4s  %-22s %s", v, subject, found)
		if hint != "" {
			line += " — " + hint
		}
		fmt.Fprintln(d.out, line)
	}
	switch v {
	case verdictFail:
		d.failures++
	case verdictWarn:
		d.warnings++
	}
}

func runDoctor(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "doctor")
	configPath := fs.String("config", "", "configuration file")
	dataDir := fs.String("data-dir", "", "state directory of the embedded database")
	timeout := fs.Duration("timeout", 10*time.Second, "time limit of each network check")
	asJSON := fs.Bool("json", false, "print the checks as one JSON document")
	if err := parseFlags(e, fs, args); err != nil {
		return err
	}
	d := &doctor{out: e.stdout, getenv: e.getenv, asJSON: *asJSON}
	if err := d.run(ctx, e, *configPath, *dataDir, *timeout); err != nil {
		return err
	}
	if d.asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{"checks": d.checks, "failed": d.failures, "warnings": d.warnings}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(e.stdout, "\n%d failed, %d warnings\n", d.failures, d.warnings)
	}
	if d.failures > 0 {
		return fmt.Errorf("%d of %d checks failed", d.failures, len(d.checks))
	}
	return nil
}

// run makes every check it can: a configuration that does not load stops
// the rest.
func (d *doctor) run(ctx context.Context, e *env, configPath, dataDir string, timeout time.Duration) error {
	cfg, err := config.Load(configPath, e.getenv)
	if err != nil {
		d.report(verdictFail, "configuration", err.Error(), "fix the file; every other check needs it")
		return nil
	}
	d.report(verdictOK, "configuration", fmt.Sprintf("%s: %d agents, %d repositories", describeSource(cfg.Source),
		len(cfg.Agents), len(cfg.Gitea.Repos)), "")
	d.checkSecret(cfg)
	d.checkTemplates(cfg)
	d.checkDatabase(ctx, e, cfg, dataDir, timeout)
	d.checkGitea(ctx, cfg, timeout)
	d.checkAgents(ctx, e, cfg, dataDir)
	return nil
}

// demoSecrets are the example configurations' secrets: fine for a demo on
// loopback, never for a Gitea that reaches mozi.
var demoSecrets = []string{"demo-secret-change-me", "change-me", "secret"}

// loopbackDemo reports whether only this machine can post to mozi and no
// Gitea is configured: the demo of the example configuration, where a
// known secret signs nothing anyone else could send.
func loopbackDemo(cfg *config.Config) bool {
	if cfg.Gitea.URL != "" || cfg.Webhook.PublicURL != "" || len(cfg.Gitea.Repos) > 0 {
		return false
	}
	host, _, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// minSecretLen is the shortest webhook secret doctor accepts.
const minSecretLen = 16

func (d *doctor) checkSecret(cfg *config.Config) {
	if len(cfg.Webhook.Secrets) == 0 {
		d.report(verdictFail, "webhook secret", "none configured",
			"set MOZI_WEBHOOK_SECRET (the same secret as in Gitea's webhook); mozi serve refuses to start without one")
		return
	}
	for i, s := range cfg.Webhook.Secrets {
		switch v := s.Value(); {
		case slices.Contains(demoSecrets, v) && loopbackDemo(cfg):
			d.report(verdictWarn, "webhook secret", fmt.Sprintf("secret %d is the example configuration's: fine while mozi listens on loopback without a Gitea", i+1),
				"before a Gitea reaches mozi, generate one (openssl rand -hex 32) for mozi and Gitea")
			return
		case slices.Contains(demoSecrets, v):
			d.report(verdictFail, "webhook secret", fmt.Sprintf("secret %d is the example configuration's", i+1),
				"anyone who read the example can sign webhooks: generate one (openssl rand -hex 32) for mozi and Gitea")
			return
		case len(v) < minSecretLen:
			d.report(verdictFail, "webhook secret", fmt.Sprintf("secret %d has %d characters", i+1, len(v)),
				fmt.Sprintf("use at least %d random characters (openssl rand -hex 32)", minSecretLen))
			return
		}
	}
	d.report(verdictOK, "webhook secret", fmt.Sprintf("%d configured", len(cfg.Webhook.Secrets)), "")
}

func (d *doctor) checkTemplates(cfg *config.Config) {
	if _, err := templates.Load(cfg.Templates.Locale, cfg.Templates.Override); err != nil {
		d.report(verdictFail, "templates", err.Error(), "mozi templates check FILE shows every problem")
		return
	}
	what := "locale " + cfg.Templates.Locale
	if cfg.Templates.Override != "" {
		what += " with " + cfg.Templates.Override
	}
	d.report(verdictOK, "templates", what, "")
}

func (d *doctor) checkDatabase(ctx context.Context, e *env, cfg *config.Config, dataDir string, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, max(timeout, 30*time.Second)) // an embedded cluster takes a few seconds to start
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)
	db, err := openDatabase(ctx, e, cfg, dataDir, quiet, shareCluster)
	if err != nil {
		hint := "check database.url (or MOZI_DATABASE_URL) and that the server accepts this user"
		if cfg.Database.URL == "" {
			hint = "the embedded database needs PostgreSQL's server binaries (apt-get install postgresql)"
		}
		d.report(verdictFail, "database", err.Error(), hint)
		return
	}
	defer db.Close()
	where := "configured server"
	if db.cluster != nil {
		where = "embedded PostgreSQL in " + db.cluster.DataDir()
	}
	m, err := db.store.Migrator()
	if err != nil {
		d.report(verdictFail, "database", where+": "+err.Error(), "")
		return
	}
	defer m.Close()
	current, err := m.Current(ctx)
	switch {
	case err != nil:
		d.report(verdictFail, "database", where+": "+err.Error(), "")
	case !current:
		d.report(verdictWarn, "database", where+": reachable, migrations pending",
			"mozi serve applies them at start; mozi migrate up applies them now")
	default:
		d.report(verdictOK, "database", where+": reachable, migrations current", "")
	}
}

func (d *doctor) checkGitea(ctx context.Context, cfg *config.Config, timeout time.Duration) {
	if cfg.Gitea.URL == "" {
		d.report(verdictWarn, "gitea", "no gitea.url", "mozi then works from webhooks alone: set gitea.url and MOZI_GITEA_TOKEN")
		return
	}
	g, err := gitea.New(gitea.Config{URL: cfg.Gitea.URL, Token: cfg.Gitea.Token.Value(),
		Timeout: timeout, MaxAttempts: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		d.report(verdictFail, "gitea", err.Error(), "")
		return
	}
	forge, err := g.DetectForge(ctx)
	if err != nil {
		d.report(verdictFail, "gitea", cfg.Gitea.URL+": "+err.Error(), "is gitea.url the address mozi reaches Gitea at?")
		return
	}
	d.report(verdictOK, "gitea", fmt.Sprintf("%s: %s", cfg.Gitea.URL, forge), "")
	if forge.Forgejo {
		d.report(verdictOK, "ci failures", forgejoCINote(cfg), "")
	}
	if cfg.Gitea.Token == "" {
		d.report(verdictFail, "gitea token", "not set", "set MOZI_GITEA_TOKEN: a token of the bot user "+cfg.Gitea.BotUser)
		return
	}
	login, err := g.WhoAmI(ctx)
	switch {
	case err != nil:
		d.report(verdictFail, "gitea token", err.Error(), "create a token for "+cfg.Gitea.BotUser+
			" with scopes write:issue, write:repository, read:user (and write:organization for webhook install --org)")
		return
	case !strings.EqualFold(login, cfg.Gitea.BotUser):
		d.report(verdictFail, "gitea token", "acts as "+login+", but gitea.bot_user is "+cfg.Gitea.BotUser,
			"mozi's own comments would be taken for someone else's: use the bot user's token or fix gitea.bot_user")
	default:
		d.report(verdictOK, "gitea token", "acts as "+login, "")
	}
	if len(cfg.Gitea.Repos) == 0 {
		d.report(verdictWarn, "repositories", "gitea.repos is empty", "list the repositories mozi serves so their webhooks can be checked")
		return
	}
	if cfg.Webhook.PublicURL == "" {
		d.report(verdictWarn, "webhook url", "webhook.public_url is not set",
			"set it to the URL Gitea reaches mozi at (…/webhooks/gitea); webhooks are matched on it")
	}
	for _, repo := range cfg.Gitea.Repos {
		d.checkRepo(ctx, g, forge, cfg, repo)
	}
}

// forgejoCINote says where CI failures come from on a Forgejo, which has
// no commit status webhook: doctor and webhook install print it alike.
func forgejoCINote(cfg *config.Config) string {
	return fmt.Sprintf("Forgejo sends no commit status webhooks: mozi learns of CI failures from its status poll, every %s (ticker.status_poll_every)",
		cfg.Ticker.StatusPollEvery)
}

func (d *doctor) checkRepo(ctx context.Context, g *gitea.Client, forge gitea.Forge, cfg *config.Config, repo string) {
	admin, err := g.RepoAdmin(ctx, repo)
	if err != nil {
		d.report(verdictFail, repo, err.Error(), "does the repository exist, and can "+cfg.Gitea.BotUser+" see it?")
		return
	}
	if err := g.CanWriteIssues(ctx, repo); err != nil {
		d.report(verdictFail, repo, err.Error(), "mozi comments on issues: give its token the write:issue scope")
		return
	}
	hooks, err := g.Hooks(ctx, gitea.HookScope{Repo: repo})
	if err != nil {
		hint := "listing webhooks needs admin rights on the repository and the read:repository scope"
		if !admin {
			hint = cfg.Gitea.BotUser + " is not an admin of " + repo + ": make it one (or a collaborator with admin rights)"
		}
		d.report(verdictFail, repo, err.Error(), hint)
		return
	}
	owner, _, _ := strings.Cut(repo, "/")
	if orgHooks, err := g.Hooks(ctx, gitea.HookScope{Org: owner}); err == nil {
		hooks = append(hooks, orgHooks...) // a user owner or no org rights: repository hooks only
	}
	verdictFor, found := hookVerdict(hooks, cfg.Webhook.PublicURL, forge)
	hint := "mozi webhook install --repo " + repo + " creates or fixes it"
	d.report(verdictFor, repo, found, hint)
}

// hookVerdict judges the webhooks of a repository against what mozi needs
// from the forge: a Forgejo's hook cannot send "status", and may be of
// Forgejo's own type.
func hookVerdict(hooks []gitea.Hook, publicURL string, forge gitea.Forge) (verdict, string) {
	var candidates []gitea.Hook
	for _, h := range hooks {
		if publicURL != "" && h.URL == publicURL || publicURL == "" && strings.HasSuffix(h.URL, "/webhooks/gitea") {
			candidates = append(candidates, h)
		}
	}
	if len(candidates) == 0 {
		target := publicURL
		if target == "" {
			target = "…/webhooks/gitea"
		}
		return verdictFail, fmt.Sprintf("no webhook points at %s (%d other webhooks)", target, len(hooks))
	}
	h := candidates[0]
	switch missing := h.MissingEvents(forge); {
	case h.Type != "gitea" && h.Type != "forgejo":
		return verdictFail, fmt.Sprintf("webhook %d is of type %q, not gitea (or forgejo)", h.ID, h.Type)
	case !h.Active:
		return verdictFail, fmt.Sprintf("webhook %d is not active", h.ID)
	case h.ContentType != "json":
		return verdictFail, fmt.Sprintf("webhook %d sends %q, not json", h.ID, h.ContentType)
	case len(missing) > 0:
		return verdictFail, fmt.Sprintf("webhook %d does not send %s", h.ID, strings.Join(missing, ", "))
	}
	return verdictOK, fmt.Sprintf("webhook %d → %s, json, all events (Gitea never shows its secret: a wrong one shows as rejected_signature deliveries; mozi webhook install replaces the hook with one signed by mozi's)", h.ID, h.URL)
}

func (d *doctor) checkAgents(ctx context.Context, e *env, cfg *config.Config, dataDir string) {
	if len(cfg.Agents) == 0 {
		d.report(verdictWarn, "agents", "none declared", "declare agents in the configuration: nothing will be spawned")
		return
	}
	stateDir, err := resolveStateDir(e, cfg, dataDir, slog.New(slog.DiscardHandler))
	if err != nil {
		d.report(verdictFail, "data directory", err.Error(), "")
		return
	}
	if cfg.Backend.Kind != config.BackendLocal {
		d.checkImageAgents(cfg)
		return
	}
	probe, err := local.NewProbe(local.Settings{StateDir: stateDir, User: cfg.Sandbox.User,
		Hide: hiddenPaths(cfg, os.Getenv("PATH"), slog.New(slog.DiscardHandler))})
	if err != nil {
		d.report(verdictFail, "agents' user", err.Error(), "")
		return
	}
	if uid, other := probe.RunsAs(); other {
		verdict, hint := verdictOK, ""
		if cfg.Sandbox.User == "nobody" {
			verdict, hint = verdictWarn, "nobody is shared with other daemons: create a dedicated user (useradd --system mozi-agent) and set sandbox.user"
		}
		d.report(verdict, "agents' user", fmt.Sprintf("mozi runs as root: agents run as %s (uid %d)", cfg.Sandbox.User, uid), hint)
	}
	d.checkSandbox(cfg, probe)
	for _, a := range cfg.Agents {
		d.checkAgent(ctx, cfg, a, stateDir, probe)
	}
}

// checkImageAgents checks agents that run on the container or kubernetes
// backend: their CLI is in their image, not on this machine, so what is
// checked here is that each has an image and its token.
func (d *doctor) checkImageAgents(cfg *config.Config) {
	for _, a := range cfg.Agents {
		subject := "agent " + a.Login
		bad := verdictFail
		if a.Disabled {
			bad = verdictWarn
		}
		image := cmp.Or(a.Image, cfg.BackendImage())
		switch {
		case image == "" && len(cfg.Backend.Images) == 0:
			d.report(bad, subject, "no image to run in on the "+cfg.Backend.Kind+" backend", "set its image, or the backend's default image")
		case a.TokenEnv != "" && d.getenv(a.TokenEnv) == "":
			d.report(bad, subject, a.TokenEnv+" is not set", "export the agent's own Gitea token in "+a.TokenEnv)
		default:
			d.report(verdictOK, subject, fmt.Sprintf("runs in %s on the %s backend (its CLI is checked at its first run)",
				cmp.Or(image, "its repository's image"), cfg.Backend.Kind), "")
		}
	}
}

// checkSandbox checks, when an agent needs it, that the sandbox is there
// and works here as the agents' user (it needs user namespaces).
func (d *doctor) checkSandbox(cfg *config.Config, probe *local.Probe) {
	if !slices.ContainsFunc(cfg.Agents, func(a config.Agent) bool { return a.Sandbox == config.SandboxBwrap }) {
		return
	}
	path, err := probe.CheckSandbox(cfg.Sandbox.Bwrap)
	switch {
	case errors.Is(err, local.ErrSandboxUnavailable):
		d.report(verdictFail, "sandbox", err.Error(), "")
	case err != nil:
		d.report(verdictFail, "sandbox", err.Error(),
			"the sandbox needs unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or an AppArmor profile allowing it); in a container, the run options of deploy/docker-compose.yml (docs/runbook.md, \"Agents' sandbox unavailable\")")
	default:
		d.report(verdictOK, "sandbox", path+" runs an agent's sandbox here", "")
	}
}

// versionTimeout bounds an agent CLI's --version.
const versionTimeout = 20 * time.Second

func (d *doctor) checkAgent(ctx context.Context, cfg *config.Config, a config.Agent, stateDir string, probe *local.Probe) {
	subject := "agent " + a.Login
	bad := verdictFail
	if a.Disabled {
		bad = verdictWarn // nothing is spawned for it until it is enabled
	}
	sa, err := spawnerAgent(a, stateDir)
	if err != nil {
		d.report(bad, subject, err.Error(), "")
		return
	}
	path, err := exec.LookPath(sa.Argv[0])
	if err != nil {
		d.report(bad, subject, fmt.Sprintf("command %q not found", sa.Argv[0]),
			"install it where the agents' user can run it, on mozi's PATH; tasks of this agent fail until then")
		return
	}
	switch {
	case !sa.Worktree:
		if err := writableDir(sa.Workdir); err != nil {
			d.report(bad, subject, "working directory "+sa.Workdir+": "+err.Error(), "create it, writable by the user mozi runs as")
			return
		}
	case remoteURL(cfg) == nil:
		d.report(bad, subject, "works in a worktree, but mozi has no repository to clone from",
			"set gitea.url (or workspace.remote), or workspace: none with a workdir")
		return
	}
	switch {
	case a.TokenEnv != "" && d.getenv(a.TokenEnv) == "":
		d.report(bad, subject, a.TokenEnv+" is not set", "export the agent's own Gitea token in "+a.TokenEnv)
		return
	case a.TokenFile != "":
		if _, err := os.ReadFile(a.TokenFile); err != nil {
			d.report(bad, subject, "token file: "+err.Error(), "")
			return
		}
	}
	if sa.Sandboxed && !probe.Sandboxed() {
		d.report(verdictWarn, subject, "runs sandboxed: its tasks fail until the sandbox above works", "")
		return
	}
	if sa.Sandboxed {
		if by, hidden := probe.Conceals(sa.Agent, path); hidden {
			d.report(bad, subject, fmt.Sprintf("its command %s cannot be seen inside its sandbox (%s is hidden there)", path, by),
				"install the CLI elsewhere (not in /tmp, /run, mozi's data directory or home), or set sandbox: none; its tasks fail at once until then")
			return
		}
	}
	version := "version not asked"
	if a.Preset != "" && a.Preset != "shell" {
		if version, err = probe.Version(ctx, sa.Agent, path, versionTimeout); err != nil {
			d.report(bad, subject, fmt.Sprintf("%s --version: %v", path, err),
				"the CLI must run as the agents' user"+map[bool]string{true: ", inside the sandbox", false: ""}[sa.Sandboxed])
			return
		}
	}
	where := "in a worktree per task"
	if !sa.Worktree {
		where = "in " + sa.Workdir
	}
	state := ""
	if a.Disabled {
		state = ", disabled"
	}
	if !sa.Sandboxed {
		d.report(verdictWarn, subject, fmt.Sprintf("%s (%s), %s, NOT sandboxed%s", path, version, where, state),
			"sandbox: none lets the agent read what mozi's user can read and outlive its run: prefer sandbox: bwrap")
		return
	}
	d.report(verdictOK, subject, fmt.Sprintf("%s (%s), %s, sandboxed%s", path, version, where, state), "")
}

// writableDir checks that dir, or the nearest parent mozi would create it
// in, accepts a new file.
func writableDir(dir string) error {
	for p := dir; ; p = filepath.Dir(p) {
		if st, err := os.Stat(p); err == nil {
			if !st.IsDir() {
				return fmt.Errorf("%s is not a directory", p)
			}
			f, err := os.CreateTemp(p, ".mozi-doctor-")
			if err != nil {
				return fmt.Errorf("not writable: %w", err)
			}
			name := f.Name()
			f.Close()
			return os.Remove(name)
		}
		if p == filepath.Dir(p) {
			return errors.New("no existing parent")
		}
	}
}
