package main

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The benchmarks are operator commands: each must run end to end on a
// fresh machine (own PostgreSQL, fixtures from the repository) and print
// its table. Sizes are tiny: this checks they work, not how fast.
func TestBenchCommandsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL clusters and mozi processes")
	}
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"intake", "--deliveries", "40", "--clients", "2", "--rate", "50", "--duration", "1s"},
			[]string{"intake at 50/s", "intake (HTTP, signed)", "raw single-row INSERT", "intake / raw"}},
		{[]string{"dispatch", "--tasks", "40", "--processes", "5", "--concurrency", "4"},
			[]string{"claim only", "claim + complete, no-op runner", "full spawn path, /bin/true agent"}},
		{[]string{"e2e", "--sequential", "3", "--rate", "5", "--duration", "1s"},
			[]string{"one at a time", "5/s for 1s"}},
	}
	for _, tt := range tests {
		t.Run(tt.args[0], func(t *testing.T) {
			cmd := exec.Command(moziBinary(t), append([]string{"bench"}, tt.args...)...)
			cmd.Dir = "../.." // the fixtures' default paths are relative to the repository root
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			for _, row := range tt.want {
				assert.Contains(t, string(out), row)
			}
		})
	}
}
