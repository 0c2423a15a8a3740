package container_test

import (
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/moziplus/mozi/spawner/backend"
	"github.com/moziplus/mozi/spawner/backend/local/sandbox"
)

// BenchmarkStartTrivial measures "start a trivial process and see it
// exit", side by side: in the local sandbox (bwrap, with the argv
// spawner/sandbox builds and the same limits) and in a container (the
// whole run: image check, create, attach, start, wait, inspect, remove).
// It reports each one's p50 and p99; the container's overhead is the
// difference. Run it with a fixed count for stable percentiles:
//
//	go test -run '^$' -bench StartTrivial -benchtime 200x ./spawner/backend/container/
func BenchmarkStartTrivial(b *testing.B) {
	limits := backend.Limits{MemoryBytes: 8 << 30, Processes: 4096, CPUTime: time.Hour, OpenFiles: 8192}
	b.Run("bwrap", func(b *testing.B) {
		sb, err := sandbox.New("", b.TempDir())
		if err != nil {
			b.Skip(err)
		}
		// Under /tmp itself: the agents' user must reach it.
		dir, err := os.MkdirTemp("", "mozi-container-bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
		uid, gid := agentIDs()
		if err := os.Chown(dir, uid, gid); err != nil {
			b.Fatal(err)
		}
		spec := sandbox.Spec{Chdir: dir, Writable: []string{dir}}
		if os.Getuid() == 0 {
			spec.RunAs = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		}
		argv, err := sb.Command(spec, sandbox.Limits{MemoryBytes: limits.MemoryBytes, Processes: limits.Processes,
			CPUTime: limits.CPUTime, OpenFiles: limits.OpenFiles}, []string{"/bin/true"})
		if err != nil {
			b.Fatal(err)
		}
		measure(b, func() {
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Dir, cmd.Env = dir, []string{"PATH=/usr/bin:/bin"}
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: spec.RunAs, Setpgid: true}
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
		})
	})
	b.Run("container", func(b *testing.B) {
		w := newWorld(b)
		p, err := w.b.Prepare(b.Context(), backend.Run{TaskID: 1, Attempt: 1})
		if err != nil {
			b.Fatal(err)
		}
		s := step(1, "")
		s.Argv, s.Agent.Limits = []string{"/bin/true"}, limits
		measure(b, func() {
			pr, err := w.b.Start(b.Context(), p, s, &output{})
			if err != nil {
				b.Fatal(err)
			}
			<-pr.Done()
			if e := pr.Exit(); e.Code != 0 {
				b.Fatalf("exit %+v", e)
			}
		})
	})
}

// measure runs f b.N times and reports its p50 and p99.
func measure(b *testing.B, f func()) {
	times := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		f()
		times = append(times, time.Since(start))
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(times[min(len(times)-1, len(times)*99/100)].Microseconds())/1000, "p99-ms")
}
