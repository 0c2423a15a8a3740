package webhook_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/task"
)

// TestGreenHeadEndsTheWaitForRedCI: the author's task that waits for a
// person because its pull request stayed red goes back to review when the
// head turns green (a person's fix, a rerun), without a comment.
func TestGreenHeadEndsTheWaitForRedCI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	for _, name := range []string{"007", "009", "019", "023"} { // #3 to coder2; PR #4 for it; its head 3403c9d
		b.send(t, fixture(t, name), nil)
	}
	b.drain(t)
	assigned := liveTasks(t, b, task.ActionIssueAssigned)
	require.Len(t, assigned, 1)
	require.Equal(t, task.StatusReview, assigned[0].Status)
	res, err := b.store.Apply(ctx, assigned[0].ID, task.EventWait, repository.Change{WaitReason: task.WaitCIRed, Question: "ci/test is red"})
	require.NoError(t, err)
	require.True(t, res.Applied)

	b.send(t, fixture(t, "024"), nil) // ci/test pending on the head: still waits
	b.drain(t)
	got, err := b.store.Task(ctx, assigned[0].ID)
	require.NoError(t, err)
	assert.Equal(t, task.StatusWaiting, got.Status)

	b.send(t, fixture(t, "028"), nil) // ci/test success on the head
	b.drain(t)
	got, err = b.store.Task(ctx, assigned[0].ID)
	require.NoError(t, err)
	assert.Equal(t, task.StatusReview, got.Status, "green: back to review")
	assert.Empty(t, got.WaitReason)
}
