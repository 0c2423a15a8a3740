package container_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/spawner/backend"
	"github.com/moziplus/mozi/spawner/backend/backendtest"
	"github.com/moziplus/mozi/spawner/backend/container"
	"github.com/moziplus/mozi/spawner/backend/container/podmantest"
)

func TestMain(m *testing.M) { podmantest.Main(m) }

// agentUID and agentGID are the user runs run as: a user of its own
// when the tests run as root, as mozi in production does.
func agentIDs() (int, int) {
	if os.Getuid() == 0 {
		return 1000, 1000
	}
	return os.Getuid(), os.Getgid()
}

// fakePlaces makes a place per run: a worktree, a run directory holding
// the prompt, and a read-only directory, all bound in.
type fakePlaces struct {
	t     testing.TB
	swept backend.SweepResult
}

type place struct {
	where backend.Where
	binds []backend.Bind
	ro    string
}

func (p *place) Where() backend.Where  { return p.where }
func (p *place) Release()              {}
func (p *place) Binds() []backend.Bind { return p.binds }

func (f *fakePlaces) Prepare(_ context.Context, r backend.Run) (backend.Place, error) {
	base := f.t.TempDir()
	uid, gid := agentIDs()
	p := &place{ro: filepath.Join(base, "shared")}
	work, run := filepath.Join(base, "work"), filepath.Join(base, "run")
	for _, d := range []string{work, run, p.ro} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, err
		}
		if err := os.Chown(d, uid, gid); err != nil {
			return nil, err
		}
	}
	p.where = backend.Where{Dir: work, PromptFile: filepath.Join(run, "prompt.md")}
	p.binds = []backend.Bind{{Path: work}, {Path: run, ReadOnly: true}, {Path: p.ro, ReadOnly: true}}
	return p, nil
}

func (f *fakePlaces) Describe(context.Context, backend.Run) backend.Where {
	return backend.Where{Dir: "/described"}
}

func (f *fakePlaces) Sweep(context.Context, backend.Ledger) (backend.SweepResult, error) {
	return f.swept, nil
}

// world is one test's backend on the test binary's podman.
type world struct {
	t      testing.TB
	socket string
	places *fakePlaces
	scope  string
	b      *container.Backend
}

func newWorld(t testing.TB) *world {
	socket := podmantest.StartWithImage(t)
	var r [4]byte
	_, _ = rand.Read(r[:])
	w := &world{t: t, socket: socket, places: &fakePlaces{t: t}, scope: "test-" + hex.EncodeToString(r[:])}
	w.b = w.backend("owner-" + t.Name())
	return w
}

// backend is another replica (owner) of the same mozi.
func (w *world) backend(owner string) *container.Backend {
	uid, gid := agentIDs()
	b, err := container.New(container.Config{Socket: w.socket, Owner: owner, Scope: w.scope, Image: podmantest.Image,
		User: fmt.Sprintf("%d:%d", uid, gid), Places: w.places})
	require.NoError(w.t, err)
	return b
}

// step is a step running script in busybox's sh.
func step(task int64, script string) backend.Step {
	return backend.Step{TaskID: task, Attempt: 1, Argv: []string{"sh", "-c", script},
		Agent: backend.Agent{Login: "agent1", Limits: backend.Limits{MemoryBytes: 256 << 20, Processes: 256, OpenFiles: 1024}},
		Env:   []string{"PATH=/usr/local/bin:/usr/bin:/bin", "AGENT_TOKEN=tok-123"}, KillGrace: 5 * time.Second}
}

// start prepares a place and starts s in it on b.
func (w *world) start(b *container.Backend, s backend.Step) (backend.Process, *place, *output) {
	w.t.Helper()
	p, err := b.Prepare(w.t.Context(), backend.Run{TaskID: s.TaskID, Attempt: s.Attempt})
	require.NoError(w.t, err)
	out := &output{}
	pr, err := b.Start(w.t.Context(), p, s, out)
	require.NoError(w.t, err)
	return pr, p.(*place), out
}

// run starts s and waits for its end.
func (w *world) run(s backend.Step) (backend.Exit, string, *place) {
	w.t.Helper()
	pr, p, out := w.start(w.b, s)
	waitDone(w.t, pr)
	return pr.Exit(), out.String(), p
}

// waitDone waits for the process's end; the bound only keeps a broken
// engine from hanging the tests.
func waitDone(t testing.TB, pr backend.Process) {
	t.Helper()
	select {
	case <-pr.Done():
	case <-time.After(2 * time.Minute):
		t.Fatal("the run did not end")
	}
}

// output is a run's output as the spawner would collect it.
type output struct{ backendtest.Output }

// waitFor polls until the output holds s.
func (o *output) waitFor(t testing.TB, s string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(o.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("output never held %q; it is %q", s, o.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ledger is a fixed Ledger.
type ledger map[int64]backend.TaskEnd

func (l ledger) TaskEnds(_ context.Context, ids []int64) (map[int64]backend.TaskEnd, error) {
	out := map[int64]backend.TaskEnd{}
	for _, id := range ids {
		if e, ok := l[id]; ok {
			out[id] = e
		}
	}
	return out, nil
}
