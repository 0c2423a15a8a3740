package kube_test

import (
	"slices"
	"testing"
	"time"

	"github.com/moziplus/mozi/spawner/backend"
	"github.com/moziplus/mozi/spawner/backend/backendtest"
	"github.com/moziplus/mozi/spawner/backend/kube"
	"github.com/moziplus/mozi/spawner/backend/kube/kubetest"
)

// BenchmarkJobStartToExit is one trivial Job from Start to Done, one at a
// time: go test -run '^$' -bench JobStartToExit -benchtime 20x.
func BenchmarkJobStartToExit(b *testing.B) {
	c := kubetest.Start(b)
	be, err := kube.New(kube.Config{Kubeconfig: c.Kubeconfig, Namespace: c.Namespace, Owner: "bench", Scope: "bench-" + c.Namespace,
		RemoteURL: func(string) string { return "" }, Image: c.Image, PullPolicy: "Never", HostNetwork: true})
	if err != nil {
		b.Fatal(err)
	}
	var took []time.Duration
	for i := 0; b.Loop(); i++ {
		r := backend.Run{TaskID: int64(100000 + i), Attempt: 1}
		p, err := be.Prepare(b.Context(), r)
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		proc, err := be.Start(b.Context(), p, backend.Step{TaskID: r.TaskID, Attempt: 1, Argv: []string{"/bin/true"}}, &backendtest.Output{})
		if err != nil {
			b.Fatal(err)
		}
		<-proc.Done()
		took = append(took, time.Since(t0))
		if e := proc.Exit(); e.Code != 0 {
			b.Fatalf("exit %+v", e)
		}
	}
	slices.Sort(took)
	q := func(f float64) float64 { return took[min(len(took)-1, int(f*float64(len(took))))].Seconds() }
	b.ReportMetric(q(0.5), "p50-s")
	b.ReportMetric(q(0.99), "p99-s")
}
