package sandbox_test

import (
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/moziplus/mozi/spawner/backend/local/sandbox"
)

// BenchmarkSandboxStart measures, side by side, a bare exec of /bin/true
// and the same exec inside the sandbox mozi builds (as the agents' user
// when the benchmark runs as root), and reports each one's median: the
// sandbox's start overhead per run is the difference (target, issue 10:
// ≤ 30 ms at the median).
func BenchmarkSandboxStart(b *testing.B) {
	sb, err := sandbox.New("", openDir(b))
	if err != nil {
		b.Skip(err)
	}
	w := newWorld(b)
	wrapped, err := sb.Command(w.spec(), sandbox.Limits{MemoryBytes: 8 << 30, Processes: 4096, CPUTime: time.Hour,
		OpenFiles: 8192}, []string{"/bin/true"})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		argv []string
	}{{"bare", []string{"/bin/true"}}, {"sandbox", wrapped}} {
		b.Run(c.name, func(b *testing.B) {
			times := make([]time.Duration, 0, b.N)
			for range b.N {
				cmd := exec.Command(c.argv[0], c.argv[1:]...)
				cmd.Dir = w.ownTree
				cmd.Env = []string{"PATH=/usr/bin:/bin"}
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: agentUser(), Setpgid: true}
				start := time.Now()
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%v: %s", err, out)
				}
				times = append(times, time.Since(start))
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(times[len(times)*9/10].Microseconds())/1000, "p90-ms")
		})
	}
}
