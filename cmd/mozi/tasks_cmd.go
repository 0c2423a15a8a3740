package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/moziplus/mozi/cmd/mozi/internal/config"
	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/repository/task/build"
	"github.com/moziplus/mozi/templates"
)

func runTasks(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "tasks")
	configPath := fs.String("config", "", "configuration file")
	dataDir := fs.String("data-dir", "", "state directory of the embedded database")
	status := fs.String("status", "", "only tasks with this status")
	repo := fs.String("repo", "", "only tasks of this repository (owner/name)")
	agent := fs.String("agent", "", "only tasks of this agent")
	limit := fs.Int("limit", 50, "how many, newest first")
	asJSON := fs.Bool("json", false, "print JSON lines")
	stats := fs.Bool("stats", false, "outcomes of the agents' merged pull requests instead, per repository and agent")
	days := fs.Int("days", defaultStatsDays, "with --stats: pull requests merged in the last N days")
	if err := parseFlags(e, fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("tasks takes no arguments (see mozi task for one task)")
	}
	if err := checkStatsFlags(fs, *stats, *days); err != nil {
		return err
	}
	if *stats {
		return runTaskStats(ctx, e, statsArgs{configPath: *configPath, dataDir: *dataDir, repo: *repo, agent: *agent,
			days: *days, asJSON: *asJSON})
	}
	filter := repository.TaskFilter{Repo: *repo, Agent: *agent, Limit: *limit}
	if *status != "" {
		st, err := task.ParseStatus(*status)
		if err != nil {
			return usagef("%v", err)
		}
		filter.Status = st
	}
	_, db, err := openForCLI(ctx, e, *configPath, *dataDir)
	if err != nil {
		return err
	}
	defer db.Close()
	tasks, err := db.store.ListTasks(ctx, filter)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		for _, t := range tasks {
			if err := enc.Encode(taskJSON(t)); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tACTION\tAGENT\tISSUE\tPR\tPRIO\tRETRIES\tUPDATED\tLAST ERROR")
	for _, t := range tasks {
		action := string(t.ActionType)
		if t.BusinessType != "" {
			action += "/" + string(t.BusinessType)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s#%d\t%s\tP%d\t%d/%d\t%s\t%s\n", t.ID, t.Status, action, t.Agent,
			t.Repo, t.IssueNumber, numOrDash(t.PRNumber), t.Priority, t.RetryCount, t.MaxRetries,
			t.UpdatedAt.Local().Format(time.DateTime), oneLine(t.LastError, 60))
	}
	return tw.Flush()
}

func numOrDash(n int) string {
	if n == 0 {
		return "-"
	}
	return "#" + strconv.Itoa(n)
}

// issueList names issues the way Gitea does: #1, #4.
func issueList(numbers []int) string {
	names := make([]string, len(numbers))
	for i, n := range numbers {
		names[i] = "#" + strconv.Itoa(n)
	}
	return strings.Join(names, ", ")
}

func taskJSON(t task.Task) map[string]any {
	return map[string]any{
		"id": t.ID, "repo": t.Repo, "issue": t.IssueNumber, "pr": t.PRNumber, "parent": t.ParentIssue,
		"action_type": t.ActionType, "business_type": t.BusinessType, "agent": t.Agent, "status": t.Status,
		"retry_count": t.RetryCount, "max_retries": t.MaxRetries, "dispatch_count": t.DispatchCount, "holds": t.Holds,
		"priority": t.Priority, "depends_on": t.DependsOn, "hop_count": t.HopCount, "not_before": t.NotBefore,
		"lease_owner": t.LeaseOwner, "last_error": t.LastError, "created_at": t.CreatedAt, "updated_at": t.UpdatedAt,
		"meta": t.Meta,
	}
}

// taskArgs are the flags and the task ID of mozi task its verbs read.
type taskArgs struct {
	id                                    int64
	repo, action, agent, business, reason string
	issue                                 int
	asJSON                                bool
}

// taskVerb is one verb of mozi task, run on an open database.
type taskVerb struct {
	takesID bool
	run     func(ctx context.Context, e *env, cfg *config.Config, store *repository.Store, a taskArgs) error
}

var taskVerbs = map[string]taskVerb{
	"show":   {takesID: true, run: taskShow},
	"retry":  {takesID: true, run: taskRetry},
	"cancel": {takesID: true, run: taskCancel},
	"resume": {takesID: true, run: taskResume},
	"create": {run: taskCreate},
}

