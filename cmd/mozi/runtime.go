package main

import (
	"cmp"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/moziplus/mozi/cmd/mozi/internal/config"
	"github.com/moziplus/mozi/spawner"
	"github.com/moziplus/mozi/spawner/backend"
	"github.com/moziplus/mozi/spawner/backend/container"
	"github.com/moziplus/mozi/spawner/backend/kube"
	"github.com/moziplus/mozi/spawner/backend/local"
)

// remoteURL turns workspace.remote (or Gitea's URL) into each
// repository's clone URL; nil when there is nothing to clone from.
func remoteURL(cfg *config.Config) func(string) (string, error) {
	tmpl := cfg.Workspace.Remote
	if tmpl == "" && cfg.Gitea.URL != "" {
		tmpl = strings.TrimSuffix(cfg.Gitea.URL, "/") + "/{repo}.git"
	}
	if tmpl == "" {
		return nil
	}
	return func(repo string) (string, error) { return strings.ReplaceAll(tmpl, "{repo}", repo), nil }
}

// backendUse says what a backend is built for.
type backendUse int

const (
	runAgents    backendUse = iota // mozi serve
	describeOnly                   // mozi prompt render: where a run would be, nothing started
	placesOnly                     // worktrees for another backend's runs: no sandbox
)

// newBackend builds the backend agents run on, as configured.
func newBackend(cfg *config.Config, stateDir, owner string, logger *slog.Logger) (backend.Backend, error) {
	return newBackendFor(cfg, stateDir, owner, logger, runAgents)
}

func newBackendFor(cfg *config.Config, stateDir, owner string, logger *slog.Logger, use backendUse) (backend.Backend, error) {
	switch cfg.Backend.Kind {
	case config.BackendLocal:
		return newLocalBackend(cfg, stateDir, logger, use)
	case config.BackendContainer:
		// The places are the local backend's worktrees, mounted into each
		// container; the sandbox is the container.
		places, err := newLocalBackend(cfg, stateDir, logger, placesOnly)
		if err != nil || use == describeOnly {
			return places, err
		}
		return container.New(container.Config{Socket: cfg.Backend.Container.Socket, Owner: owner, Scope: places.Scope(),
			User: places.User(), Network: cfg.Backend.Container.Network, Image: cfg.Backend.Container.Image, Places: places,
			Logger: logger})
	case config.BackendKubernetes:
		k := cfg.Backend.Kube
		clone := remoteURL(cfg) // nil without gitea.url or workspace.remote: kube.New says so
		if k.Remote != "" {
			clone = func(repo string) (string, error) { return strings.ReplaceAll(k.Remote, "{repo}", repo), nil }
		}
		var remote func(string) string
		if clone != nil {
			remote = func(repo string) string { u, _ := clone(repo); return u }
		}
		return kube.New(kube.Config{Kubeconfig: k.Kubeconfig, Namespace: k.Namespace, Owner: cmp.Or(owner, "prompt-render"),
			Scope: local.RunScope(stateDir), RemoteURL: remote,
			Image: k.Image, CheckoutImage: k.CheckoutImage, PullPolicy: corev1.PullPolicy(k.PullPolicy),
			HostNetwork: k.HostNetwork, TTLAfterFinished: k.TTLAfterFinished, Logger: logger})
	default:
		return nil, fmt.Errorf("backend.kind: %q is not available in this build", cfg.Backend.Kind)
	}
}

// newLocalBackend builds the backend that runs agents on this machine.
func newLocalBackend(cfg *config.Config, stateDir string, logger *slog.Logger, use backendUse) (*local.Backend, error) {
	return local.Open(local.Settings{StateDir: stateDir, User: cfg.Sandbox.User, Bwrap: cfg.Sandbox.Bwrap, NoSandbox: use != runAgents, DescribeOnly: use == describeOnly,
		RemoteURL: remoteURL(cfg), Token: cfg.Gitea.Token.Value(), WorkspaceRoot: cfg.Workspace.Root,
		KeepFinished: cfg.Workspace.KeepFinished, DiskBudget: int64(cfg.Workspace.DiskBudget),
		CheckoutsPerRepo: cfg.Workspace.CheckoutsPerRepo, Hide: hiddenPaths(cfg, os.Getenv("PATH"), logger), Logger: logger})
}

