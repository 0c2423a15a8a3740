package repository_test

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/task"
)

// transitionLog records what the store reports to its observer.
type transitionLog struct {
	mu   sync.Mutex
	seen []task.Event
}

func (l *transitionLog) observe(ev task.Event, _ task.Status, _ int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, ev)
}

func (l *transitionLog) events() []task.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]task.Event(nil), l.seen...)
}

// A delivery's transitions happen in a savepoint; they are counted once the
// delivery commits, and not at all when its processing fails.
func TestDeliveryTransitionsAreObserved(t *testing.T) {
	tests := []struct {
		name  string
		fnErr error
		want  []task.Event
	}{
		{name: "processed", want: []task.Event{task.EventCancel}},
		{name: "failed and rolled back", fnErr: errors.New("gitea said 500")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			store, _ := setup(t)
			var log transitionLog
			store.ObserveTransitions(log.observe)
			created, err := store.CreateTask(ctx, newTask(7))
			require.NoError(t, err)
			_, err = store.InsertDelivery(ctx, repository.Delivery{
				ID: "d-1", Event: "issues", Action: "unassigned", Repo: "acme/widget",
				Headers: map[string]string{}, Body: []byte(`{}`),
			})
			require.NoError(t, err)

			_, _, err = store.ProcessNextDelivery(ctx, repository.RetryPolicy{}, func(ctx context.Context, tx *repository.Tx, _ repository.Delivery) (repository.DeliveryResult, error) {
				res, err := tx.Apply(ctx, created.ID, task.EventCancel, repository.Change{})
				require.NoError(t, err)
				require.True(t, res.Applied)
				return repository.DeliveryResult{Outcome: repository.OutcomeProcessed}, tt.fnErr
			})
			if tt.fnErr != nil {
				require.ErrorIs(t, err, tt.fnErr)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.want, log.events())

			got, err := store.Task(ctx, created.ID)
			require.NoError(t, err)
			if tt.fnErr != nil {
				assert.Equal(t, task.StatusPending, got.Status, "the failed delivery's transition is rolled back")
			} else {
				assert.Equal(t, task.StatusCancelled, got.Status)
			}
		})
	}
}

// Processing is given what the intake parsed instead of the body, which
// only DeliveryBody and Delivery read; listing reads neither.
func TestProcessingReadsTheParsedEventNotTheBody(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, _ := setup(t)
	body, parsed := []byte(`{"action":"opened","huge":"..."}`), []byte{1, '{', '}'}
	inserted, err := store.InsertDeliveries(ctx, []repository.Delivery{
		{ID: "parsed", Event: "issues", Body: body, Parsed: parsed},
		{ID: "unparsed", Event: "issues", Body: body},
	})
	require.NoError(t, err)
	require.Equal(t, []bool{true, true}, inserted)

	var given []repository.Delivery
	for range 2 {
		_, _, err := store.ProcessNextDelivery(ctx, repository.RetryPolicy{}, func(ctx context.Context, tx *repository.Tx, d repository.Delivery) (repository.DeliveryResult, error) {
			given = append(given, d)
			if d.ID == "parsed" {
				got, err := tx.DeliveryBody(ctx, d.ID)
				require.NoError(t, err)
				assert.Equal(t, body, got)
			}
			return repository.DeliveryResult{Outcome: repository.OutcomeProcessed}, nil
		})
		require.NoError(t, err)
	}
	require.Len(t, given, 2)
	assert.Equal(t, "parsed", given[0].ID)
	assert.Nil(t, given[0].Body)
	assert.Equal(t, parsed, given[0].Parsed)
	assert.Equal(t, body, given[1].Body)
	assert.Nil(t, given[1].Parsed)

	d, err := store.Delivery(ctx, "parsed")
	require.NoError(t, err)
	assert.Equal(t, body, d.Body)
	assert.Equal(t, parsed, d.Parsed)
	list, err := store.ListDeliveries(ctx, repository.DeliveryFilter{})
	require.NoError(t, err)
	require.Len(t, list, 2)
	for _, d := range list {
		assert.Nil(t, d.Body, d.ID)
		assert.Nil(t, d.Parsed, d.ID)
	}
	_, err = store.DeliveryBody(ctx, "missing")
	require.ErrorIs(t, err, task.ErrNotFound)
}

// After a batch of large bodies, the connection that stored them does not
// keep them (pgx keeps a statement's parameters until the next one).
// Not parallel: the heap is measured.
func TestStoredBodiesAreNotKeptByTheConnection(t *testing.T) {
	ctx := context.Background()
	store, _ := setup(t)
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	inserted, err := store.InsertDeliveries(ctx, []repository.Delivery{
		{ID: "big-1", Event: "issues", Body: make([]byte, 16<<20)},
		{ID: "big-2", Event: "issues", Body: make([]byte, 16<<20)},
	})
	require.NoError(t, err)
	require.Equal(t, []bool{true, true}, inserted)
	after := heap()
	assert.Less(t, int64(after)-int64(before), int64(8<<20), "heap grew from %d to %d bytes", before, after)
}

// A batch of large bodies is stored as a batch of small ones is: the same
// rows, a delivery id seen before (or twice in the batch) not stored again.
func TestLargeBatchesAreStoredAsSmallOnes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, raw := setup(t)
	big := bytes.Repeat([]byte("x"), 3<<20)
	_, err := store.InsertDeliveries(ctx, []repository.Delivery{{ID: "seen", Event: "issues", Body: []byte(`{}`)}})
	require.NoError(t, err)
	inserted, err := store.InsertDeliveries(ctx, []repository.Delivery{
		{ID: "big", Event: "issues", EventType: "issue_assign", Action: "assigned", Repo: "acme/widget", Issue: 7,
			Headers: map[string]string{"X-Gitea-Delivery": "big"}, Body: big, Parsed: []byte{1, 2}},
		{ID: "seen", Event: "issues", Body: big},
		{ID: "ignored", Event: "push", Outcome: repository.OutcomeIgnored, Body: big},
		{ID: "big", Event: "issues", Body: []byte(`{}`)},
	})
	require.NoError(t, err)
	assert.Equal(t, []bool{true, false, true, false}, inserted)

	d, err := store.Delivery(ctx, "big")
	require.NoError(t, err)
	assert.Equal(t, repository.Delivery{ID: "big", Seq: d.Seq, Event: "issues", EventType: "issue_assign",
		Action: "assigned", Repo: "acme/widget", Headers: map[string]string{"X-Gitea-Delivery": "big"}, Body: big,
		Parsed: []byte{1, 2}, ReceivedAt: d.ReceivedAt, NextAttemptAt: d.NextAttemptAt}, d)
	var issue int
	require.NoError(t, raw.QueryRow(ctx, `SELECT issue_number FROM webhook_deliveries WHERE delivery_id = 'big'`).Scan(&issue))
	assert.Equal(t, 7, issue)
	ignored, err := store.Delivery(ctx, "ignored")
	require.NoError(t, err)
	assert.Equal(t, repository.OutcomeIgnored, ignored.Outcome)
	assert.False(t, ignored.ProcessedAt.IsZero(), "stored as processed")
	assert.Nil(t, ignored.Parsed)
	seen, err := store.Delivery(ctx, "seen")
	require.NoError(t, err)
	assert.Equal(t, []byte(`{}`), seen.Body, "not replaced")
}