func runTask(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "task")
	configPath := fs.String("config", "", "configuration file")
	dataDir := fs.String("data-dir", "", "state directory of the embedded database")
	repo := fs.String("repo", "", "create: repository owner/name")
	issue := fs.Int("issue", 0, "create: issue or pull request number")
	action := fs.String("action", "", "create: action type")
	agent := fs.String("agent", "", "create: agent login")
	business := fs.String("business", "", "create: business type of an issue_assigned task (default from labels)")
	reason := fs.String("reason", "cancelled by an operator", "cancel: why")
	asJSON := fs.Bool("json", false, "show: print the task and its attempts as JSON")
	if err := parseFlags(e, fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usagef("task needs: show ID | retry ID | cancel ID | create --repo R --issue N --action A --agent X")
	}
	name := fs.Arg(0)
	verb, ok := taskVerbs[name]
	if !ok {
		return usagef("task: unknown action %q (want show, retry, resume, cancel or create)", name)
	}
	a := taskArgs{repo: *repo, issue: *issue, action: *action, agent: *agent, business: *business,
		reason: *reason, asJSON: *asJSON}
	if verb.takesID {
		if fs.NArg() != 2 {
			return usagef("task %s needs one task ID", name)
		}
		n, err := strconv.ParseInt(fs.Arg(1), 10, 64)
		if err != nil || n <= 0 {
			return usagef("task %s: %q is not a task ID", name, fs.Arg(1))
		}
		a.id = n
	}
	cfg, db, err := openForCLI(ctx, e, *configPath, *dataDir)
	if err != nil {
		return err
	}
	defer db.Close()
	return verb.run(ctx, e, cfg, db.store, a)
}

func taskShow(ctx context.Context, e *env, _ *config.Config, store *repository.Store, a taskArgs) error {
	return showTask(ctx, e, store, a.id, a.asJSON)
}

func taskRetry(ctx context.Context, e *env, _ *config.Config, store *repository.Store, a taskArgs) error {
	res, err := store.Apply(ctx, a.id, task.EventRequeue, repository.Change{})
	if err != nil {
		return err
	}
	if !res.Applied {
		return fmt.Errorf("task %d is %s: only failed and cancelled tasks can be retried", a.id, res.From)
	}
	fmt.Fprintf(e.stdout, "task %d is pending again (was %s)\n", a.id, res.From)
	return nil
}

func taskCancel(ctx context.Context, e *env, _ *config.Config, store *repository.Store, a taskArgs) error {
	res, err := store.Apply(ctx, a.id, task.EventCancel, repository.Change{Error: a.reason, Actor: operatorActor(e.getenv)})
	if err != nil {
		return err
	}
	if !res.Applied {
		return fmt.Errorf("task %d is already %s", a.id, res.From)
	}
	fmt.Fprintf(e.stdout, "task %d cancelled (was %s)\n", a.id, res.From)
	return nil
}

func taskCreate(ctx context.Context, e *env, cfg *config.Config, store *repository.Store, a taskArgs) error {
	action, err := task.ParseActionType(a.action)
	if err != nil {
		return usagef("%v", err)
	}
	if a.repo == "" || a.issue <= 0 || a.agent == "" {
		return usagef("task create needs --repo, --issue, --action and --agent")
	}
	if _, ok := cfg.Agent(a.agent); !ok {
		return fmt.Errorf("agent %q is not declared in the configuration", a.agent)
	}
	known := task.Issue{Repo: a.repo, Number: a.issue}
	if cached, err := store.Issue(ctx, a.repo, a.issue); err == nil {
		known = cached
	}
	n := build.FromIssue(known, action, a.agent)
	n.Meta.Event = "operator"
	if action == task.ActionIssueAssigned {
		n.BusinessType = templates.RouteBusinessType(n.Meta.Labels)
		if a.business != "" {
			if n.BusinessType, err = task.ParseBusinessType(a.business); err != nil {
				return usagef("%v", err)
			}
		}
	}
	// An operator's task skips the guards (closed issue, hourly budget):
	// asking for it is the decision.
	t, err := store.CreateTask(ctx, taskBuilder(cfg).Prepare(n))
	if errors.Is(err, repository.ErrDuplicateTask) {
		return fmt.Errorf("a live %s task of %s on %s#%d exists already", action, a.agent, a.repo, a.issue)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "task %d created (pending)\n", t.ID)
	return nil
}

