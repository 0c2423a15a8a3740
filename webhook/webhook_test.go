package webhook_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/pgtest"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/templates"
	"github.com/moziplus/mozi/webhook"
	"github.com/moziplus/mozi/webhook/recording"
	"github.com/moziplus/mozi/webhook/rules"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

const secret = "s3cret-webhook"

var agents = rules.NewAgents([]rules.Agent{
	{Login: "coder1"}, {Login: "coder2"}, {Login: "infra1", Infra: true},
	{Login: "reviewer1"}, {Login: "lead", Lead: true},
})

type bundle struct {
	mapper    *rules.Mapper
	store     *repository.Store
	clock     *pgtest.Clock // the store's now(): tests move it past backoffs
	dbURL     string        // the store's database, for reading rows the store has no method for
	intake    *webhook.Intake
	processor *webhook.Processor
	server    *httptest.Server
}

type option func(*rules.Config, *webhook.IntakeConfig)

func setup(t testing.TB, opts ...option) *bundle {
	t.Helper()
	dbURL := pgtest.URL(t)
	clock := &pgtest.Clock{}
	store, err := repository.Open(context.Background(), dbURL, repository.Options{MaxConns: 8, Clock: clock})
	require.NoError(t, err)
	t.Cleanup(store.Close)
	mcfg := rules.Config{BotUser: "mozi", Agents: agents, Route: templates.RouteBusinessType,
		TaskBudgetPerHour: 1000}
	icfg := webhook.IntakeConfig{Secrets: []string{secret}}
	for _, o := range opts {
		o(&mcfg, &icfg)
	}
	b := &bundle{store: store, clock: clock, dbURL: dbURL, mapper: rules.New(mcfg)}
	b.processor = webhook.NewProcessor(store, rules.New(mcfg).Apply, webhook.ProcessorConfig{
		BackoffBase: time.Millisecond, BackoffMax: time.Millisecond})
	intake, err := webhook.NewIntake(store, icfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	intake.Start(ctx)
	b.intake = intake
	b.server = httptest.NewServer(intake.Routes())
	t.Cleanup(func() {
		b.server.Close()
		cancel()
		intake.Wait()
	})
	return b
}

// post sends a recorded delivery through real HTTP and returns the status.
func (b *bundle) post(t *testing.T, f recording.Fixture, override map[string]string) int {
	t.Helper()
	req, err := f.Request(b.server.URL+webhook.Path, override)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// drain processes the inbox until it is empty.
func (b *bundle) drain(t testing.TB) {
	t.Helper()
	for i := 0; b.processor.ProcessOne(context.Background()); i++ {
		require.Less(t, i, 10000, "inbox does not drain")
	}
}

func (b *bundle) tasks(t *testing.T) []task.Task {
	t.Helper()
	tasks, err := b.store.ListTasks(context.Background(), repository.TaskFilter{Limit: 10000})
	require.NoError(t, err)
	slices.Reverse(tasks) // oldest first
	return tasks
}

// row is what the acceptance compares of a task.
type row struct {
	Action   task.ActionType
	Business task.BusinessType
	Agent    string
	Issue    int
	Status   task.Status
	Parent   int
	PR       int
}

func (r row) String() string {
	return fmt.Sprintf("%s/%s %s #%d %s parent=%d pr=%d", r.Action, r.Business, r.Agent, r.Issue, r.Status, r.Parent, r.PR)
}

func rows(tasks []task.Task) []row {
	out := make([]row, len(tasks))
	for i, t := range tasks {
		out[i] = row{t.ActionType, t.BusinessType, t.Agent, t.IssueNumber, t.Status, t.ParentIssue, t.PRNumber}
	}
	return out
}

// naturalOrder is the task table after the whole recorded sequence, in
// delivery order (see testdata/gitea-1.25/README.md for the story).
var naturalOrder = []row{
	{"issue_assigned", "bug", "coder1", 2, "done", 1, 0},                 // 004; #2 closed by lead (033)
	{"issue_assigned", "infrastructure", "coder2", 3, "cancelled", 0, 0}, // 009; unassigned (012)
	{"issue_assigned", "infrastructure", "coder2", 3, "done", 0, 4},      // 013; PR #4 merged (030)
	{"issue_assigned", "infrastructure", "infra1", 3, "done", 0, 0},      // 014; PR #4 merged
	{"mention", "", "infra1", 3, "done", 0, 0},                           // 016; #3 closed (031)
	{"review_request", "", "reviewer1", 4, "done", 0, 4},                 // 020; reviewed (021)
	{"review_result", "", "coder2", 4, "done", 0, 4},                     // 021 rejected; pushed (023)
	{"review_updated", "", "reviewer1", 4, "done", 0, 4},                 // 023; reviewed again (026)
	{"ci_failure", "", "coder2", 4, "done", 0, 4},                        // 025; merged
	{"review_comment", "", "coder2", 4, "done", 0, 4},                    // 026; merged
	{"mention", "", "coder2", 4, "done", 0, 4},                           // 027; merged
	{"review_result", "", "coder2", 4, "done", 0, 4},                     // 029 approved; merged
	{"review_merged", "", "coder2", 4, "pending", 0, 4},                  // 030: lead merged coder2's PR
	{"issue_closed", "", "coder1", 2, "pending", 1, 0},                   // 033: lead closed coder1's issue
	{"issue_assigned", "bug", "coder1", 2, "done", 1, 6},                 // 034 reopened; closed (045)
	{"issue_assigned", "docs", "coder1", 5, "done", 1, 0},                // 037; closed (046)
}

func TestRecordedSequence(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fixtures := recording.MustLoad()
	for _, f := range fixtures {
		code := b.post(t, f, nil)
		require.Contains(t, []int{http.StatusAccepted}, code, f.Name)
	}
	b.drain(t)
	got := rows(b.tasks(t))
	assert.Equal(t, naturalOrder, got, "\n got: %v", got)

	ctx := context.Background()
	// Facts the mapping recorded along the way.
	issue3, err := b.store.Issue(ctx, "acme/widget", 3)
	require.NoError(t, err)
	assert.Equal(t, "closed", issue3.State)
	assert.ElementsMatch(t, []string{"coder2", "infra1"}, issue3.Assignees)
	pr4, err := b.store.PullRequest(ctx, "acme/widget", 4)
	require.NoError(t, err)
	assert.True(t, pr4.Merged)
	assert.Equal(t, []string{"acme/widget#3"}, pr4.LinkedIssues)
	assert.Equal(t, "3403c9d703782b8ccfc0497aa95bf7cf3b3b07a9", pr4.HeadSHA)
	pr6, err := b.store.PullRequest(ctx, "acme/widget", 6)
	require.NoError(t, err)
	assert.Equal(t, []string{"acme/widget#2"}, pr6.LinkedIssues, "linked by branch name")

	tasks := b.tasks(t)
	report := tasks[2].Meta.Report
	assert.Equal(t, "nil map", report["Root cause"], "the [Action Report] is stored with the author's task")
	assert.Equal(t, "Please add a regression test.", tasks[6].Meta.ReviewBody)
	assert.Equal(t, "rejected", tasks[6].Meta.ReviewState)
	assert.Equal(t, "approved", tasks[11].Meta.ReviewState)
	assert.Equal(t, "ci/test", tasks[8].Meta.StatusCtx)
	assert.Equal(t, 1, tasks[4].HopCount, "coder2's comment continues coder2's chain")
	assert.Equal(t, 2, tasks[0].Priority, "#2 is labelled priority/P2")
	assert.ElementsMatch(t, []string{"type/bug", "type/infrastructure"}, tasks[4].Meta.Labels, "the mention carries #3's labels")
}

func TestDeliveryOrderDoesNotMatter(t *testing.T) {
	t.Parallel()
	fixtures := recording.MustLoad()
	for seed := range uint64(6) {
		t.Run(fmt.Sprintf("seed_%d", seed), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			shuffled := slices.Clone(fixtures)
			r := rand.New(rand.NewPCG(seed, 42))
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			for _, f := range shuffled {
				require.Equal(t, http.StatusAccepted, b.post(t, f, nil), f.Name)
				if r.IntN(3) == 0 {
					b.drain(t) // interleave processing with arrival
				}
			}
			b.drain(t)
			assertConverged(t, b)
		})
	}
}

// assertConverged checks what must hold after the recorded events in any
// order: the same live work, every notification exactly once, no
// duplicate live task, and the same knowledge of issues and PRs.
func assertConverged(t *testing.T, b *bundle) {
	t.Helper()
	ctx := context.Background()
	tasks := b.tasks(t)
	var live []string
	seen := map[string]int{}
	for _, tk := range tasks {
		key := fmt.Sprintf("%s %s #%d", tk.ActionType, tk.Agent, tk.IssueNumber)
		if !tk.Status.Terminal() {
			live = append(live, key)
			seen[key]++
		}
		if tk.ActionType.Notification() {
			seen["notification "+key]++
		}
	}
	sort.Strings(live)
	assert.Equal(t, []string{"issue_closed coder1 #2", "review_merged coder2 #4"}, live)
	for key, n := range seen {
		assert.Equal(t, 1, n, key)
	}
	want := map[int]struct {
		state     string
		labels    []string
		assignees []string
		parent    int
		depends   []int
	}{
		1: {"open", []string{"priority/P1", "type/feat"}, nil, 0, nil},
		// #2 says "Depends: #1" under "Parent: #1": a sub-issue never waits for its parent.
		2: {"closed", []string{"priority/P2", "type/bug"}, []string{"coder1"}, 1, nil},
		3: {"closed", []string{"type/bug", "type/infrastructure"}, []string{"coder2", "infra1"}, 0, nil},
		5: {"closed", []string{"type/docs"}, []string{"coder1"}, 1, []int{2}},
	}
	for number, w := range want {
		issue, err := b.store.Issue(ctx, "acme/widget", number)
		require.NoError(t, err, "issue %d known", number)
		assert.Equal(t, w.state, issue.State, "issue %d", number)
		assert.ElementsMatch(t, w.labels, issue.Labels, "issue %d", number)
		assert.ElementsMatch(t, w.assignees, issue.Assignees, "issue %d", number)
		assert.Equal(t, w.parent, issue.ParentIssue, "issue %d", number)
		assert.Equal(t, w.depends, issue.DependsOn, "issue %d", number)
	}
	pr4, err := b.store.PullRequest(ctx, "acme/widget", 4)
	require.NoError(t, err)
	assert.True(t, pr4.Merged)
	assert.Equal(t, []string{"acme/widget#3"}, pr4.LinkedIssues)
	deliveries, err := b.store.ListDeliveries(ctx, repository.DeliveryFilter{Limit: 1000})
	require.NoError(t, err)
	for _, d := range deliveries {
		assert.NotEmpty(t, d.Outcome, "delivery %s processed", d.ID)
		assert.NotEqual(t, repository.OutcomeParked, d.Outcome, "delivery %s: %s", d.ID, d.LastError)
	}
}

func TestRecordedSignatures(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := recording.MustLoad()[0]
	tests := []struct {
		name     string
		override map[string]string
		want     int
	}{
		{"recorded signature", nil, http.StatusAccepted},
		{"redelivery of the same id", nil, http.StatusOK},
		{"wrong signature", map[string]string{"X-Gitea-Signature": strings.Repeat("0", 64), "X-Gitea-Delivery": "wrong-sig"}, http.StatusUnauthorized},
		{"not hex", map[string]string{"X-Gitea-Signature": "zz", "X-Gitea-Delivery": "bad-hex"}, http.StatusUnauthorized},
		{"missing signature", map[string]string{"X-Gitea-Signature": "", "X-Gogs-Signature": "", "X-Hub-Signature-256": "", "X-Gitea-Delivery": "unsigned"}, http.StatusUnauthorized},
		{"only the GitHub spelling", map[string]string{"X-Gitea-Signature": "", "X-Gogs-Signature": "", "X-Gitea-Delivery": "hub-only"}, http.StatusAccepted},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, b.post(t, f, tt.override), tt.name)
	}
	for _, id := range []string{"wrong-sig", "bad-hex", "unsigned"} {
		_, err := b.store.Delivery(context.Background(), id)
		assert.ErrorIs(t, err, task.ErrNotFound, "a rejected delivery %s is not stored", id)
	}
}

