package console_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/pgtest"
	"github.com/moziplus/mozi/webhook/console"
)

// A sign-in prunes the sessions that expired meanwhile, and only those.
func TestConsoleSignInPrunesExpiredSessions(t *testing.T) {
	ctx := context.Background()
	store, clock := pgtest.StoreWithClock(t)
	f := &fixture{store: store, gitea: newFakeGitea(t)}
	f.serveWith(t, console.Config{})
	bob := f.signIn(t, "bob", nil)
	require.NoError(t, store.CreateConsoleSession(ctx, []byte("stale"), repository.ConsoleSession{Login: "carol",
		Token: "token-of-carol", CSRF: "c", ExpiresAt: clock.Now().Add(time.Minute)}))

	clock.Advance(2 * time.Minute)
	f.signIn(t, "alice", nil)
	n, err := store.PruneConsoleSessions(ctx, 100)
	require.NoError(t, err)
	assert.Zero(t, n, "the sign-in pruned the expired session already")
	bob.page(t, "/", http.StatusOK) // a live session stays
}
