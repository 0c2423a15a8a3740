package container

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/spawner/backend"
)

func TestExitOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code         int
		stopped, oom bool
		want         backend.Exit
	}{
		{code: 0, want: backend.Exit{Code: 0}},
		{code: 0, stopped: true, want: backend.Exit{Code: 0}},
		{code: 3, want: backend.Exit{Code: 3, Why: "exited with status 3"}},
		{code: 3, stopped: true, want: backend.Exit{Code: 3, Why: "exited with status 3"}},
		{code: 143, stopped: true, want: backend.Exit{Code: -1, Why: "killed by signal TERM"}},
		{code: 137, stopped: true, want: backend.Exit{Code: -1, Why: "killed by signal KILL"}},
		{code: 137, oom: true, want: backend.Exit{Code: -1, Why: "killed by signal KILL (out of memory: the container's memory limit)"}},
		{code: 1, oom: true, want: backend.Exit{Code: 1, Why: "exited with status 1 after running out of memory (the container's memory limit)"}},
		{code: 137, want: backend.Exit{Code: 137, Why: "exited with status 137 (as a process killed by signal KILL does)"}},
		{code: 152, want: backend.Exit{Code: 152, Why: "exited with status 152 (as a process killed by signal XCPU does)"}},
		{code: 200, stopped: true, want: backend.Exit{Code: 200, Why: "exited with status 200"}},
		{code: 255, want: backend.Exit{Code: 255, Why: "exited with status 255"}},
	} {
		require.Equal(t, tc.want, exitOf(tc.code, tc.stopped, tc.oom), "%+v", tc)
	}
}

func TestContainerEnv(t *testing.T) {
	t.Parallel()
	binds := []backend.Bind{{Path: "/srv/mozi/work/t1"}, {Path: "/srv/mozi/homes/agent1/", ReadOnly: true}}
	for _, tc := range []struct {
		name string
		in   []string
		want []string
	}{
		{name: "PATH goes", in: []string{"PATH=/usr/bin", "A=1"}, want: []string{"A=1"}},
		{name: "HOME bound", in: []string{"HOME=/srv/mozi/homes/agent1"}, want: []string{"HOME=/srv/mozi/homes/agent1"}},
		{name: "HOME below a bind", in: []string{"HOME=/srv/mozi/work/t1/.home"}, want: []string{"HOME=/srv/mozi/work/t1/.home"}},
		{name: "HOME not bound", in: []string{"HOME=/root", "B=2"}, want: []string{"B=2"}},
		{name: "HOME a prefix only", in: []string{"HOME=/srv/mozi/work/t10"}, want: []string{}},
		{name: "HOME relative", in: []string{"HOME=srv"}, want: []string{}},
		{name: "values with =", in: []string{"TOKEN=a=b"}, want: []string{"TOKEN=a=b"}},
	} {
		require.Equal(t, tc.want, containerEnv(tc.in, binds), tc.name)
	}
}
