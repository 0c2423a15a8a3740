package prompts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/gitea"
	"github.com/moziplus/mozi/repository/gitea/giteatest"
	"github.com/moziplus/mozi/repository/pgtest"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/templates"
	"github.com/moziplus/mozi/webhook/recording"
	"github.com/moziplus/mozi/webhook/rules"
)

var update = flag.Bool("update", false, "rewrite the golden prompts")

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// world is the recorded Gitea sequence replayed into a database, and a
// fake Gitea API serving the recorded API responses.
type world struct {
	store  *repository.Store
	gitea  *giteatest.Server
	reader *gitea.IssueReader
	tasks  []task.Task
}

func newWorld(t testing.TB) *world {
	t.Helper()
	store := pgtest.Store(t)
	ctx := context.Background()
	mapper := rules.New(rules.Config{BotUser: "mozi", TaskBudgetPerHour: 1000,
		Route: templates.RouteBusinessType, Agents: rules.NewAgents([]rules.Agent{
			{Login: "coder1"}, {Login: "coder2"}, {Login: "infra1", Infra: true},
			{Login: "reviewer1"}, {Login: "lead", Lead: true}})})
	for _, f := range recording.MustLoad() {
		_, err := store.InsertDeliveries(ctx, []repository.Delivery{{ID: f.Header("X-Gitea-Delivery"),
			Event: f.Header("X-Gitea-Event"), EventType: f.Header("X-Gitea-Event-Type"), Body: f.Body}})
		require.NoError(t, err)
	}
	for {
		_, _, err := store.ProcessNextDelivery(ctx, repository.RetryPolicy{}, mapper.Apply)
		if errors.Is(err, repository.ErrInboxEmpty) {
			break
		}
		require.NoError(t, err)
	}
	srv := giteatest.New()
	t.Cleanup(srv.Close)
	g, err := gitea.New(gitea.Config{URL: srv.URL, Token: giteatest.Token})
	require.NoError(t, err)
	tasks, err := store.ListTasks(ctx, repository.TaskFilter{Limit: 1000})
	require.NoError(t, err)
	return &world{store: store, gitea: srv, reader: gitea.NewIssueReader(store, g), tasks: tasks}
}

func (w *world) find(t testing.TB, action task.ActionType, agent string, business task.BusinessType) task.Task {
	t.Helper()
	for _, tk := range w.tasks {
		if tk.ActionType == action && tk.Agent == agent && (business == "" || tk.BusinessType == business) {
			return tk
		}
	}
	t.Fatalf("no recorded %s task for %s", action, agent)
	return task.Task{}
}

func agentFor(login string) Agent {
	a := Agent{Login: login, Workdir: "/srv/agents/" + login, TokenEnv: strings.ToUpper(login) + "_GITEA_TOKEN",
		Skills: []string{"go", "postgres"}}
	if login == "coder2" {
		role, _ := os.ReadFile(filepath.Join("testdata", "SOUL-coder2.md"))
		a.Role = string(role)
	}
	return a
}

type promptCase struct {
	name  string
	task  task.Task
	retry *Retry
	round *task.ReviewRound
	// own: the agent works in its own directory (workspace: none) instead
	// of a worktree mozi prepared; noGitea: no gitea.url configured.
	own, noGitea bool
}

