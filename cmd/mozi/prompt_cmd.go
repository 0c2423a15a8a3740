package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/moziplus/mozi/cmd/mozi/internal/config"
	"github.com/moziplus/mozi/prompts"
	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/gitea"
	"github.com/moziplus/mozi/repository/gitea/payload"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/repository/task/build"
	"github.com/moziplus/mozi/spawner"
	"github.com/moziplus/mozi/spawner/backend"
	"github.com/moziplus/mozi/templates"
	"github.com/moziplus/mozi/webhook/recording"
)

func runPrompt(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "prompt")
	configPath := fs.String("config", "", "configuration file")
	dataDir := fs.String("data-dir", "", "state directory of the embedded database")
	repo := fs.String("repo", "", "repository owner/name")
	issue := fs.Int("issue", 0, "issue or pull request number")
	actionFlag := fs.String("action", "", "action type (default: the issue's latest task's, else issue_assigned)")
	agentFlag := fs.String("agent", "", "agent login (default: the task's agent, else the first declared agent)")
	payloadFile := fs.String("payload", "", "build offline from a recorded webhook (FILE.json with FILE.headers.json)")
	stats := fs.Bool("stats", false, "print each section's size after the prompt, on stderr")
	if err := parseFlags(e, fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 || fs.Arg(0) != "render" {
		return usagef("prompt render --repo R --issue N [--action A] [--agent X] | --payload FILE")
	}
	cfg, err := config.Load(*configPath, e.getenv)
	if err != nil {
		return err
	}
	set, err := templates.Load(cfg.Templates.Locale, cfg.Templates.Override)
	if err != nil {
		return err
	}
	var action task.ActionType
	if *actionFlag != "" {
		if action, err = task.ParseActionType(*actionFlag); err != nil {
			return usagef("%v", err)
		}
	}

	var in *prompts.Input
	if *payloadFile != "" {
		in, err = offlineInput(cfg, *payloadFile, action, *agentFlag)
	} else {
		if *repo == "" || *issue <= 0 {
			return usagef("prompt render needs --repo and --issue (or --payload)")
		}
		in, err = liveInput(ctx, e, cfg, set, *dataDir, *repo, *issue, action, *agentFlag)
	}
	if err != nil {
		return err
	}
	p, err := prompts.NewBuilder(set, nil, 0).Build(in)
	if err != nil {
		return err
	}
	fmt.Fprint(e.stdout, p.Text)
	if *stats {
		for _, s := range p.Sections {
			fmt.Fprintf(e.stderr, "%s %-20s priority %2d  %6d bytes (budget %d)\n", s.Layer, s.Name, s.Priority, s.Bytes, s.Budget)
		}
		fmt.Fprintf(e.stderr, "total %d bytes (budget %d)\n", len(p.Text), prompts.DefaultTotalBudget)
	}
	return nil
}

// liveInput is what mozi would build the prompt of the issue's task from
// if it claimed it now: the latest task matching the flags (or one made
// up from the cached issue), gathered by the assembler serve uses, in the
// worktree serve would prepare.
func liveInput(ctx context.Context, e *env, cfg *config.Config, set *templates.Set, dataDir, repo string, issue int,
	action task.ActionType, agent string) (*prompts.Input, error) {
	logger := newCLILogger(cfg.Log, e.stderr)
	db, err := openDatabase(ctx, e, cfg, dataDir, logger, attachOnly)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if err := db.requireSchema(ctx); err != nil {
		return nil, err
	}
	var client *gitea.Client
	if cfg.Gitea.URL != "" {
		if client, err = newGiteaClient(cfg, newCLILogger(cfg.Log, e.stderr), nil, nil); err != nil {
			return nil, err
		}
	}
	reader := gitea.NewIssueReader(db.store, client)
	tasks, err := db.store.ListTasks(ctx, repository.TaskFilter{Repo: repo, IssueNumber: issue,
		ActionType: action, Agent: agent, Limit: 1})
	if err != nil {
		return nil, err
	}
	var t task.Task
	if len(tasks) > 0 {
		t = tasks[0]
	} else {
		cached, err := reader.Issue(ctx, repo, issue)
		if err != nil {
			return nil, fmt.Errorf("no task for %s#%d and the issue cannot be read: %w", repo, issue, err)
		}
		t = madeUpTask(cfg, cached, action, agent)
	}
	a, ok := cfg.Agent(t.Agent)
	if !ok {
		return nil, fmt.Errorf("agent %q is not declared in the configuration", t.Agent)
	}
	assembler, err := newAssembler(cfg, set, reader, db.store, client)
	if err != nil {
		return nil, err
	}
	t.DispatchCount++ // as the claim that would run it now
	in, err := assembler.Gather(ctx, t)
	if err != nil {
		return nil, err
	}
	if a.Workspace != config.WorkspaceAuto {
		return in, nil
	}
	stateDir, err := resolveStateDir(e, cfg, dataDir, logger)
	if err != nil {
		return nil, err
	}
	b, err := newBackendFor(cfg, stateDir, "", logger, describeOnly)
	if err != nil {
		return nil, err
	}
	sa, err := spawnerAgent(a, stateDir)
	if err != nil {
		return nil, err
	}
	w := b.Describe(ctx, backend.Run{TaskID: t.ID, Attempt: t.DispatchCount, Repo: t.Repo, Agent: sa.Agent,
		Checkout: spawner.CheckoutOf(t, in)})
	if w.Base == "" {
		w.Base = "main" // no mirror yet: Gitea's usual default
	}
	in.Checkout = spawner.PromptCheckout(w)
	return in, nil
}

