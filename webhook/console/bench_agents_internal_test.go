package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/pgtest"
)

// BenchmarkAgentsPage measures the agents page's server time with 100,000
// tasks (1,000 of them live) and 20,000 attempts, 5,000 in the last day,
// for 5 agents.
func BenchmarkAgentsPage(b *testing.B) {
	ctx := context.Background()
	dbURL := pgtest.URL(b)
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `INSERT INTO task_state (repo, issue_number, action_type, agent, status, held_for, wait_reason)
		SELECT 'acme/repo' || (g % 20), 1 + g / 20, 'issue_assigned', 'agent' || (g % 5),
			CASE WHEN g % 100 = 0 THEN 'pending' WHEN g % 100 = 1 THEN 'waiting' ELSE 'done' END,
			CASE WHEN g % 200 = 0 THEN 'gitea' ELSE '' END,
			CASE WHEN g % 100 = 1 THEN 'question' ELSE '' END
		FROM generate_series(1, 100000) g`)
	if err != nil {
		b.Fatal(err)
	}
	_, err = conn.Exec(ctx, `INSERT INTO task_attempts (task_id, attempt, agent, runner, repo, issue_number, log_path,
			started_at, outcome, tokens_in, tokens_out, cost_usd)
		SELECT g, 1, 'agent' || (g % 5), 'r1', 'acme/repo' || (g % 20), 1 + g / 20, '',
			now() - (g % 4) * interval '1 day' - interval '1 minute', 'succeeded', 1000, 100, 0.01
		FROM generate_series(1, 20000) g`)
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
		ClientID: "c", SpawnsPerAgentPerDay: 200, Agents: []AgentLimits{{Login: "agent0", MaxConcurrency: 2}}})
	if err != nil {
		b.Fatal(err)
	}
	const id = "bench-session"
	if err := store.CreateConsoleSession(ctx, hashID(id), repository.ConsoleSession{Login: "bench",
		Token: sealToken(s.tokens, hashID(id), "t"), CSRF: "x", ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		b.Fatal(err)
	}
	h := s.Handler()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodGet, "/agents", nil)
		req.AddCookie(&http.Cookie{Name: sessionCookie, Value: id})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("GET /agents: %d %s", rec.Code, rec.Body)
		}
	}
}
