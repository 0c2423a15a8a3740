package engine_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/spawner/backend/container/engine"
	"github.com/moziplus/mozi/spawner/backend/container/podmantest"
)

func TestMain(m *testing.M) { podmantest.Main(m) }

// run creates a busybox container running script, attaches (with stdin
// when given), starts it and returns its output and exit status; the
// container is removed at the end.
func run(t *testing.T, c *engine.Client, script string, stdin []byte, image ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx := t.Context()
	cfg := engine.ContainerConfig{
		Image: append(image, podmantest.Image)[0], Entrypoint: []string{""}, Cmd: []string{"sh", "-c", script},
		AttachStdout: true, AttachStderr: true, Labels: map[string]string{"mozi.test": t.Name()},
		HostConfig: engine.HostConfig{NetworkMode: "none", Ulimits: []engine.Ulimit{{Name: "nproc", Soft: 1024, Hard: 1024}, {Name: "nofile", Soft: 1024, Hard: 1024}}},
	}
	if stdin != nil {
		cfg.AttachStdin, cfg.OpenStdin, cfg.StdinOnce = true, true, true
	}
	id, err := c.CreateContainer(ctx, "", cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.RemoveContainer(context.Background(), id) })
	s, err := c.Attach(ctx, id, stdin != nil)
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, c.StartContainer(ctx, id))
	if stdin != nil {
		go func() {
			_, _ = s.Write(stdin)
			_ = s.CloseStdin()
		}()
	}
	var out, errb bytes.Buffer
	require.NoError(t, engine.Demux(s, &out, &errb))
	code, err = c.WaitContainer(ctx, id)
	require.NoError(t, err)
	return out.String(), errb.String(), code
}

func TestContainerLifecycle(t *testing.T) {
	c := engine.New(podmantest.StartWithImage(t))

	out, errOut, code := run(t, c, `for i in 1 2 3; do echo out$i; echo err$i >&2; done; exit 3`, nil)
	require.Equal(t, "out1\nout2\nout3\n", out)
	require.Equal(t, "err1\nerr2\nerr3\n", errOut)
	require.Equal(t, 3, code)

	out, _, code = run(t, c, `tr a-z A-Z; echo done`, []byte("from stdin\n"))
	require.Equal(t, "FROM STDIN\ndone\n", out)
	require.Equal(t, 0, code)

	list, err := c.ListContainers(t.Context(), "mozi.test="+t.Name())
	require.NoError(t, err)
	require.Len(t, list, 2, "both containers carry the label")
	none, err := c.ListContainers(t.Context(), "mozi.test=nobody")
	require.NoError(t, err)
	require.Empty(t, none)
}

// An image's entrypoint does not wrap the command: Entrypoint [""]
// clears it, so an agent's argv runs as written.
func TestEntrypointCleared(t *testing.T) {
	c := engine.New(podmantest.StartWithImage(t))
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	df := []byte("FROM " + podmantest.Image + "\nENTRYPOINT [\"/bin/echo\", \"entrypoint\"]\n")
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(df))}))
	_, err := tw.Write(df)
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	require.NoError(t, c.BuildImage(t.Context(), "localhost/mozi-test-entrypoint:1", &buf))
	img, err := c.InspectImage(t.Context(), "localhost/mozi-test-entrypoint:1")
	require.NoError(t, err)
	require.Equal(t, []string{"/bin/echo", "entrypoint"}, img.Config.Entrypoint)
	require.Contains(t, img.Config.Env, "PATH=/bin")

	out, _, code := run(t, c, "echo the command", nil, "localhost/mozi-test-entrypoint:1")
	require.Equal(t, "the command\n", out)
	require.Equal(t, 0, code)
}

func TestStopAndRemove(t *testing.T) {
	c := engine.New(podmantest.StartWithImage(t))
	ctx := t.Context()
	id, err := c.CreateContainer(ctx, "", engine.ContainerConfig{Image: podmantest.Image, Cmd: []string{"sleep", "600"},
		HostConfig: engine.HostConfig{NetworkMode: "none", Ulimits: []engine.Ulimit{{Name: "nproc", Soft: 1024, Hard: 1024}, {Name: "nofile", Soft: 1024, Hard: 1024}}}})
	require.NoError(t, err)
	require.NoError(t, c.StartContainer(ctx, id))
	info, err := c.InspectContainer(ctx, id)
	require.NoError(t, err)
	require.True(t, info.State.Running)
	// sleep is PID 1 without a handler: SIGTERM does nothing, the
	// SIGKILL after the grace ends it.
	require.NoError(t, c.StopContainer(ctx, id, 0))
	code, err := c.WaitContainer(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 137, code)
	require.NoError(t, c.StopContainer(ctx, id, time.Second), "stopping a stopped container")

	// A kill sends the signal asked for: a trap answers USR1.
	id2, err := c.CreateContainer(ctx, "", engine.ContainerConfig{Image: podmantest.Image, AttachStdout: true,
		Cmd:        []string{"sh", "-c", `trap 'echo got USR1; exit 4' USR1; echo ready; while :; do sleep 0.1; done`},
		HostConfig: engine.HostConfig{NetworkMode: "none", Ulimits: []engine.Ulimit{{Name: "nproc", Soft: 1024, Hard: 1024}, {Name: "nofile", Soft: 1024, Hard: 1024}}}})
	require.NoError(t, err)
	defer c.RemoveContainer(context.Background(), id2)
	s, err := c.Attach(ctx, id2, false)
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, c.StartContainer(ctx, id2))
	r := bufio.NewReader(s)
	hdr := make([]byte, 8)
	_, err = io.ReadFull(r, hdr)
	require.NoError(t, err)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ready\n", line)
	require.NoError(t, c.KillContainer(ctx, id2, "USR1"))
	var out bytes.Buffer
	require.NoError(t, engine.Demux(r, &out, io.Discard))
	require.Equal(t, "got USR1\n", out.String())
	code, err = c.WaitContainer(ctx, id2)
	require.NoError(t, err)
	require.Equal(t, 4, code)

	require.NoError(t, c.RemoveContainer(ctx, id))
	_, err = c.InspectContainer(ctx, id)
	require.True(t, engine.IsNotFound(err), "%v", err)
	err = c.RemoveContainer(ctx, id)
	require.True(t, engine.IsNotFound(err), "%v", err)
}

func TestErrors(t *testing.T) {
	socket := podmantest.StartWithImage(t)
	c := engine.New(socket)

	_, err := c.InspectImage(t.Context(), "localhost/no-such-image:1")
	require.True(t, engine.IsNotFound(err), "%v", err)
	require.ErrorContains(t, err, `inspect image "localhost/no-such-image:1"`)
	require.NotContains(t, err.Error(), "\n")

	_, err = c.CreateContainer(t.Context(), "", engine.ContainerConfig{Image: "localhost/no-such-image:1", Cmd: []string{"true"}})
	require.Error(t, err)
	require.ErrorContains(t, err, "no-such-image")

	err = c.BuildImage(t.Context(), "localhost/broken:1", strings.NewReader(""))
	require.Error(t, err)

	gone := engine.New(filepath.Join(t.TempDir(), "none.sock"))
	err = gone.Ping(t.Context())
	require.ErrorIs(t, err, engine.ErrUnreachable)
	require.ErrorContains(t, err, "none.sock")
	_, err = gone.Attach(t.Context(), "x", false)
	require.ErrorIs(t, err, engine.ErrUnreachable)

	var apiErr *engine.Error
	_, err = c.InspectContainer(t.Context(), "no-such-container")
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 404, apiErr.Status)
	require.NotEmpty(t, apiErr.Message)
}
