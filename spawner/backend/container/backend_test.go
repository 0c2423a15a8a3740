package container_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/spawner/backend"
	"github.com/moziplus/mozi/spawner/backend/container"
	"github.com/moziplus/mozi/spawner/backend/container/engine"
)

func TestOutputInOrderAndExit(t *testing.T) {
	w := newWorld(t)
	for _, tc := range []struct {
		name   string
		script string
		stdin  []byte
		want   string
		exit   backend.Exit
	}{
		{name: "lines in order", script: `seq 1 2000; echo to-stderr >&2`,
			want: func() string {
				var b strings.Builder
				for i := 1; i <= 2000; i++ {
					fmt.Fprintf(&b, "%d\n", i)
				}
				return b.String() + "to-stderr\n"
			}(),
			exit: backend.Exit{Code: 0}},
		{name: "exit 3", script: `echo failing; exit 3`, want: "failing\n", exit: backend.Exit{Code: 3, Why: "exited with status 3"}},
		{name: "prompt file and working directory", script: `cat "$0"; pwd`,
			want: "the prompt\n{dir}\n", exit: backend.Exit{Code: 0}},
		{name: "stdin", script: `tr a-z A-Z; echo end`, stdin: []byte("from mozi\n"), want: "FROM MOZI\nend\n", exit: backend.Exit{Code: 0}},
		{name: "command not in the image", script: `exec no-such-command`, want: "no-such-command", exit: backend.Exit{Code: 127, Why: "exited with status 127"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := step(1, tc.script)
			s.Stdin, s.Prompt = tc.stdin, "the prompt\n"
			p, err := w.b.Prepare(t.Context(), backend.Run{TaskID: 1, Attempt: 1})
			require.NoError(t, err)
			s.Argv = append(s.Argv, p.Where().PromptFile)
			out := &output{}
			pr, err := w.b.Start(t.Context(), p, s, out)
			require.NoError(t, err)
			waitDone(t, pr)
			require.Equal(t, tc.exit, pr.Exit())
			want := strings.ReplaceAll(tc.want, "{dir}", p.Where().Dir)
			if tc.exit.Code == 127 {
				require.Contains(t, out.String(), want)
			} else {
				require.Equal(t, want, out.String())
			}
		})
	}
	// Every run's container went with its end.
	list, err := engine.New(w.socket).ListContainers(t.Context(), backend.LabelScope+"="+w.scope)
	require.NoError(t, err)
	require.Empty(t, list)
}

func TestStop(t *testing.T) {
	w := newWorld(t)
	t.Run("SIGTERM first", func(t *testing.T) {
		pr, _, out := w.start(w.b, step(1, `trap 'echo got TERM; exit 7' TERM; echo ready; while :; do sleep 0.1; done`))
		out.waitFor(t, "ready")
		pr.Stop(30 * time.Second)
		waitDone(t, pr)
		require.Equal(t, backend.Exit{Code: 7, Why: "exited with status 7"}, pr.Exit())
		require.Equal(t, "ready\ngot TERM\n", out.String())
	})
	t.Run("SIGKILL after the grace", func(t *testing.T) {
		pr, _, out := w.start(w.b, step(2, `trap 'echo ignoring TERM' TERM; echo ready; while :; do sleep 0.1; done`))
		out.waitFor(t, "ready")
		pr.Stop(time.Second)
		waitDone(t, pr)
		require.Equal(t, backend.Exit{Code: -1, Why: "killed by signal KILL"}, pr.Exit())
		require.Equal(t, "ready\nignoring TERM\n", out.String(), "the TERM came before the KILL")
	})
	t.Run("after the end", func(t *testing.T) {
		pr, _, _ := w.start(w.b, step(3, `exit 0`))
		waitDone(t, pr)
		pr.Stop(time.Second)
		require.Equal(t, backend.Exit{Code: 0}, pr.Exit())
	})
}