// secretsInHome are the usual places of credentials in a home directory.
var secretsInHome = []string{".ssh", ".gnupg", ".aws", ".azure", ".config", ".docker", ".kube", ".netrc",
	".git-credentials", ".pgpass", ".npmrc", ".pypirc", ".claude", ".claude.json", ".codex", ".local/share",
	".local/state", ".bash_history", ".psql_history"}

// hiddenPaths are what sandboxed agents must not see besides mozi's state
// directory: its configuration and secret files, its own home, and every
// agent's home, own directory and token file (an agent's own home and
// directory come back through their binds). When the agents' PATH runs
// through mozi's home (CLIs installed there), only the usual credential
// files of that home are hidden, and mozi says so.
func hiddenPaths(cfg *config.Config, path string, logger *slog.Logger) []string {
	var hide []string
	if cfg.Source != "" {
		if abs, err := filepath.Abs(cfg.Source); err == nil {
			hide = append(hide, abs)
		}
	}
	hide = append(hide, cfg.SecretFiles...)
	if home, err := os.UserHomeDir(); err == nil && home != "/" {
		if dir, inside := pathInside(path, home); inside {
			// Only a sandboxed agent is kept from what is hidden: without one
			// (the demo's agents) there is nothing to warn about.
			warn := logger.Info
			if slices.ContainsFunc(cfg.Agents, func(a config.Agent) bool { return a.Sandbox == config.SandboxBwrap }) {
				warn = logger.Warn
			}
			warn("the agents' PATH runs through mozi's home: sandboxes hide only its usual credential files; install agent CLIs outside it",
				"home", home, "path_entry", dir)
			for _, p := range secretsInHome {
				hide = append(hide, filepath.Join(home, p))
			}
		} else {
			hide = append(hide, home)
		}
	}
	for _, a := range cfg.Agents {
		for _, p := range []string{a.Home, a.Workdir, a.TokenFile} {
			if p != "" {
				hide = append(hide, p)
			}
		}
	}
	return hide
}

// pathInside returns the first entry of a PATH list inside dir.
func pathInside(path, dir string) (string, bool) {
	for _, p := range filepath.SplitList(path) {
		if rel, err := filepath.Rel(dir, p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return p, true
		}
	}
	return "", false
}

// agentDirs are an agent's home and (workspace: none) working directory,
// under the data directory unless configured.
func agentDirs(a config.Agent, stateDir string) (home, workdir string) {
	home, workdir = a.Home, a.Workdir
	if home == "" {
		home = filepath.Join(stateDir, "agents", a.Login, "home")
	}
	if workdir == "" && a.Workspace == config.WorkspaceNone {
		workdir = filepath.Join(stateDir, "agents", a.Login, "work")
	}
	return home, workdir
}

// spawnerAgent is the spawner's view of a declared agent.
func spawnerAgent(a config.Agent, stateDir string) (spawner.Agent, error) {
	cmd, err := spawner.ResolveAgent(a.Preset, a.Command, a.Script, a.Args)
	if err != nil {
		return spawner.Agent{}, fmt.Errorf("agent %s: %w", a.Login, err)
	}
	home, workdir := agentDirs(a, stateDir)
	return spawner.Agent{Agent: backend.Agent{Login: a.Login, Argv: cmd.Argv, Workdir: workdir, Home: home, Image: a.Image,
		Worktree: a.Workspace == config.WorkspaceAuto, Sandboxed: a.Sandbox == config.SandboxBwrap,
		Limits: backend.Limits{MemoryBytes: int64(a.Limits.Memory), Processes: a.Limits.Processes,
			CPUTime: a.Limits.CPUTime, OpenFiles: a.Limits.OpenFiles}},
		Timeout: a.Timeout, TokenEnv: a.TokenEnv, TokenFile: a.TokenFile, Usage: cmd.Usage,
		MaxCostUSD: a.MaxCostUSD, MaxTokens: a.MaxTokens, Env: a.Env, PassEnv: a.PassEnv, PresetEnv: cmd.Env,
		Credential: a.Credential}, nil
}
