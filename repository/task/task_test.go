package task_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository/task"
)

// Every event has a row in the from→to table, and only terminal events
// (and requeue, an operator's) leave or reach terminal statuses.
func TestEveryEventHasATransition(t *testing.T) {
	t.Parallel()
	for _, ev := range task.Events {
		tr, ok := ev.Transition()
		require.True(t, ok, ev)
		require.NotEmpty(t, tr.From, ev)
		assert.Contains(t, task.Statuses, tr.To, ev)
		for _, from := range tr.From {
			if from.Terminal() {
				assert.Equal(t, task.EventRequeue, ev, "only a requeue leaves a terminal status")
			}
		}
	}
	_, ok := task.Event("teleport").Transition()
	assert.False(t, ok)
}

func TestPriorityFromLabels(t *testing.T) {
	t.Parallel()
	assert.Equal(t, task.DefaultPriority, task.PriorityFromLabels(nil))
	assert.Equal(t, 0, task.PriorityFromLabels([]string{"priority/P3", " Priority/p0 "}))
	assert.Equal(t, 3, task.PriorityFromLabels([]string{"priority/P3", "priority/P9"}))
}

func TestValidRepo(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"acme/widget", "a.b/c_d-e"} {
		assert.True(t, task.ValidRepo(ok), ok)
	}
	for _, bad := range []string{"", "acme", "acme/", "../x", "acme/..", "a/b/c", "acme/wid get", "acme/w\x00"} {
		assert.False(t, task.ValidRepo(bad), bad)
	}
}

func TestBackoffStaysWithinItsBounds(t *testing.T) {
	t.Parallel()
	for attempt := range 40 {
		d := task.Backoff(attempt, time.Second, time.Minute)
		want := min(time.Second<<min(max(attempt, 1)-1, 30), time.Minute)
		assert.GreaterOrEqual(t, d, want/2, attempt)
		assert.LessOrEqual(t, d, want, attempt)
	}
}