func showTask(ctx context.Context, e *env, store *repository.Store, id int64, asJSON bool) error {
	t, err := store.Task(ctx, id)
	if err != nil {
		return err
	}
	attempts, err := store.Attempts(ctx, id)
	if err != nil {
		return err
	}
	var waitsFor []int
	if t.Status == task.StatusPending {
		if waitsFor, err = store.OpenDependencies(ctx, id); err != nil {
			return err
		}
	}
	if asJSON {
		doc := taskJSON(t)
		doc["waits_for"] = waitsFor
		list := make([]map[string]any, len(attempts))
		for i, a := range attempts {
			list[i] = map[string]any{"attempt": a.Attempt, "runner": a.Runner, "started_at": a.StartedAt,
				"finished_at": a.FinishedAt, "exit_code": a.ExitCode, "outcome": a.Outcome, "error": a.Error,
				"duration_ms": a.Duration.Milliseconds(), "tokens_in": a.TokensIn, "tokens_out": a.TokensOut,
				"cost_usd": a.CostUSD, "log_path": a.LogPath, "output_tail": a.OutputTail}
		}
		doc["attempts"] = list
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(doc)
	}
	w := e.stdout
	fmt.Fprintf(w, "task %d: %s", t.ID, t.ActionType)
	if t.BusinessType != "" {
		fmt.Fprintf(w, "/%s", t.BusinessType)
	}
	fmt.Fprintf(w, " for %s on %s#%d — %s\n", t.Agent, t.Repo, t.IssueNumber, t.Status)
	fmt.Fprintf(w, "  title:       %s\n", t.Meta.Title)
	fmt.Fprintf(w, "  priority:    P%d   retries: %d of %d   dispatches: %d   holds: %d   hops: %d\n",
		t.Priority, t.RetryCount, t.MaxRetries, t.DispatchCount, t.Holds, t.HopCount)
	if t.PRNumber > 0 {
		fmt.Fprintf(w, "  pull request: #%d\n", t.PRNumber)
	}
	if t.ParentIssue > 0 || len(t.DependsOn) > 0 {
		fmt.Fprintf(w, "  parent:      %s   depends on: %v\n", numOrDash(t.ParentIssue), t.DependsOn)
	}
	fmt.Fprintf(w, "  created:     %s   updated: %s\n", t.CreatedAt.Local().Format(time.DateTime), t.UpdatedAt.Local().Format(time.DateTime))
	if t.Status == task.StatusPending && t.NotBefore.After(time.Now()) {
		fmt.Fprintf(w, "  waits until: %s\n", t.NotBefore.Local().Format(time.DateTime))
	}
	if len(waitsFor) > 0 {
		fmt.Fprintf(w, "  waits for:   %s still open (it runs once they are closed)\n", issueList(waitsFor))
	}
	if t.LeaseOwner != "" {
		fmt.Fprintf(w, "  running on:  %s (lease until %s)\n", t.LeaseOwner, t.LeaseExpiresAt.Local().Format(time.TimeOnly))
	}
	if t.LastError != "" {
		fmt.Fprintf(w, "  last error:  %s\n", t.LastError)
	}
	if len(t.Meta.Report) > 0 {
		fmt.Fprintln(w, "  [Action Report]:")
		for k, v := range t.Meta.Report {
			fmt.Fprintf(w, "    %s: %s\n", k, v)
		}
		if len(t.Meta.ReportMissed) > 0 {
			fmt.Fprintf(w, "    missing: %v\n", t.Meta.ReportMissed)
		}
	}
	fmt.Fprintf(w, "\nattempts (%d):\n", len(attempts))
	for _, a := range attempts {
		code := "-"
		if a.ExitCode != nil {
			code = strconv.Itoa(*a.ExitCode)
		}
		fmt.Fprintf(w, "  #%d %s  %-15s exit %s  %s  on %s\n", a.Attempt, a.StartedAt.Local().Format(time.DateTime),
			a.Outcome, code, a.Duration.Round(time.Millisecond), a.Runner)
		if a.Error != "" {
			fmt.Fprintf(w, "     error: %s\n", a.Error)
		}
		if a.TokensIn+a.TokensOut > 0 || a.CostUSD != nil {
			cost := "–" // the agent reported none
			if a.CostUSD != nil {
				cost = fmt.Sprintf("$%.4f", *a.CostUSD)
			}
			fmt.Fprintf(w, "     usage: %d tokens in, %d out, %s\n", a.TokensIn, a.TokensOut, cost)
		}
		if a.LogPath != "" {
			fmt.Fprintf(w, "     log:   %s\n", a.LogPath)
		}
	}
	if n := len(attempts); n > 0 && attempts[n-1].OutputTail != "" {
		fmt.Fprintf(w, "\noutput of attempt #%d (tail):\n%s\n", attempts[n-1].Attempt, attempts[n-1].OutputTail)
	}
	return nil
}

// operatorActor names who runs a mozi command that ends a task: the
// operator ($USER), recorded as the task's ended_by.
func operatorActor(getenv func(string) string) string {
	u := getenv("USER")
	if u == "" {
		u = "unknown"
	}
	return "operator:" + u
}