// cases covers every action type and every business type: the tasks the
// recorded sequence produced, and variations of them for what it did not.
func (w *world) cases(t testing.TB) []promptCase {
	t.Helper()
	bug := w.find(t, task.ActionIssueAssigned, "coder1", task.BusinessBug)
	infra := w.find(t, task.ActionIssueAssigned, "coder2", task.BusinessInfrastructure)
	ci := w.find(t, task.ActionCIFailure, "coder2", "")
	out := []promptCase{
		{name: "issue_assigned-bug", task: bug},
		{name: "issue_assigned-infrastructure", task: infra},
		{name: "issue_assigned-docs", task: w.find(t, task.ActionIssueAssigned, "coder1", task.BusinessDocs)},
		{name: "mention", task: w.find(t, task.ActionMention, "infra1", "")},
		{name: "review_request", task: w.find(t, task.ActionReviewRequest, "reviewer1", "")},
		{name: "review_result", task: w.find(t, task.ActionReviewResult, "coder2", "")},
		{name: "review_updated", task: w.find(t, task.ActionReviewUpdated, "reviewer1", "")},
		{name: "review_comment", task: w.find(t, task.ActionReviewComment, "coder2", "")},
		{name: "ci_failure", task: ci},
		{name: "review_merged", task: w.find(t, task.ActionReviewMerged, "coder2", "")},
		{name: "issue_closed", task: w.find(t, task.ActionIssueClosed, "coder1", "")},
		{name: "issue_assigned-bug-retry", task: bug, retry: &Retry{Attempt: 2,
			Error: "exit status 1", OutputTail: "go test ./...\n--- FAIL: TestBucket (0.00s)\nFAIL"}},
		{name: "issue_assigned-bug-own-workdir", task: bug, own: true},
		{name: "issue_assigned-bug-no-gitea", task: bug, noGitea: true},
	}
	followUp := bug
	followUp.Meta.FollowUp = task.FollowUpPullRequest
	out = append(out, promptCase{name: "issue_assigned-bug-follow-up", task: followUp})
	for _, b := range []task.BusinessType{task.BusinessFeature, task.BusinessImpl,
		task.BusinessRefactor, task.BusinessTest} {
		tk := infra
		tk.BusinessType = b
		out = append(out, promptCase{name: "issue_assigned-" + string(b), task: tk})
	}
	for _, a := range []task.ActionType{task.ActionDeployFailure, task.ActionInfrastructureFailure} {
		tk := ci
		tk.ActionType, tk.Agent, tk.IssueNumber, tk.PRNumber = a, "infra1", 0, 0
		tk.Meta.StatusCtx, tk.Meta.HeadBranch = "deploy/production", ""
		out = append(out, promptCase{name: string(a), task: tk})
	}
	parent := task.Task{Repo: "acme/widget", IssueNumber: 1, ActionType: task.ActionDiscussion,
		Agent: "coder2", Priority: 1, Status: task.StatusPending}
	out = append(out, promptCase{name: "discussion", task: parent})
	out = append(out, promptCase{name: "review_result-round", task: w.find(t, task.ActionReviewResult, "coder2", ""),
		round: sampleRound()})
	round := parent
	round.ActionType, round.Agent, round.Meta.Round = task.ActionRoundReview, "lead", 1
	out = append(out, promptCase{name: "round_review", task: round})
	return out
}

// input gathers a case's input as the spawner would hand it over: in the
// worktree mozi prepared (the spawner's choice of branch, approximated:
// a branch for the tasks that push, a detached checkout for the others).
func (w *world) input(t testing.TB, c promptCase) *Input {
	t.Helper()
	giteaURL := w.gitea.URL
	if c.noGitea {
		giteaURL = ""
	}
	in, err := Gather(context.Background(), w.reader, c.task, agentFor(c.task.Agent), giteaURL, "lead")
	require.NoError(t, err)
	in.Retry, in.Round = c.retry, c.round
	if !c.own {
		in.Checkout = &Checkout{Dir: fmt.Sprintf("/var/lib/mozi/workspaces/trees/%s/%d", c.task.Repo, c.task.ID),
			Base: "main"}
		if c.task.ActionType.PushesCode() {
			in.Checkout.Branch = in.Branch()
		}
	}
	return in
}

func (w *world) build(t testing.TB, b *Builder, c promptCase) *Prompt {
	t.Helper()
	in := w.input(t, c)
	p, err := b.Build(in)
	require.NoError(t, err)
	return p
}