func TestSecretRotation(t *testing.T) {
	t.Parallel()
	b := setup(t, func(_ *rules.Config, ic *webhook.IntakeConfig) {
		ic.Secrets = []string{"new-secret", secret}
	})
	f := recording.MustLoad()[0]
	assert.Equal(t, http.StatusAccepted, b.post(t, f, nil), "the old secret still verifies")
	assert.Equal(t, http.StatusAccepted, b.post(t, f, map[string]string{
		"X-Gitea-Signature": webhook.Sign(f.Body, "new-secret"), "X-Gitea-Delivery": "signed-new"}))
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, func(_ *rules.Config, ic *webhook.IntakeConfig) { ic.MaxBodyBytes = 64 << 10 })
	f := recording.MustLoad()[0]
	send := func(body []byte, headers map[string]string) int {
		req, err := http.NewRequest(http.MethodPost, b.server.URL+webhook.Path, strings.NewReader(string(body)))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Gitea-Event", "issues")
		req.Header.Set("X-Gitea-Event-Type", "issues")
		req.Header.Set("X-Gitea-Signature", webhook.Sign(body, secret))
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	big := []byte(`{"action":"opened","pad":"` + strings.Repeat("x", 70<<10) + `"}`)
	tests := []struct {
		name    string
		body    []byte
		headers map[string]string
		want    int
	}{
		{"oversized", big, nil, http.StatusRequestEntityTooLarge},
		{"form content type", f.Body, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, http.StatusUnsupportedMediaType},
		{"malformed JSON", []byte(`{"action": "opened", `), nil, http.StatusBadRequest},
		{"JSON that is not an object", []byte(`[1,2,3]`), nil, http.StatusBadRequest},
		{"issues payload without issue", []byte(`{"action":"opened","repository":{"full_name":"acme/widget"}}`), nil, http.StatusBadRequest},
		{"repository name with a control character", []byte(`{"action":"opened","repository":{"full_name":"acme/wid\u0007get"},"issue":{"number":1}}`), nil, http.StatusBadRequest},
		{"repository name with a separator", []byte(`{"action":"opened","repository":{"full_name":"acme/wid\u2028get"},"issue":{"number":1}}`), nil, http.StatusBadRequest},
		{"repository name with a path trick", []byte(`{"action":"opened","repository":{"full_name":"../widget"},"issue":{"number":1}}`), nil, http.StatusBadRequest},
		{"missing event header", f.Body, map[string]string{"X-Gitea-Event": "", "X-Gogs-Event": "", "X-GitHub-Event": ""}, http.StatusBadRequest},
		{"unknown event", []byte(`{"action":"published","repository":{"full_name":"acme/widget"}}`), map[string]string{"X-Gitea-Event": "release", "X-Gitea-Delivery": "rel-1"}, http.StatusAccepted},
		{"uninteresting event", []byte(`{"ref":"refs/heads/x","repository":{"full_name":"acme/widget"}}`), map[string]string{"X-Gitea-Event": "push", "X-Gitea-Delivery": "push-1"}, http.StatusAccepted},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, send(tt.body, tt.headers), tt.name)
	}
	// Without a Content-Length (chunked), the limit stops the reading.
	req, err := http.NewRequest(http.MethodPost, b.server.URL+webhook.Path, io.MultiReader(strings.NewReader(string(big))))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Gitea-Event", "issues")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "oversized, chunked")
	assert.Contains(t, string(msg), "larger than the 65536-byte limit (webhook.max_body_bytes)")
	d, err := b.store.Delivery(context.Background(), "rel-1")
	require.NoError(t, err, "an unknown event is stored, as ignored")
	assert.Equal(t, repository.OutcomeIgnored, d.Outcome)
	b.drain(t)
	assert.Empty(t, b.tasks(t))
}

