package local

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Which processes of a run terminate signals one by one: those inside a
// sandbox's PID namespace (not its init), and never the bwrap that holds
// it.
func TestSandboxedProcesses(t *testing.T) {
	t.Parallel()
	host := func(ppid, pgrp int) proc { return proc{ppid: ppid, pgrp: pgrp, depth: 1, nsPid: 0} }
	in := func(ppid, pgrp, nsPid int) proc { return proc{ppid: ppid, pgrp: pgrp, depth: 2, nsPid: nsPid} }
	self := proc{depth: 1}
	tests := []struct {
		name      string
		procs     map[int]proc
		launchers []int
		inside    []int
	}{
		{"no sandbox", map[int]proc{0: self, 10: host(1, 10), 11: host(10, 10), 12: host(11, 12)}, nil, nil},
		{"bwrap leads the group", map[int]proc{0: self,
			10: host(1, 10),                                         // bwrap
			11: in(10, 11, 1),                                       // its init
			12: in(11, 11, 2), 13: in(12, 11, 3), 14: in(11, 14, 4), // the agent, its child, a setsid one
			20: host(1, 20), 21: in(20, 21, 2), // someone else's sandbox
		}, []int{10}, []int{12, 13, 14}},
		{"the agent starts a sandbox of its own", map[int]proc{0: self,
			10: host(1, 10), 11: host(10, 10), 12: in(11, 12, 1), 13: in(12, 12, 2),
		}, []int{11}, []int{13}},
		{"the leader is gone", map[int]proc{0: self, 11: in(1, 11, 1)}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			launchers, inside := sandboxed(tt.procs, 10)
			var got []int
			for pid := range launchers {
				got = append(got, pid)
			}
			assert.ElementsMatch(t, tt.launchers, got)
			assert.ElementsMatch(t, tt.inside, inside)
		})
	}
}
