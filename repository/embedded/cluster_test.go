package embedded

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// startSteps are the points of a first start that a test interrupts.
var startSteps = []string{
	stepLocked, stepInitdbRunning, stepInitialised, stepPostgresStarted, stepReady, stepDatabaseCreated,
}

func TestInterruptedStartReturnsAnErrorAndLeavesNothingRunning(t *testing.T) {
	if testing.Short() {
		t.Skip("runs initdb and postgres")
	}
	for _, step := range startSteps {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			state := reachableDir(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c, err := Start(ctx, Options{StateDir: state, NoSync: true, StartTimeout: time.Minute,
				testHook: func(s string) {
					if s == step {
						cancel()
					}
				}})
			if err == nil {
				// Past the last step that looks at the context the start is
				// complete; a caller that was interrupted stops it.
				require.Equal(t, stepDatabaseCreated, step, "only a complete start may succeed")
				require.NoError(t, c.Stop())
			} else {
				require.ErrorIs(t, err, context.Canceled)
				require.NotContains(t, err.Error(), "\n", "one line")
			}
			lock, err := lockStateDir(state)
			require.NoError(t, err, "the state lock is free")
			require.NoError(t, lock.Close())
			pid, _ := postmasterInfo(filepath.Join(state, "postgres", "data"))
			require.False(t, pid > 0 && processAlive(pid), "no postgres left running")
		})
	}
}