func TestReplayAndDoubleHookHaveOneEffect(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fixtures := recording.MustLoad()
	byName := map[string]recording.Fixture{}
	for _, f := range fixtures {
		byName[f.Name[:3]] = f
	}
	// #3 opened and assigned to coder2, then Gitea's Replay of the assignment
	// (new delivery id) and an organisation hook sending it too.
	for _, name := range []string{"007", "009"} {
		require.Equal(t, http.StatusAccepted, b.post(t, byName[name], nil))
	}
	require.Equal(t, http.StatusAccepted, b.post(t, byName["009"], recording.WithDelivery("replay-1")))
	require.Equal(t, http.StatusAccepted, b.post(t, byName["009"], map[string]string{
		"X-Gitea-Delivery": "org-hook-1", "X-Gitea-Hook-Installation-Target-Type": "organization"}))
	// The merge's issue close, replayed after the task finished.
	b.drain(t)
	tasks := b.tasks(t)
	require.Len(t, tasks, 1)
	for _, name := range []string{"031"} {
		require.Equal(t, http.StatusAccepted, b.post(t, byName[name], nil))
		require.Equal(t, http.StatusAccepted, b.post(t, byName[name], recording.WithDelivery("replay-close")))
	}
	b.drain(t)
	tasks = b.tasks(t)
	require.Len(t, tasks, 1, "no event creates a task twice")
	assert.Equal(t, task.StatusDone, tasks[0].Status)

	outcomes := map[string]string{}
	for _, id := range []string{"replay-1", "org-hook-1", "replay-close"} {
		d, err := b.store.Delivery(context.Background(), id)
		require.NoError(t, err)
		outcomes[id] = d.Outcome
	}
	assert.Equal(t, map[string]string{"replay-1": "duplicate", "org-hook-1": "duplicate", "replay-close": "duplicate"}, outcomes)
}

