package webhook

import (
	"context"
	"errors"
	"sync"

	"github.com/moziplus/mozi/repository"
)

// DeliveryInserter stores a batch of deliveries in one commit
// (repository.Store).
type DeliveryInserter interface {
	InsertDeliveries(ctx context.Context, ds []repository.Delivery) ([]bool, error)
}

// committer is the intake's group commit. A request whose delivery finds
// fewer than maxInflight commits running leads one itself, taking along
// the deliveries queued by then (up to maxBatch of them and maxBatchBytes
// of bodies); otherwise it queues and waits for a leader. Alone, a
// delivery is committed by its own goroutine at once (no hand-off to
// wake); under load one commit (one WAL flush) acknowledges many
// deliveries.
type committer struct {
	store    DeliveryInserter
	maxBatch int
	// maxBatchBytes bounds the bodies of one commit (one always goes):
	// the driver encodes a statement's parameters into one buffer, which
	// it keeps until the connection's next statement, so twenty 9 MB
	// bodies in one commit would cost hundreds of megabytes.
	maxBatchBytes int
	maxInflight   int
	metrics       *Metrics

	mu       sync.Mutex
	queue    []*pendingDelivery
	inflight int
	ctx      context.Context // commits use it, not a request's: a batch is shared
	stopped  bool
	idle     *sync.Cond // signalled when inflight drops to zero
}

type pendingDelivery struct {
	d    repository.Delivery
	done chan commitResult
}

type commitResult struct {
	inserted bool
	err      error
}

var errIntakeStopped = errors.New("intake is shutting down")

func newCommitter(store DeliveryInserter, maxInflight, maxBatch, maxBatchBytes int, metrics *Metrics) *committer {
	c := &committer{store: store, maxBatch: maxBatch, maxBatchBytes: maxBatchBytes, maxInflight: maxInflight,
		metrics: metrics, ctx: context.Background()}
	c.idle = sync.NewCond(&c.mu)
	return c
}

// start sets the context commits run under; when it ends, the intake
// stops accepting deliveries.
func (c *committer) start(ctx context.Context) {
	c.mu.Lock()
	c.ctx = ctx
	c.mu.Unlock()
	go func() {
		<-ctx.Done()
		c.mu.Lock()
		c.stopped = true
		c.mu.Unlock()
	}()
}

// wait blocks until the intake is stopped and no commit runs.
func (c *committer) wait() {
	<-c.ctx.Done()
	c.mu.Lock()
	for c.inflight > 0 {
		c.idle.Wait()
	}
	for _, p := range c.queue {
		p.done <- commitResult{err: errIntakeStopped}
	}
	c.queue = nil
	c.mu.Unlock()
}

// submit commits a delivery, or waits for the leader that commits it.
func (c *committer) submit(ctx context.Context, d repository.Delivery) (bool, error) {
	p := &pendingDelivery{d: d, done: make(chan commitResult, 1)}
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return false, errIntakeStopped
	}
	c.queue = append(c.queue, p)
	lead := c.inflight < c.maxInflight
	if lead {
		c.inflight++
	}
	c.mu.Unlock()
	if lead {
		c.lead(p)
	}
	select {
	case res := <-p.done:
		return res.inserted, res.err
	case <-ctx.Done():
		// The delivery may still be committed; Gitea's redelivery of the
		// same id will then be answered "duplicate".
		return false, ctx.Err()
	}
}

// lead commits queued batches until the queue is empty. Once its own
// delivery is answered, the rest of the work moves to a new goroutine so
// the leader's request is not held up by others'.
func (c *committer) lead(own *pendingDelivery) {
	for {
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.inflight--
			if c.inflight == 0 {
				c.idle.Broadcast()
			}
			c.mu.Unlock()
			return
		}
		n, size := 1, len(c.queue[0].d.Body)
		for n < min(len(c.queue), c.maxBatch) && size+len(c.queue[n].d.Body) <= c.maxBatchBytes {
			size += len(c.queue[n].d.Body)
			n++
		}
		batch := make([]*pendingDelivery, n)
		copy(batch, c.queue)
		rest := len(c.queue) - n
		c.queue = append(c.queue[:0], c.queue[n:]...)
		// The slots left behind would keep the batch's bodies reachable.
		clear(c.queue[rest : rest+n])
		ctx := c.ctx
		c.mu.Unlock()

		c.commit(ctx, batch)
		if own != nil && len(own.done) == 1 {
			go c.lead(nil)
			return
		}
	}
}

func (c *committer) commit(ctx context.Context, batch []*pendingDelivery) {
	ds := make([]repository.Delivery, len(batch))
	for i, p := range batch {
		ds[i] = p.d
	}
	var (
		inserted []bool
		err      = ctx.Err()
	)
	if err == nil {
		inserted, err = c.store.InsertDeliveries(ctx, ds)
	} else {
		err = errIntakeStopped
	}
	c.metrics.batchSize.Observe(float64(len(batch)))
	for i, p := range batch {
		res := commitResult{err: err}
		if err == nil {
			res.inserted = inserted[i]
		}
		p.done <- res
	}
}
