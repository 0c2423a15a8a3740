package console

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/pgtest"
)

// BenchmarkTaskList measures the tasks page's server time (query, access
// check from the cache, rendering) with 100,000 tasks in 20 repositories,
// for a user who can read them all.
func BenchmarkTaskList(b *testing.B) {
	ctx := context.Background()
	dbURL := pgtest.URL(b)
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	// A year's shape: most tasks finished, a few live, a few failed.
	_, err = conn.Exec(ctx, `INSERT INTO task_state (repo, issue_number, action_type, agent, status, last_error, daemon_meta)
		SELECT 'acme/repo' || (g % 20), 1 + g / 20,
			(ARRAY['issue_assigned', 'ci_failure', 'review_result', 'mention'])[1 + g % 4],
			'agent' || (g % 5),
			CASE WHEN g % 100 = 0 THEN 'failed' WHEN g % 50 = 1 THEN 'pending' WHEN g > 99900 THEN 'working' ELSE 'done' END,
			CASE WHEN g % 100 = 0 THEN 'exit 1' ELSE '' END,
			jsonb_build_object('title', 'Issue number ' || g)
		FROM generate_series(1, 100000) g`)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `ANALYZE`); err != nil {
		b.Fatal(err)
	}
	store, err := repository.Open(ctx, dbURL, repository.Options{MaxConns: 4})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	s, err := New(Config{Store: store, GiteaURL: "http://gitea.invalid", PublicURL: "http://console.test",
		ClientID: "c", AccessTTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	const id = "bench-session"
	if err := store.CreateConsoleSession(ctx, hashID(id), repository.ConsoleSession{Login: "bench", Token: sealToken(s.tokens, hashID(id), "t"),
		CSRF: "x", ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		b.Fatal(err)
	}
	key := fmt.Sprintf("%x", hashID(id))
	for i := range 20 {
		s.access.put(key+" "+fmt.Sprintf("acme/repo%d", i), perm{Read: true})
	}
	h := s.Handler()
	for _, q := range []string{"", "?before=50000", "?repo=acme/repo7", "?status=failed", "?status=working",
		"?agent=agent3&action=mention", "?repo=acme/repo7&status=failed"} {
		b.Run("q="+q, func(b *testing.B) {
			for b.Loop() {
				req := httptest.NewRequest(http.MethodGet, "/"+q, nil)
				req.AddCookie(&http.Cookie{Name: sessionCookie, Value: id})
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("GET /%s: %d %s", q, rec.Code, rec.Body)
				}
			}
		})
	}
}
