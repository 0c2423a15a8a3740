// Package container runs agents in containers through the Docker Engine
// API (Docker, or podman's API service): each run is a container of the
// agent's image with the run's place bound in at the same paths, the
// agent's environment and nothing of mozi's, its limits as cgroup and
// rlimit settings, and labels that say whose run it is.
//
// Invariants:
//   - Preparing, describing and sweeping places is the Places
//     dependency's (the local backend's): a container sees the host's
//     checkout bound in where the host has it, so Where() is the local
//     one and a worktree's .git file, which names its mirror by absolute
//     path, works unchanged.
//   - A container carries the labels backend.LabelTask, LabelAttempt,
//     LabelOwner and LabelScope. The sweep removes the containers of this
//     scope whose task is over or whose running attempt or lease owner is
//     not theirs — what a dead replica or an earlier life left — and no
//     other.
//   - mozi never pulls: an image the engine does not hold is the run's
//     failure, with its name. The engine not answering is
//     backend.ErrUnavailable: the task waits.
//   - Once Done is closed nothing more is written to the run's output,
//     and the container is removed (unless the engine was lost; the
//     sweep then finds it).
package container

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"sync"
	"syscall"

	"github.com/moziplus/mozi/spawner/backend"
	"github.com/moziplus/mozi/spawner/backend/container/engine"
)

// Places prepares, describes and sweeps the host places runs work in
// (the local backend provides it). The places it prepares implement
// backend.Binder.
type Places interface {
	Prepare(ctx context.Context, r backend.Run) (backend.Place, error)
	Describe(ctx context.Context, r backend.Run) backend.Where
	Sweep(ctx context.Context, l backend.Ledger) (backend.SweepResult, error)
}

// Config configures the backend.
type Config struct {
	// Socket is the engine's unix socket. Default: the path of
	// $DOCKER_HOST when it is a unix:// address, else
	// /run/podman/podman.sock when it exists, else /var/run/docker.sock.
	Socket string
	// Owner is this replica's id (its lease owner name). Required.
	Owner string
	// Scope names this mozi's runs (spawner.RunScope). Required.
	Scope string
	// User is "uid:gid" the agent runs as; the host files of its place
	// belong to that user. Default: mozi's own uid and gid.
	User string
	// Network is the containers' network mode. Default "host": agents
	// reach their model API and Gitea at the addresses mozi's
	// configuration gives, loopback ones included, as a local run does.
	Network string
	// Image is the image of agents that name none ("": such agents
	// cannot run here).
	Image string
	// NoInit runs the agent as the container's PID 1 instead of under
	// the engine's init (docker-init, podman's catatonit), which reaps
	// the zombies an agent's tools leave and passes the stop signal on.
	NoInit bool
	// Places prepares the runs' places. Required.
	Places Places
	// Logger: default slog.Default().
	Logger *slog.Logger
	// Getenv reads DOCKER_HOST. Default os.Getenv.
	Getenv func(string) string
}

// DefaultNetwork is Config.Network's default.
const DefaultNetwork = "host"

// Backend runs agents in containers.
type Backend struct {
	cfg    Config
	engine *engine.Client
	log    *slog.Logger

	mu sync.Mutex
	// live are the containers of this backend's runs not yet ended: the
	// sweep leaves them to their run even when the ledger already says
	// their task is over (a stop on its way).
	live map[string]bool
}

var _ backend.Backend = (*Backend)(nil)

// New checks cfg and returns the backend. It does not connect to the
// engine: Start and Sweep do, and say when it does not answer.
func New(cfg Config) (*Backend, error) {
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	cfg.Network = cmp.Or(cfg.Network, DefaultNetwork)
	cfg.User = cmp.Or(cfg.User, fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()))
	switch {
	case cfg.Owner == "":
		return nil, errors.New("container backend: no owner (the replica's id)")
	case cfg.Scope == "":
		return nil, errors.New("container backend: no run scope")
	case cfg.Places == nil:
		return nil, errors.New("container backend: no places")
	}
	if cfg.Socket == "" {
		s, err := defaultSocket(cfg.Getenv("DOCKER_HOST"))
		if err != nil {
			return nil, fmt.Errorf("container backend: %w", err)
		}
		cfg.Socket = s
	}
	return &Backend{cfg: cfg, engine: engine.New(cfg.Socket), log: cfg.Logger, live: map[string]bool{}}, nil
}

// defaultSocket is the socket of $DOCKER_HOST, else podman's system
// socket when it is there, else Docker's.
func defaultSocket(dockerHost string) (string, error) {
	if dockerHost != "" {
		u, err := url.Parse(dockerHost)
		if err != nil || u.Scheme != "unix" || u.Path == "" {
			return "", fmt.Errorf("DOCKER_HOST=%s: only unix:///path sockets are supported", dockerHost)
		}
		return u.Path, nil
	}
	if _, err := os.Stat("/run/podman/podman.sock"); err == nil {
		return "/run/podman/podman.sock", nil
	}
	return "/var/run/docker.sock", nil
}

// Name is "container".
func (b *Backend) Name() string { return "container" }

// Socket is the engine's socket.
func (b *Backend) Socket() string { return b.cfg.Socket }

// Check resolves the agent's image (its own, else the default). The
// command is not looked up: it lives in the image, and a command the
// image lacks fails the run when it starts.
func (b *Backend) Check(a backend.Agent, _ []string) (backend.Agent, error) {
	if len(a.Argv) == 0 || a.Argv[0] == "" {
		return a, fmt.Errorf("agent %s: no command", a.Login)
	}
	a.Image = cmp.Or(a.Image, b.cfg.Image)
	if a.Image == "" {
		return a, fmt.Errorf("agent %s: no container image: set the agent's image or the container backend's default image", a.Login)
	}
	return a, nil
}

// Prepare is the Places'.
func (b *Backend) Prepare(ctx context.Context, r backend.Run) (backend.Place, error) {
	return b.cfg.Places.Prepare(ctx, r)
}

// Describe is the Places'.
func (b *Backend) Describe(ctx context.Context, r backend.Run) backend.Where {
	return b.cfg.Places.Describe(ctx, r)
}

// setLive records whether container id is a run of this backend going on.
func (b *Backend) setLive(id string, live bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if live {
		b.live[id] = true
	} else {
		delete(b.live, id)
	}
}

func (b *Backend) isLive(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.live[id]
}

// unavailable marks an engine that did not answer as the backend being
// unavailable (the task waits); other errors stay the run's failure.
func unavailable(err error) error {
	if errors.Is(err, engine.ErrUnreachable) {
		return fmt.Errorf("%w: %w", backend.ErrUnavailable, err)
	}
	return err
}

// hostLimit is mozi's own hard limit of resource res, what a local run
// would inherit.
func hostLimit(res int) (int64, bool) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(res, &rl); err != nil || rl.Max == ^uint64(0) || rl.Max > 1<<40 {
		return 0, false
	}
	return int64(rl.Max), true
}
