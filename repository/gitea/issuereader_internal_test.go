package gitea

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/moziplus/mozi/repository/task"
)

// The reader's in-memory layer stays bounded by size and by age: twenty
// 9 MB issue bodies took RSS to 1.3 GB when it counted entries only.
func TestIssueReaderMemoryIsBounded(t *testing.T) {
	t.Parallel()
	now := time.Now()
	r := &IssueReader{ttl: 30 * time.Second, now: func() time.Time { return now }, mem: map[string]memEntry{}}
	remember := func(n, bodySize int) {
		now = now.Add(time.Millisecond) // entries come one after the other
		issue := task.Issue{Repo: "acme/widget", Number: n, Title: "t", Body: strings.Repeat("x", bodySize)}
		r.remember(memKey("acme/widget", n), func(e *memEntry) { e.issue = issue })
	}

	for n := 1; n <= 20; n++ {
		remember(n, 9<<20)
	}
	assert.Empty(t, r.mem, "a 9 MB body is served from the database, not kept in memory")
	assert.Zero(t, r.bytes)

	for n := 1; n <= 200; n++ {
		remember(n, 900<<10)
	}
	assert.LessOrEqual(t, r.bytes, maxMemBytes, "within the byte budget")
	assert.NotEmpty(t, r.mem)
	_, newest := r.cached(memKey("acme/widget", 200))
	assert.True(t, newest, "the oldest entries go first")
	_, oldest := r.cached(memKey("acme/widget", 1))
	assert.False(t, oldest)

	now = now.Add(time.Minute)
	remember(1000, 10)
	assert.Len(t, r.mem, 1, "expired entries are dropped, read or not")
	sum := 0
	for _, e := range r.mem {
		sum += e.size()
	}
	assert.Equal(t, sum, r.bytes, fmt.Sprintf("the byte count matches what is held (%d entries)", len(r.mem)))
}
