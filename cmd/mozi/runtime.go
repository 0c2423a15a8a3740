package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/moziplus/mozi/cmd/mozi/internal/config"
	"github.com/moziplus/mozi/spawner"
	"github.com/moziplus/mozi/spawner/backend/local/sandbox"
	"github.com/moziplus/mozi/spawner/backend/local/workspace"
)

// agentRuntime is where agents run: their user, their worktrees, their sandbox.
type agentRuntime struct {
	// runAs is the agents' user when mozi is root (nil otherwise).
	runAs      *syscall.Credential
	workspaces *workspace.Manager // nil: no repository to clone from
	sandbox    *sandbox.Sandbox   // nil: sandboxErr says why
	sandboxErr error
	// hide are the paths no sandboxed agent may see besides the state
	// directory.
	hide []string
}

// agentsUser is who agents run as: nobody special when mozi is not root;
// when it is, the configured unprivileged user (mozi never runs an agent
// as root).
func agentsUser(cfg *config.Config) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(cfg.Sandbox.User)
	if err != nil {
		return nil, fmt.Errorf("sandbox.user: mozi runs as root and runs agents as %q, which does not exist: create it (useradd --system %s) or name another user", cfg.Sandbox.User, cfg.Sandbox.User)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if uid == 0 {
		return nil, fmt.Errorf("sandbox.user: %q is root; agents need an unprivileged user", cfg.Sandbox.User)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

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

func newAgentRuntime(cfg *config.Config, stateDir string, logger *slog.Logger) (*agentRuntime, error) {
	rt := &agentRuntime{}
	var err error
	if rt.runAs, err = agentsUser(cfg); err != nil {
		return nil, err
	}
	if rt.workspaces, err = newWorkspaces(cfg, stateDir, rt.runAs, logger); err != nil {
		return nil, err
	}
	rt.sandbox, rt.sandboxErr = sandbox.New(cfg.Sandbox.Bwrap, filepath.Join(stateDir, "sandbox"))
	if rt.sandboxErr != nil && !errors.Is(rt.sandboxErr, sandbox.ErrUnavailable) {
		return nil, rt.sandboxErr
	}
	rt.hide = hiddenPaths(cfg, os.Getenv("PATH"), logger)
	return rt, nil
}

// secretsInHome are the usual places of credentials in a home directory.
var secretsInHome = []string{".ssh", ".gnupg", ".aws", ".azure", ".config", ".docker", ".kube", ".netrc",
	".git-credentials", ".pgpass", ".npmrc", ".pypirc", ".claude", ".claude.json", ".codex", ".local/share",
	".local/state", ".bash_history", ".psql_history"}

// newWorkspaces builds the worktree manager; nil when mozi has no
// repository to clone from (no gitea.url, no workspace.remote).
func newWorkspaces(cfg *config.Config, stateDir string, runAs *syscall.Credential, logger *slog.Logger) (*workspace.Manager, error) {
	remote := remoteURL(cfg)
	if remote == nil {
		return nil, nil
	}
	root := cfg.Workspace.Root
	if root == "" {
		root = filepath.Join(stateDir, "workspaces")
	}
	var owner *workspace.Owner
	if runAs != nil {
		owner = &workspace.Owner{UID: int(runAs.Uid), GID: int(runAs.Gid)}
	}
	return workspace.New(workspace.Config{Root: root, RemoteURL: remote,
		Token: cfg.Gitea.Token.Value(), KeepFinished: cfg.Workspace.KeepFinished,
		DiskBudget: int64(cfg.Workspace.DiskBudget), CheckoutsPerRepo: cfg.Workspace.CheckoutsPerRepo,
		Owner: owner, Logger: logger})
}

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
			logger.Warn("the agents' PATH runs through mozi's home: sandboxes hide only its usual credential files; install agent CLIs outside it",
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
	return spawner.Agent{Login: a.Login, Argv: cmd.Argv, Workdir: workdir, Timeout: a.Timeout,
		TokenEnv: a.TokenEnv, TokenFile: a.TokenFile, Usage: cmd.Usage, MaxCostUSD: a.MaxCostUSD, MaxTokens: a.MaxTokens,
		Env: a.Env, PassEnv: a.PassEnv, PresetEnv: cmd.Env, Home: home,
		Worktree: a.Workspace == config.WorkspaceAuto, Sandboxed: a.Sandbox == config.SandboxBwrap,
		Limits: sandbox.Limits{MemoryBytes: int64(a.Limits.Memory), Processes: a.Limits.Processes,
			CPUTime: a.Limits.CPUTime, OpenFiles: a.Limits.OpenFiles}}, nil
}