func TestGoldenPrompts(t *testing.T) {
	w := newWorld(t)
	covered := map[string]bool{}
	for _, locale := range templates.Locales {
		set, err := templates.Load(locale, "")
		require.NoError(t, err)
		b := NewBuilder(set, nil, 0)
		for _, c := range w.cases(t) {
			covered[string(c.task.ActionType)] = true
			if c.task.ActionType == task.ActionIssueAssigned {
				covered["business/"+string(c.task.BusinessType)] = true
			}
			p := w.build(t, b, c)
			// The fake's URL changes per run; the golden files use a fixed one.
			text := strings.ReplaceAll(p.Text, w.gitea.URL, "http://gitea.test:3000")
			path := filepath.Join("testdata", "golden", locale, c.name+".md")
			if *update {
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
				require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
				continue
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run go test ./prompts -run Golden -update to create it")
			assert.Equal(t, string(want), text, "%s differs from %s (go test ./prompts -run Golden -update)", c.name, path)
		}
	}
	for _, a := range task.ActionTypes {
		assert.True(t, covered[string(a)], "no golden prompt for %s", a)
	}
	for _, bt := range task.BusinessTypes {
		assert.True(t, covered["business/"+string(bt)], "no golden prompt for business type %s", bt)
	}
}

var leftover = regexp.MustCompile(`\{[a-z][a-z0-9_]*\}`)

// sectionExtras are placeholders sections fill from their own data, not
// from the task's variables.
var sectionExtras = map[string]bool{"hint": true, "subject": true, "issue_text": true, "role_guidance": true,
	"attempt": true, "previous_error": true, "number": true, "state": true, "bytes": true, "missing": true}

func TestNoPlaceholderLeftUnfilled(t *testing.T) {
	w := newWorld(t)
	for _, locale := range templates.Locales {
		set, err := templates.Load(locale, "")
		require.NoError(t, err)
		b := NewBuilder(set, nil, 0)
		for _, c := range w.cases(t) {
			t.Run(locale+"/"+c.name, func(t *testing.T) {
				in := w.input(t, c)
				p, err := b.Build(in)
				require.NoError(t, err)
				assert.Empty(t, leftover.FindAllString(p.Text, -1), "a placeholder survived")

				// Every placeholder the texts use has a value for this task.
				tpl, err := set.Resolve(c.task.ActionType, c.task.BusinessType)
				require.NoError(t, err)
				texts := append([]string{tpl.Hint, tpl.Role, tpl.OutputTemplate}, tpl.Steps...)
				for _, name := range templates.SectionNames {
					texts = append(texts, set.Section(name))
				}
				for _, name := range labelsFor(c.task, in) {
					texts = append(texts, set.Label(name))
				}
				vars := in.vars()
				for _, text := range texts {
					for _, ph := range templates.Placeholders(text) {
						if c.noGitea && (ph == "gitea_url" || ph == "gitea_api") {
							continue // those texts are left out without a Gitea
						}
						if !sectionExtras[ph] {
							assert.NotEmpty(t, vars[ph], "{%s} has no value", ph)
						}
					}
				}
			})
		}
	}
}

// labelsFor lists the labels a task's prompt renders.
func labelsFor(t task.Task, in *Input) []string {
	out := []string{"steps", "no_body", "cut"}
	switch {
	case t.IssueNumber == 0:
		out = append(out, "subject_repo")
	case t.PRNumber == t.IssueNumber:
		out = append(out, "subject_pull")
	default:
		out = append(out, "subject_issue")
	}
	switch t.ActionType {
	case task.ActionReviewResult, task.ActionReviewComment:
		out = append(out, "review")
	case task.ActionMention:
		out = append(out, "comment")
	case task.ActionCIFailure, task.ActionDeployFailure, task.ActionInfrastructureFailure:
		out = append(out, "check")
	case task.ActionRoundReview:
		out = append(out, "sub_issues")
	}
	if len(in.Prior) > 0 || len(in.SubIssues) > 0 {
		out = append(out, "prior_issue", "latest_report", "no_report")
	}
	return out
}

func TestNoSecretInAnyPrompt(t *testing.T) {
	w := newWorld(t)
	for _, locale := range templates.Locales {
		set, err := templates.Load(locale, "")
		require.NoError(t, err)
		b := NewBuilder(set, nil, 0)
		for _, c := range w.cases(t) {
			p := w.build(t, b, c)
			assert.NotContains(t, p.Text, giteatest.Token, "%s/%s contains the Gitea token", locale, c.name)
			if !c.noGitea {
				assert.Contains(t, p.Text, agentFor(c.task.Agent).TokenEnv, "the prompt names the token's variable")
			}
		}
	}
}

func TestLayersAndPriorities(t *testing.T) {
	w := newWorld(t)
	set, err := templates.Load("en", "")
	require.NoError(t, err)
	p := w.build(t, NewBuilder(set, nil, 0), w.cases(t)[0])
	var got []string
	for _, s := range p.Sections {
		got = append(got, s.Layer.String()+":"+s.Name)
	}
	assert.Equal(t, []string{"L0:iron_rules", "L1:role", "L2:toolchain_context", "L2:prior_context",
		"L2:role_skill", "L2:git_operation", "L2:gitea_api", "L2:constraints", "L2:gitea_convention",
		"L2:wiki_guide", "L2:delivery_checklist", "L3:skills"}, got)
	assert.True(t, strings.HasSuffix(strings.TrimSpace(sectionText(p, "delivery_checklist")), "```"),
		"the checklist ends with the output template")
	prior := sectionText(p, "prior_context")
	assert.Contains(t, prior, "#1", "issue #2's parent and dependency #1 is shown")
}

func sectionText(p *Prompt, name string) string {
	text := p.Text
	for i, s := range p.Sections {
		if s.Name != name {
			continue
		}
		start := 0
		for _, prev := range p.Sections[:i] {
			start += prev.Bytes + 2
		}
		return text[start : start+s.Bytes]
	}
	return ""
}

func TestHugeInputsStayWithinBudget(t *testing.T) {
	w := newWorld(t)
	set, err := templates.Load("en", "")
	require.NoError(t, err)
	b := NewBuilder(set, nil, 0)

	tk := w.find(t, task.ActionIssueAssigned, "coder1", task.BusinessBug)
	in, err := Gather(context.Background(), w.reader, tk, agentFor("coder1"), w.gitea.URL, "lead")
	require.NoError(t, err)
	// A 1 MiB body with multi-byte runes, a huge role, huge prior reports.
	in.Issue.Body = strings.Repeat("日本語のテキスト and ASCII. ", (1<<20)/40)
	in.Agent.Role = strings.Repeat("role text ", 50000)
	for i := range 20 {
		in.Prior = append(in.Prior, Related{Number: 100 + i, Title: "t", State: "open", Relation: "depends",
			Report: strings.Repeat("[Action Report] long ", 20000)})
	}
	in.Retry = &Retry{Attempt: 3, Error: strings.Repeat("e", 100000), OutputTail: strings.Repeat("o", 1<<20)}
	p, err := b.Build(in)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(p.Text), DefaultTotalBudget)
	assert.True(t, strings.ToValidUTF8(p.Text, "") == p.Text, "never cut inside a rune")
	assert.Contains(t, p.Text, "[… cut by mozi:", "cuts are marked")
	assert.Contains(t, p.Text, "## Steps", "the steps survive a huge body")
	assert.Contains(t, p.Text, "[Action Report]\n**Root cause**", "the output template survives")
}

