package webhook

import (
	"context"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
)

// gatedInbox records the batches it is given; the first waits for the gate.
type gatedInbox struct {
	entered chan struct{}
	gate    chan struct{}
	mu      sync.Mutex
	batches [][]int // body sizes
}

func (g *gatedInbox) InsertDeliveries(_ context.Context, ds []repository.Delivery) ([]bool, error) {
	g.mu.Lock()
	first := len(g.batches) == 0
	sizes := make([]int, len(ds))
	for i, d := range ds {
		sizes[i] = len(d.Body)
	}
	g.batches = append(g.batches, sizes)
	g.mu.Unlock()
	if first {
		close(g.entered)
		<-g.gate
	}
	out := make([]bool, len(ds))
	for i := range out {
		out[i] = true
	}
	return out, nil
}

// A commit takes the queued deliveries up to the batch's byte bound, or
// one alone when it is bigger: huge bodies are not encoded together.
func TestCommitBatchesAreBoundedInBytes(t *testing.T) {
	t.Parallel()
	const maxBytes = 4 << 20
	inbox := &gatedInbox{entered: make(chan struct{}), gate: make(chan struct{})}
	c := newCommitter(inbox, 1, 256, maxBytes, NewMetrics(nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.start(ctx)

	var wg sync.WaitGroup
	submit := func(id string, size int) {
		wg.Go(func() {
			inserted, err := c.submit(ctx, repository.Delivery{ID: id, Body: make([]byte, size)})
			assert.NoError(t, err, id)
			assert.True(t, inserted, id)
		})
	}
	submit("lead", 10)
	<-inbox.entered // the only writer is busy: the rest queue
	sizes := []int{3 << 20, 1000, 3 << 20, 3 << 20, 900 << 10, 9 << 20, 2000, 5 << 20, 10}
	for i, size := range sizes {
		submit(string(rune('a'+i)), size)
	}
	for queued := 0; queued < len(sizes); runtime.Gosched() {
		c.mu.Lock()
		queued = len(c.queue)
		c.mu.Unlock()
	}
	close(inbox.gate)
	wg.Wait()

	inbox.mu.Lock()
	defer inbox.mu.Unlock()
	n := 0
	for _, batch := range inbox.batches {
		total := 0
		for _, size := range batch {
			total += size
		}
		n += len(batch)
		if len(batch) > 1 {
			assert.LessOrEqual(t, total, maxBytes, "batch %v", batch)
		}
	}
	assert.Equal(t, len(sizes)+1, n, "every delivery committed once")
	require.Greater(t, len(inbox.batches), 4)
}
