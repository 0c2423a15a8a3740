package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/spawner/worker"
)

func TestLoopPassesAgainWhileMoreThenOnWake(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	l := worker.New()
	// The first two passes report more, the third none: only a wake-up
	// brings the fourth, as the poll never comes.
	calls := make(chan int, 10)
	n := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx, time.Hour, func(context.Context) bool {
			n++
			calls <- n
			return n < 3
		})
	}()
	for want := 1; want <= 3; want++ {
		require.Equal(t, want, <-calls)
	}
	select {
	case got := <-calls:
		t.Fatalf("pass %d ran without a wake-up", got)
	default:
	}
	l.Wake()
	l.Wake() // a second pending wake-up is the same one, and never blocks
	require.Equal(t, 4, <-calls)
	cancel()
	<-done
}
