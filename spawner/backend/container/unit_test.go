package container_test

import (
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/spawner/backend"
	"github.com/moziplus/mozi/spawner/backend/container"
)

func statUID(fi os.FileInfo) uint32 { return fi.Sys().(*syscall.Stat_t).Uid }

func TestCheck(t *testing.T) {
	t.Parallel()
	places := &fakePlaces{t: t}
	withDefault, err := container.New(container.Config{Socket: "/x.sock", Owner: "o", Scope: "s", Image: "default:1", Places: places})
	require.NoError(t, err)
	without, err := container.New(container.Config{Socket: "/x.sock", Owner: "o", Scope: "s", Places: places})
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		b     *container.Backend
		agent backend.Agent
		image string
		err   string
	}{
		{name: "own image", b: without, agent: backend.Agent{Login: "a", Argv: []string{"claude"}, Image: "own:2"}, image: "own:2"},
		{name: "default image", b: withDefault, agent: backend.Agent{Login: "a", Argv: []string{"claude"}}, image: "default:1"},
		{name: "own beats default", b: withDefault, agent: backend.Agent{Login: "a", Argv: []string{"claude"}, Image: "own:2"}, image: "own:2"},
		{name: "no image", b: without, agent: backend.Agent{Login: "a", Argv: []string{"claude"}},
			err: "agent a: no container image: set the agent's image or the container backend's default image"},
		{name: "no command", b: withDefault, agent: backend.Agent{Login: "a"}, err: "agent a: no command"},
	} {
		got, err := tc.b.Check(tc.agent, nil)
		if tc.err != "" {
			require.EqualError(t, err, tc.err, tc.name)
			continue
		}
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.image, got.Image, tc.name)
		require.Equal(t, tc.agent.Argv, got.Argv, tc.name, "the command is not resolved on the host")
	}
}

func TestNewConfig(t *testing.T) {
	t.Parallel()
	places := &fakePlaces{t: t}
	env := func(v string) func(string) string { return func(string) string { return v } }
	for _, tc := range []struct {
		name   string
		cfg    container.Config
		socket string
		err    string
	}{
		{name: "explicit", cfg: container.Config{Socket: "/s.sock"}, socket: "/s.sock"},
		{name: "DOCKER_HOST", cfg: container.Config{Getenv: env("unix:///run/user/1000/podman/podman.sock")}, socket: "/run/user/1000/podman/podman.sock"},
		{name: "DOCKER_HOST over TCP", cfg: container.Config{Getenv: env("tcp://10.0.0.1:2375")}, err: "only unix:///path sockets"},
		{name: "no owner", cfg: container.Config{Socket: "/s.sock", Owner: "-"}, err: "no owner"},
	} {
		cfg := tc.cfg
		cfg.Scope, cfg.Places = "s", places
		cfg.Owner = map[bool]string{true: "", false: "o"}[cfg.Owner == "-"]
		b, err := container.New(cfg)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.name)
			continue
		}
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.socket, b.Socket(), tc.name)
		require.Equal(t, "container", b.Name())
	}
	b, err := container.New(container.Config{Socket: "/s.sock", Owner: "o", Scope: "s", Places: places})
	require.NoError(t, err)
	require.Equal(t, backend.Where{Dir: "/described"}, b.Describe(t.Context(), backend.Run{}))
}
