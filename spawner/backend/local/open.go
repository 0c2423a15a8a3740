package local

import (
	"errors"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/moziplus/mozi/spawner/backend/local/sandbox"
	"github.com/moziplus/mozi/spawner/backend/local/workspace"
)

// Settings are the local backend's part of mozi's configuration.
type Settings struct {
	StateDir string
	// User is the agents' user when mozi is root (sandbox.user).
	User string
	// Bwrap is bubblewrap's path ("" looks it up).
	Bwrap string
	// RemoteURL is each repository's clone URL (nil: nothing to clone
	// from, agents with a worktree cannot run).
	RemoteURL func(repo string) (string, error)
	// Token authenticates mozi's own git commands (mirrors, fetches).
	Token string
	// WorkspaceRoot holds mirrors and worktrees (default
	// StateDir/workspaces).
	WorkspaceRoot    string
	KeepFinished     time.Duration
	DiskBudget       int64
	CheckoutsPerRepo int
	// Hide are paths sandboxed agents must not see besides StateDir.
	Hide   []string
	Logger *slog.Logger
	// NoSandbox skips looking for bubblewrap: mozi prompt render needs
	// none, nor does a container backend that uses these places.
	NoSandbox bool
	// DescribeOnly: nothing will run (mozi prompt render): agents' files
	// are not given to their user.
	DescribeOnly bool
}

// Open builds the local backend from mozi's settings: the agents' user,
// the worktree manager, the sandbox.
func Open(s Settings) (*Backend, error) {
	cfg := Config{StateDir: s.StateDir, Hide: s.Hide, Logger: s.Logger}
	var err error
	if !s.DescribeOnly {
		if cfg.RunAs, err = AgentsUser(s.User); err != nil {
			return nil, err
		}
	}
	if s.RemoteURL != nil {
		root := s.WorkspaceRoot
		if root == "" {
			root = filepath.Join(s.StateDir, "workspaces")
		}
		var owner *workspace.Owner
		if cfg.RunAs != nil {
			owner = &workspace.Owner{UID: int(cfg.RunAs.Uid), GID: int(cfg.RunAs.Gid)}
		}
		cfg.Workspaces, err = workspace.New(workspace.Config{Root: root, RemoteURL: s.RemoteURL, Token: s.Token,
			KeepFinished: s.KeepFinished, DiskBudget: s.DiskBudget, CheckoutsPerRepo: s.CheckoutsPerRepo,
			Owner: owner, Logger: s.Logger})
		if err != nil {
			return nil, err
		}
	}
	if s.NoSandbox {
		cfg.SandboxErr = sandbox.ErrUnavailable
		return New(cfg), nil
	}
	cfg.Sandbox, cfg.SandboxErr = sandbox.New(s.Bwrap, filepath.Join(s.StateDir, "sandbox"))
	if cfg.SandboxErr != nil && !errors.Is(cfg.SandboxErr, sandbox.ErrUnavailable) {
		return nil, cfg.SandboxErr
	}
	return New(cfg), nil
}
