package memory

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Tune changes process-wide settings: these tests do not run in parallel
// and put the defaults back.
func restore(t *testing.T) {
	t.Cleanup(func() {
		debug.SetGCPercent(100)
		debug.SetMemoryLimit(math.MaxInt64)
	})
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestTuneSetsTheDefaults(t *testing.T) {
	restore(t)
	p := Tune(env(nil), 0)
	assert.Equal(t, Policy{GCPercent: "400", Limit: "256MiB", LimitInBytes: DefaultLimit}, p)
	assert.Equal(t, 400, debug.SetGCPercent(400))
	assert.Equal(t, int64(DefaultLimit), debug.SetMemoryLimit(-1))
}

func TestTuneTakesTheConfiguredLimit(t *testing.T) {
	restore(t)
	p := Tune(env(nil), 3<<29)
	assert.Equal(t, "1536MiB", p.Limit)
	assert.Equal(t, int64(3<<29), debug.SetMemoryLimit(-1))
}

// GOGC and GOMEMLIMIT, which the runtime applied at start, win.
func TestTuneLeavesWhatTheEnvironmentSet(t *testing.T) {
	restore(t)
	debug.SetGCPercent(150)
	debug.SetMemoryLimit(100 << 20)
	p := Tune(env(map[string]string{"GOGC": "150", "GOMEMLIMIT": "100MiB"}), 512<<20)
	assert.Equal(t, Policy{GCPercent: "150", Limit: "100MiB", FromEnv: []string{"GOGC", "GOMEMLIMIT"},
		LimitInBytes: 100 << 20}, p)
	assert.Equal(t, 150, debug.SetGCPercent(150))
	assert.Equal(t, int64(100<<20), debug.SetMemoryLimit(-1))
}