func TestLongCommentThreadStaysWithinBudget(t *testing.T) {
	w := newWorld(t)
	// 500 comments of 4 KiB on #1, every tenth an [Action Report]: the
	// prompt of a sub-issue shows only the latest, cut to its budget.
	for i := range 500 {
		body := strings.Repeat("discussion ", 370)
		if i%10 == 9 {
			body = "[Action Report]\n**Round**: " + strings.Repeat("r", 4000)
		}
		payload, err := json.Marshal(map[string]string{"body": body})
		require.NoError(t, err)
		resp, err := w.gitea.Client().Post(w.gitea.URL+"/api/v1/repos/acme/widget/issues/1/comments",
			"application/json", bytes.NewReader(payload))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusCreated, resp.StatusCode)
	}
	set, err := templates.Load("en", "")
	require.NoError(t, err)
	tk := w.find(t, task.ActionIssueAssigned, "coder1", task.BusinessBug)
	in, err := Gather(context.Background(), w.reader, tk, agentFor("coder1"), w.gitea.URL, "lead")
	require.NoError(t, err)
	p, err := NewBuilder(set, nil, 0).Build(in)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(p.Text), DefaultTotalBudget)
	assert.Contains(t, sectionText(p, "prior_context"), "**Round**")
}

func BenchmarkBuildWarm(b *testing.B) {
	w := newWorld(b)
	set, err := templates.Load("en", "")
	require.NoError(b, err)
	builder := NewBuilder(set, nil, 0)
	t := w.find(b, task.ActionIssueAssigned, "coder1", task.BusinessBug)
	ctx := context.Background()
	build := func() {
		in, err := Gather(ctx, w.reader, t, agentFor("coder1"), w.gitea.URL, "lead")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := builder.Build(in); err != nil {
			b.Fatal(err)
		}
	}
	build() // warm the cache
	calls := w.gitea.Requests()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		build()
	}
	_ = start
	if got := w.gitea.Requests(); got != calls {
		b.Fatalf("a warm build called Gitea %d times", got-calls)
	}
}