// A delivery with a 9 MB issue body is stored whole in the inbox (it is
// what Gitea sent), while the issue and its task keep what prompts use,
// with the marker, and the Parent: line from the part cut off.
func TestHugeIssueBodyIsKeptCapped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	huge := "## Task\nRead the log.\n" + strings.Repeat("a line of a pasted log\n", 9_000_000/23) + "Parent: #1\n"
	f, err := recording.Find(recording.MustLoad(), "004").Edit(func(p map[string]any) {
		p["issue"].(map[string]any)["body"] = huge
	})
	require.NoError(t, err)
	f.Headers["X-Gitea-Signature"] = webhook.Sign(f.Body, secret)
	require.Equal(t, http.StatusAccepted, b.post(t, f, recording.WithDelivery("huge-1")))
	b.drain(t)

	ctx := context.Background()
	d, err := b.store.Delivery(ctx, "huge-1")
	require.NoError(t, err)
	assert.Equal(t, repository.OutcomeProcessed, d.Outcome)
	assert.Equal(t, f.Body, d.Body, "the inbox keeps what Gitea sent")
	assert.NotEmpty(t, d.Parsed, "and what the intake parsed, so processing does not parse it again")
	assert.Less(t, len(d.Parsed), 80<<10)

	want := task.CapBody(huge)
	assert.Contains(t, want, "bytes omitted; Gitea has the whole text")
	issue, err := b.store.Issue(ctx, "acme/widget", 2)
	require.NoError(t, err)
	assert.Equal(t, want, issue.Body)
	assert.Equal(t, 1, issue.ParentIssue, "read from the line past the cut")
	tasks := b.tasks(t)
	require.Len(t, tasks, 1)
	assert.Equal(t, want, tasks[0].IssueBodyCache)
	assert.Equal(t, 1, tasks[0].ParentIssue)
}

