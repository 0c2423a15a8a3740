package webhook_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/webhook"
	"github.com/moziplus/mozi/webhook/recording"
)

// memoryInbox keeps what the intake stores, so the fuzzer can hand it to
// the mapper without the inbox growing across inputs.
type memoryInbox struct {
	mu   sync.Mutex
	last []repository.Delivery
}

func (m *memoryInbox) InsertDeliveries(_ context.Context, ds []repository.Delivery) ([]bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.last = append(m.last[:0], ds...)
	out := make([]bool, len(ds))
	for i := range out {
		out[i] = true
	}
	return out, nil
}

var errRollback = errors.New("roll back the fuzz input's effects")

// FuzzIntake feeds arbitrary deliveries, correctly signed, through the real
// handler, then maps what it accepted in a real PostgreSQL transaction
// (rolled back, so inputs do not accumulate). Nothing may panic, the
// handler answers only with the statuses it documents, and an accepted
// delivery never makes the mapper fail.
func FuzzIntake(f *testing.F) {
	for _, fx := range recording.MustLoad() {
		f.Add(fx.Header("X-Gitea-Event"), fx.Header("X-Gitea-Event-Type"), fx.Body)
	}
	f.Add("issues", "issues", []byte(`{"action":"opened","issue":{"number":-1,"labels":[{}],"assignees":[null]},"repository":{"full_name":"a/b"}}`))
	f.Add("status", "status", []byte(`{"sha":"x","state":"failure","repository":{"full_name":"a/b"}}`))
	f.Add("issue_comment", "", []byte(`{"action":"created","issue":{"number":1},"comment":{"body":"@coder1 [Action Report]"},"repository":{"full_name":"a/b"}}`))
	f.Add("issues", "issue_assign", []byte(`{"action":"assigned","issue":{"number":-3,"assignees":[{"login":"coder1"}]},"repository":{"full_name":"acme/widget"}}`))
	f.Add("issues", "issue_assign", []byte(`{"action":"assigned","issue":{"number":3,"assignees":[{"login":"coder1"}]},"repository":{"full_name":"widget"}}`))
	f.Add("pull_request", "", []byte(`{"action":"opened","pull_request":{"number":0,"body":"Closes #3"},"repository":{"full_name":"acme/widget"}}`))
	b := setup(f)
	inbox := &memoryInbox{}
	intake, err := webhook.NewIntake(inbox, webhook.IntakeConfig{Secrets: []string{secret}})
	if err != nil {
		f.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.Cleanup(func() { cancel(); intake.Wait() })
	intake.Start(ctx)

	allowed := map[int]bool{http.StatusAccepted: true, http.StatusBadRequest: true,
		http.StatusRequestEntityTooLarge: true}
	f.Fuzz(func(t *testing.T, event, eventType string, body []byte) {
		req := httptest.NewRequest(http.MethodPost, webhook.Path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Gitea-Event", event)
		req.Header.Set("X-Gitea-Event-Type", eventType)
		req.Header.Set("X-Gitea-Signature", webhook.Sign(body, secret))
		rec := httptest.NewRecorder()
		intake.ServeHTTP(rec, req)
		if !allowed[rec.Code] {
			t.Fatalf("status %d for event %q: %s", rec.Code, event, rec.Body.String())
		}
		if rec.Code != http.StatusAccepted {
			return
		}
		inbox.mu.Lock()
		d := inbox.last[0]
		inbox.mu.Unlock()
		err := b.store.InTx(context.Background(), func(tx *repository.Tx) error {
			if _, err := b.mapper.Apply(context.Background(), tx, d); err != nil {
				return err
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatalf("mapping an accepted %q delivery failed: %v", event, err)
		}
	})
}
