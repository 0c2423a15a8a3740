package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// binaries builds mozi-bench and mozi side by side, as an operator would
// install them.
func binaries(t *testing.T) (bench, mozi string) {
	t.Helper()
	dir := t.TempDir()
	// As root, mozi runs agents as an unprivileged user: the directory of
	// mozi's binary must be reachable.
	require.NoError(t, os.Chmod(dir, 0o755))
	bench, mozi = filepath.Join(dir, "mozi-bench"), filepath.Join(dir, "mozi")
	for _, b := range []struct{ out, pkg string }{{bench, "."}, {mozi, "../mozi"}} {
		out, err := exec.Command("go", "build", "-o", b.out, b.pkg).CombinedOutput()
		require.NoError(t, err, "go build %s: %s", b.pkg, out)
	}
	return bench, mozi
}

// The benchmarks are operator commands: each must run end to end on a
// fresh machine (own PostgreSQL, fixtures from the repository) and print
// its table; e2e finds the mozi next to mozi-bench. Sizes are tiny: this
// checks they work, not how fast.
func TestBenchCommandsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL clusters and mozi processes")
	}
	bench, mozi := binaries(t)
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"intake", "--deliveries", "40", "--clients", "2", "--rate", "50", "--duration", "1s"},
			[]string{"intake at 50/s", "intake (HTTP, signed)", "raw single-row INSERT", "intake / raw"}},
		{[]string{"dispatch", "--tasks", "40", "--processes", "5", "--concurrency", "4"},
			[]string{"claim only", "claim + complete, no-op runner", "full spawn path, /bin/true agent"}},
		{[]string{"e2e", "--sequential", "3", "--rate", "5", "--duration", "1s"},
			[]string{"one at a time", "5/s for 1s", mozi}},
		{[]string{"history", "--scale", "0.001", "--runs", "1"},
			[]string{"DueRounds", "GET /metrics (whole scrape)", "mozi deliveries --failed", "mozi_history_filled: filled"}},
		{[]string{"bigbodies", "--webhooks", "2", "--body-bytes", "200000", "--settle", "1s", "--concurrency", "2"},
			[]string{"peak RSS (VmHWM)", "RSS 1s later", "allocated per body byte", "body bytes in each prompt", mozi}},
	}
	for _, tt := range tests {
		t.Run(tt.args[0], func(t *testing.T) {
			cmd := exec.Command(bench, tt.args...)
			cmd.Dir = "../.." // the fixtures' default paths are relative to the repository root
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			for _, row := range tt.want {
				assert.Contains(t, string(out), row)
			}
		})
	}
}

func TestBenchUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     []string
		wantOut  string
		wantErr  string
		exitCode int
	}{
		{name: "help", args: []string{"--help"}, wantOut: "Usage: mozi-bench intake|dispatch|e2e|history|bigbodies"},
		{name: "a benchmark's help", args: []string{"e2e", "--help"}, wantOut: "-mozi"},
		{name: "no benchmark", args: nil, wantErr: "bench needs a benchmark name", exitCode: 2},
		{name: "unknown benchmark", args: []string{"claim"}, wantErr: `unknown benchmark "claim"`, exitCode: 2},
		{name: "unknown flag", args: []string{"intake", "--nope"}, wantErr: "flag provided but not defined: -nope", exitCode: 2},
		{name: "missing mozi", args: []string{"e2e", "--mozi", "/nonexistent/mozi"}, wantErr: "--mozi:", exitCode: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout bytes.Buffer
			err := run(context.Background(), tt.args, func(string) string { return "" }, &stdout, &bytes.Buffer{})
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Equal(t, tt.exitCode, exitCode(err))
				return
			}
			require.NoError(t, err)
			assert.Contains(t, stdout.String(), tt.wantOut)
		})
	}
}