// A round review and a discussion are about a parent issue: their prompts
// must not ask the agent to open a pull request that closes it.
func TestRoundReviewAndDiscussionOpenNoPullRequest(t *testing.T) {
	w := newWorld(t)
	for _, locale := range templates.Locales {
		set, err := templates.Load(locale, "")
		require.NoError(t, err)
		b := NewBuilder(set, nil, 0)
		for _, c := range w.cases(t) {
			if c.task.ActionType != task.ActionRoundReview && c.task.ActionType != task.ActionDiscussion {
				continue
			}
			p := w.build(t, b, c)
			assert.NotContains(t, p.Text, fmt.Sprintf("Closes #%d", c.task.IssueNumber), "%s/%s", locale, c.name)
			assert.NotContains(t, p.Text, "/pulls", "%s/%s", locale, c.name)
		}
	}
}

// mozi keeps 64 KiB of an issue body (task.MaxBodyBytes): no prompt can
// show more, so the prompt of an issue whose 9 MB body was cut shows what
// it would have shown of the whole body.
func TestCappedBodyGivesThePromptItsBudget(t *testing.T) {
	w := newWorld(t)
	set, err := templates.Load("en", "")
	require.NoError(t, err)
	require.LessOrEqual(t, DefaultTotalBudget, task.MaxBodyBytes)
	b := NewBuilder(set, nil, 0)
	tk := w.find(t, task.ActionIssueAssigned, "coder1", task.BusinessBug)
	in, err := Gather(context.Background(), w.reader, tk, agentFor("coder1"), w.gitea.URL, "lead")
	require.NoError(t, err)
	var huge strings.Builder
	for i := 0; huge.Len() < 9_000_000; i++ {
		fmt.Fprintf(&huge, "%07d a line of the log pasted into the issue\n", i)
	}

	in.Issue.Body = huge.String()
	whole, err := b.Build(in)
	require.NoError(t, err)
	in.Issue.Body = task.CapBody(huge.String())
	require.Less(t, len(in.Issue.Body), huge.Len())
	capped, err := b.Build(in)
	require.NoError(t, err)

	shown := func(p *Prompt) string {
		text, _, ok := strings.Cut(sectionText(p, "toolchain_context"), "[… cut by mozi:")
		require.True(t, ok, "the body is cut in the prompt")
		return text
	}
	// The same text, but for a line: the cut's marker counts fewer bytes
	// omitted, in fewer digits.
	a, c := shown(whole), shown(capped)
	assert.True(t, strings.HasPrefix(c, a), "the capped body's prompt shows what the whole body's does")
	assert.Less(t, len(c)-len(a), 100)
	assert.Greater(t, len(c), 20<<10, "the body gets most of its section")
}