func TestLimits(t *testing.T) {
	w := newWorld(t)
	s := step(1, `cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes
cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max
ulimit -n; ulimit -u; ulimit -t`)
	s.Agent.Limits = backend.Limits{MemoryBytes: 96 << 20, Processes: 77, OpenFiles: 333, CPUTime: 42 * time.Second}
	exit, out, _ := w.run(s)
	require.Equal(t, backend.Exit{Code: 0}, exit, out)
	require.Equal(t, strings.Join([]string{strconv.Itoa(96 << 20), "77", "333", "77", "42"}, "\n")+"\n", out)

	// The memory limit holds: a process holding more is killed.
	s = step(2, `x=$(head -c 200m /dev/zero | tr '\0' a); echo survived`)
	s.Agent.Limits.MemoryBytes = 48 << 20
	exit, out, _ = w.run(s)
	require.NotContains(t, out, "survived")
	// Killed by the kernel's OOM killer under the engine's init, which
	// reports 137; whether the engine flags the OOM depends on it.
	require.Contains(t, []string{
		"exited with status 137 (as a process killed by signal KILL does)",
		"killed by signal KILL (out of memory: the container's memory limit)",
	}, exit.Why)
}

func TestEnvironment(t *testing.T) {
	t.Setenv("MOZI_TEST_SECRET", "mozi-only")
	w := newWorld(t)
	p, err := w.b.Prepare(t.Context(), backend.Run{TaskID: 1})
	require.NoError(t, err)
	dir := p.Where().Dir
	for _, tc := range []struct {
		name, home string
		want       []string
		absent     []string
	}{
		{name: "home not bound", home: "/root/agents/agent1", want: []string{"AGENT_TOKEN=tok-123", "PATH=/bin"},
			absent: []string{"HOME=/root/agents/agent1", "MOZI_TEST_SECRET", "mozi-only", "/usr/local/bin"}},
		{name: "home bound", home: dir, want: []string{"AGENT_TOKEN=tok-123", "PATH=/bin", "HOME=" + dir},
			absent: []string{"MOZI_TEST_SECRET"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := step(1, `env`)
			s.Env = append(s.Env, "HOME="+tc.home)
			out := &output{}
			pr, err := w.b.Start(t.Context(), p, s, out)
			require.NoError(t, err)
			waitDone(t, pr)
			require.Equal(t, backend.Exit{Code: 0}, pr.Exit())
			lines := strings.Split(out.String(), "\n")
			for _, kv := range tc.want {
				require.Contains(t, lines, kv)
			}
			for _, s := range tc.absent {
				require.NotContains(t, out.String(), s)
			}
		})
	}
}

func TestBindsReadOnly(t *testing.T) {
	w := newWorld(t)
	p, err := w.b.Prepare(t.Context(), backend.Run{TaskID: 1})
	require.NoError(t, err)
	pl := p.(*place)
	s := step(1, `touch "$0/written" && echo wrote; touch "$1/written" 2>/dev/null || echo refused; id -u`)
	s.Argv = append(s.Argv, pl.where.Dir, pl.ro)
	out := &output{}
	pr, err := w.b.Start(t.Context(), p, s, out)
	require.NoError(t, err)
	waitDone(t, pr)
	uid, _ := agentIDs()
	require.Equal(t, fmt.Sprintf("wrote\nrefused\n%d\n", uid), out.String())
	fi, err := os.Stat(filepath.Join(pl.where.Dir, "written"))
	require.NoError(t, err, "the worktree's write is on the host")
	require.Equal(t, uint32(uid), statUID(fi))
	require.NoFileExists(t, filepath.Join(pl.ro, "written"))
}

func TestLabels(t *testing.T) {
	w := newWorld(t)
	s := step(41, `echo ready; while :; do sleep 0.1; done`)
	s.Attempt = 3
	pr, _, out := w.start(w.b, s)
	out.waitFor(t, "ready")
	list, err := engine.New(w.socket).ListContainers(t.Context(), backend.LabelScope+"="+w.scope)
	require.NoError(t, err)
	require.Len(t, list, 1)
	for k, v := range map[string]string{backend.LabelTask: "41", backend.LabelAttempt: "3",
		backend.LabelOwner: "owner-" + t.Name(), backend.LabelScope: w.scope} {
		require.Equal(t, v, list[0].Labels[k], k)
	}
	pr.Stop(0)
	waitDone(t, pr)
	require.Equal(t, backend.Exit{Code: -1, Why: "killed by signal KILL"}, pr.Exit())
}

