package webhook_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/moziplus/mozi/repository/task"
)

// Two events about two objects are two pieces of work: a notice keyed per
// repository would silently drop the second.
func TestDedupeKeysNameTheirObject(t *testing.T) {
	t.Parallel()

	notices := func(t *testing.T, b *bundle, action task.ActionType) []int {
		var issues []int
		for _, tk := range b.tasks(t) {
			if tk.ActionType == action {
				issues = append(issues, tk.IssueNumber)
			}
		}
		return issues
	}

	t.Run("two merged pull requests give two merge notices", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, pr := range []int{4, 8} {
			f, o := edit(t, fixture(t, "030"), fmt.Sprintf("merged-%d", pr), func(p map[string]any) {
				p["number"] = pr
				p["pull_request"].(map[string]any)["number"] = pr
			})
			b.send(t, f, o)
		}
		b.drain(t)
		assert.Equal(t, []int{4, 8}, notices(t, b, task.ActionReviewMerged))
	})

	t.Run("two issues closed in the same second give two close notices", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, issue := range []int{3, 9} {
			f, o := edit(t, fixture(t, "031"), fmt.Sprintf("closed-%d", issue), func(p map[string]any) {
				i := p["issue"].(map[string]any)
				i["number"] = issue
				i["user"].(map[string]any)["login"] = "coder1" // lead closes coder1's issues
			})
			b.send(t, f, o)
		}
		b.drain(t)
		assert.Equal(t, []int{3, 9}, notices(t, b, task.ActionIssueClosed))
	})
}