// holdingInbox holds every commit until told to go on.
type holdingInbox struct {
	webhook.DeliveryInserter
	committing chan struct{}
	proceed    chan struct{}
}

func (h *holdingInbox) InsertDeliveries(ctx context.Context, ds []repository.Delivery) ([]bool, error) {
	h.committing <- struct{}{}
	<-h.proceed
	return h.DeliveryInserter.InsertDeliveries(ctx, ds)
}

// The bodies held at once, read and not yet stored, stay within
// MaxPendingBytes: a request that would exceed it is not read until an
// earlier one is stored, and then goes through.
func TestPendingBodiesAreBounded(t *testing.T) {
	t.Parallel()
	store := pgtest.Store(t)
	inbox := &holdingInbox{DeliveryInserter: store, committing: make(chan struct{}), proceed: make(chan struct{})}
	intake, err := webhook.NewIntake(inbox, webhook.IntakeConfig{Secrets: []string{secret},
		MaxBodyBytes: 1 << 20, MaxPendingBytes: 1 << 20})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	intake.Start(ctx)
	var (
		mu      sync.Mutex
		reading int
		arrived = make(chan struct{}, 3)
	)
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = &firstRead{ReadCloser: r.Body, read: func() { mu.Lock(); reading++; mu.Unlock() }}
		arrived <- struct{}{}
		intake.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { server.Close(); cancel(); intake.Wait() })

	f := recording.Find(recording.MustLoad(), "004")
	var wg sync.WaitGroup
	for i := range 3 {
		g, err := f.Edit(func(p map[string]any) {
			p["issue"].(map[string]any)["body"] = strings.Repeat("x", 600<<10) // two do not fit at once
			p["issue"].(map[string]any)["number"] = 10 + i
		})
		require.NoError(t, err)
		wg.Go(func() {
			req, err := g.Request(server.URL+webhook.Path, map[string]string{"X-Gitea-Signature": webhook.Sign(g.Body, secret),
				"X-Gitea-Delivery": fmt.Sprint("pending-", i)})
			if !assert.NoError(t, err) {
				return
			}
			resp, err := http.DefaultClient.Do(req)
			if assert.NoError(t, err) {
				resp.Body.Close()
				assert.Equal(t, http.StatusAccepted, resp.StatusCode)
			}
		})
	}
	for range 3 {
		<-arrived
	}
	for range 3 {
		<-inbox.committing
		mu.Lock()
		assert.Equal(t, 1, reading, "bodies read while one is being stored")
		reading--
		mu.Unlock()
		inbox.proceed <- struct{}{}
	}
	wg.Wait()
}