// madeUpTask is the task mozi would make for an issue that has none yet.
func madeUpTask(cfg *config.Config, issue task.Issue, action task.ActionType, agent string) task.Task {
	if action == "" {
		action = task.ActionIssueAssigned
	}
	if agent == "" {
		for _, a := range issue.Assignees {
			if _, ok := cfg.Agent(a); ok {
				agent = a
				break
			}
		}
	}
	if agent == "" && len(cfg.Agents) > 0 {
		agent = cfg.Agents[0].Login
	}
	n := build.FromIssue(issue, action, agent)
	if action == task.ActionIssueAssigned {
		n.BusinessType = templates.RouteBusinessType(issue.Labels)
	}
	return taskBuilder(cfg).Preview(n)
}

// offlineInput builds the input from a recorded webhook alone: no
// database, no Gitea; related issues are left out.
func offlineInput(cfg *config.Config, path string, action task.ActionType, agent string) (*prompts.Input, error) {
	f, err := recording.LoadFile(path)
	if err != nil {
		return nil, err
	}
	h := payload.ReadHeaders(f.HTTPHeader())
	kind := payload.Classify(h.Event, h.EventType)
	if kind == payload.KindIgnored {
		return nil, fmt.Errorf("%s: a %s event makes no task", path, h.Event)
	}
	ev, err := payload.Parse(kind, f.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var issue task.Issue
	switch {
	case ev.Issue != nil:
		issue = *ev.Issue
	case ev.PullRequest != nil:
		p := ev.PullRequest
		issue = task.Issue{Repo: ev.Repo, Number: p.Number, Title: p.Title, Body: p.Body, State: p.State,
			Author: p.Author, IsPull: true}
	default:
		return nil, fmt.Errorf("%s: a %s event names no issue or pull request; use --repo and --issue", path, kind)
	}
	if action == "" {
		action = offlineAction(ev)
	}
	t := madeUpTask(cfg, issue, action, agent)
	m := &t.Meta
	m.Sender = ev.Sender
	if ev.PullRequest != nil {
		t.PRNumber = ev.PullRequest.Number
		m.HeadSHA, m.HeadBranch = ev.PullRequest.HeadSHA, ev.PullRequest.HeadRef
	}
	if ev.Comment != nil {
		m.CommentID, m.CommentBody = ev.Comment.ID, ev.Comment.Body
	}
	if ev.Review != nil {
		m.ReviewState, m.ReviewBody, m.Reviewer = ev.Review.Verdict, ev.Review.Body, ev.Sender
	}
	a, ok := cfg.Agent(t.Agent)
	if !ok {
		return nil, errors.New("no agent to render for: declare agents in the configuration or pass --agent")
	}
	pa, err := promptAgent(a)
	if err != nil {
		return nil, err
	}
	return &prompts.Input{Task: t, Issue: issue, Agent: pa, GiteaURL: cfg.Gitea.URL, Lead: leadLogin(cfg)}, nil
}

// offlineAction guesses the action a recorded event leads to.
func offlineAction(ev payload.Event) task.ActionType {
	switch ev.Kind {
	case payload.KindIssueComment:
		return task.ActionMention
	case payload.KindReview:
		if ev.Review.Verdict == "comment" {
			return task.ActionReviewComment
		}
		return task.ActionReviewResult
	case payload.KindPullRequest:
		if ev.Action == "review_requested" {
			return task.ActionReviewRequest
		}
		if strings.Contains(ev.Action, "closed") {
			return task.ActionReviewMerged
		}
		return task.ActionReviewUpdated
	}
	if ev.Action == "closed" {
		return task.ActionIssueClosed
	}
	return task.ActionIssueAssigned
}