func TestSweep(t *testing.T) {
	w := newWorld(t)
	dead := w.backend("dead-replica")
	live := w.b
	other := &world{t: t, socket: w.socket, places: w.places, scope: w.scope + "-other"}
	otherScope := other.backend("dead-replica")
	long := `echo ready; while :; do sleep 0.1; done`

	type run struct {
		name string
		b    *container.Backend
		task int64
		gone bool
	}
	runs := []run{
		{"a dead replica's run of a task now running elsewhere", dead, 1, true},
		{"a dead replica's run of a task no one runs", dead, 2, true},
		{"a live replica's run", live, 3, false},
		{"a run whose task is over", dead, 4, true},
		{"a run of a task the database no longer has", dead, 5, true},
		{"another attempt's run", dead, 6, true},
		{"another scope's run", otherScope, 1, false},
		{"this replica's run whose task just ended", live, 7, false},
	}
	procs := map[string]backend.Process{}
	for _, r := range runs {
		pr, _, out := w.start(r.b, step(r.task, long))
		out.waitFor(t, "ready")
		procs[r.name] = pr
	}
	w.places.swept = backend.SweepResult{Removed: 2, Bytes: 1234}
	l := ledger{
		1: {RunningAttempt: 1, LeaseOwner: "another-replica"},
		2: {},
		3: {RunningAttempt: 1, LeaseOwner: "owner-" + t.Name()},
		4: {Terminal: true, FinishedAt: time.Now()},
		6: {RunningAttempt: 2, LeaseOwner: "dead-replica"},
		7: {Terminal: true, FinishedAt: time.Now()},
	}
	res, err := live.Sweep(t.Context(), l)
	require.NoError(t, err)
	require.Equal(t, backend.SweepResult{Removed: 2, Bytes: 1234, Ended: 5}, res)

	for _, r := range runs {
		pr := procs[r.name]
		if r.gone {
			waitDone(t, pr)
			// Its follower saw the kill (137) or the container gone (-1).
			require.Contains(t, []int{-1, 137}, pr.Exit().Code, r.name)
			continue
		}
		select {
		case <-pr.Done():
			t.Fatalf("%s: ended by the sweep", r.name)
		default:
		}
		pr.Stop(0)
		waitDone(t, pr)
	}
}

func TestUnavailable(t *testing.T) {
	places := &fakePlaces{t: t}
	b, err := container.New(container.Config{Socket: filepath.Join(t.TempDir(), "no.sock"), Owner: "o", Scope: "s",
		Image: "busybox", Places: places})
	require.NoError(t, err)
	p, err := b.Prepare(t.Context(), backend.Run{TaskID: 1})
	require.NoError(t, err)
	_, err = b.Start(t.Context(), p, step(1, "true"), &output{})
	require.ErrorIs(t, err, backend.ErrUnavailable)
	require.ErrorContains(t, err, "no.sock")
	_, err = b.Sweep(t.Context(), ledger{})
	require.ErrorIs(t, err, backend.ErrUnavailable)
}

func TestImageMissing(t *testing.T) {
	w := newWorld(t)
	p, err := w.b.Prepare(t.Context(), backend.Run{TaskID: 1})
	require.NoError(t, err)
	s := step(1, "true")
	s.Agent.Image = "localhost/no-such-agent-image:7"
	_, err = w.b.Start(t.Context(), p, s, &output{})
	require.Error(t, err)
	require.NotErrorIs(t, err, backend.ErrUnavailable, "the task must fail, not wait")
	require.ErrorContains(t, err, `image "localhost/no-such-agent-image:7" is not on the container engine`)
	require.NotContains(t, err.Error(), "\n")
}

func TestNotBindable(t *testing.T) {
	b, err := container.New(container.Config{Socket: "/nonexistent.sock", Owner: "o", Scope: "s", Image: "x", Places: &fakePlaces{t: t}})
	require.NoError(t, err)
	_, err = b.Start(t.Context(), unbindable{}, step(1, "true"), &output{})
	require.ErrorContains(t, err, "not a backend.Binder")
}

type unbindable struct{}

func (unbindable) Where() backend.Where { return backend.Where{} }
func (unbindable) Release()             {}