// firstRead calls read when the body is first read.
type firstRead struct {
	io.ReadCloser
	read func()
	once sync.Once
}

func (f *firstRead) Read(p []byte) (int, error) {
	f.once.Do(f.read)
	return f.ReadCloser.Read(p)
}

// A delivery stored with nothing parsed (before the parsed column, or by
// the catch-up), or parsed by a mozi that parsed differently, is
// processed from its body.
func TestDeliveryWithoutAUsableParseIsProcessedFromItsBody(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	f := recording.Find(recording.MustLoad(), "004") // #2 assigned to coder1
	g, err := f.Edit(func(p map[string]any) { p["issue"].(map[string]any)["number"] = 3 })
	require.NoError(t, err)
	inserted, err := b.store.InsertDeliveries(ctx, []repository.Delivery{
		{ID: "unparsed", Event: "issues", EventType: "issue_assign", Action: "assigned", Repo: "acme/widget",
			Body: f.Body},
		{ID: "stale", Event: "issues", EventType: "issue_assign", Action: "assigned", Repo: "acme/widget",
			Body: g.Body, Parsed: []byte{0, '{', '}'}},
	})
	require.NoError(t, err)
	require.Equal(t, []bool{true, true}, inserted)
	b.drain(t)
	for _, id := range []string{"unparsed", "stale"} {
		d, err := b.store.Delivery(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, repository.OutcomeProcessed, d.Outcome, id)
	}
	var issues []int
	for _, tk := range b.tasks(t) {
		issues = append(issues, tk.IssueNumber)
	}
	assert.Equal(t, []int{2, 3}, issues)
}
