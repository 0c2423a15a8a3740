package rules

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/gitea/payload"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/repository/task/build"
)

// Defaults of Config.
const (
	DefaultTaskBudgetPerHour = 30
	DefaultMaxMentionHops    = task.DefaultMaxMentionHops // defined once, with the dispatcher's
	DefaultDiscussionGrace   = 2 * time.Minute
	DefaultDiscussLabel      = "mozi/discuss"
	DefaultDeployContext     = `(?i)deploy`
	DefaultInfraContext      = `(?i)runner|infra`
	DefaultBotUser           = "mozi"
)

// The circuit breaker mozi serve configures when the configuration says
// nothing (Config.Breaker's zero value never trips).
const (
	DefaultBreakerComments = 30
	DefaultBreakerWindow   = 10 * time.Minute
	DefaultBreakerCooldown = 30 * time.Minute
)

// Config configures how events become tasks.
type Config struct {
	// BotUser is mozi's own Gitea login: its comments never make work
	// (mozi serve's default DefaultBotUser, mozi).
	BotUser string
	Agents  Agents
	// MaxRetries of created tasks (default task.DefaultMaxRetries). When
	// Tasks is set, its configuration is used instead of MaxRetries and
	// TaskBudgetPerHour, and its Observer counts the tasks created.
	MaxRetries int
	// TaskBudgetPerHour caps new tasks per issue per hour, which stops
	// runaway mention chains (default DefaultTaskBudgetPerHour, 30).
	TaskBudgetPerHour int
	// MaxMentionHops caps the length of agent-to-agent mention chains
	// (default DefaultMaxMentionHops, 4).
	MaxMentionHops int
	// Breaker trips a repository's circuit breaker on a storm of agent
	// comments (Comments 0: never).
	Breaker repository.BreakerPolicy
	// Comments: mozi may comment on Gitea (it has one to post to): a
	// tripped breaker queues its comment.
	Comments bool
	// DiscussionGrace is how long an unassigned top-level issue waits for
	// an assignee before it is broadcast for discussion (default
	// DefaultDiscussionGrace, 2m).
	DiscussionGrace time.Duration
	// QuietPeriod is how long loose comments on an agent's pull request
	// wait for the next before the author's one turn for all of them
	// (default DefaultQuietPeriod, 60s).
	QuietPeriod time.Duration
	// DiscussLabel makes the discussion broadcast immediate (default
	// DefaultDiscussLabel, mozi/discuss).
	DiscussLabel string
	// DeployContext matches status contexts of deployments (default
	// DefaultDeployContext, "deploy").
	DeployContext *regexp.Regexp
	// InfraContext matches status contexts of runners and infrastructure
	// (default DefaultInfraContext, "runner|infra").
	InfraContext *regexp.Regexp
	// ReportFields returns the fields an action's output template asks for,
	// so an incomplete [Action Report] is recorded as such (nil: unchecked).
	ReportFields func(task.ActionType, task.BusinessType) []string
	// Route decides the business type of issue_assigned tasks from labels.
	Route   func(labels []string) task.BusinessType
	Logger  *slog.Logger
	Metrics *Metrics
	// Tasks builds and guards the tasks the rules create (default: one
	// built from MaxRetries, TaskBudgetPerHour and Metrics). mozi serve
	// passes the ticker's, so both share one guard configuration.
	Tasks *build.Builder
	// Now is the clock (default time.Now).
	Now func() time.Time
	// MaxRepairRounds is how many ci_failure tasks a pull request gets
	// before its author's task waits for a person (default
	// task.DefaultMaxRepairRounds, 2).
	MaxRepairRounds int
}

func (c *Config) setDefaults() {
	if c.TaskBudgetPerHour == 0 {
		c.TaskBudgetPerHour = DefaultTaskBudgetPerHour
	}
	if c.MaxMentionHops == 0 {
		c.MaxMentionHops = DefaultMaxMentionHops
	}
	if c.DiscussionGrace == 0 {
		c.DiscussionGrace = DefaultDiscussionGrace
	}
	if c.QuietPeriod == 0 {
		c.QuietPeriod = DefaultQuietPeriod
	}
	if c.DiscussLabel == "" {
		c.DiscussLabel = DefaultDiscussLabel
	}
	if c.DeployContext == nil {
		c.DeployContext = regexp.MustCompile(DefaultDeployContext)
	}
	if c.InfraContext == nil {
		c.InfraContext = regexp.MustCompile(DefaultInfraContext)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.MaxRepairRounds <= 0 {
		c.MaxRepairRounds = task.DefaultMaxRepairRounds
	}
	if c.Route == nil {
		c.Route = func([]string) task.BusinessType { return task.BusinessFeature }
	}
	if c.Tasks == nil {
		c.Tasks = build.New(build.Config{MaxRetries: c.MaxRetries, BudgetPerHour: c.TaskBudgetPerHour,
			Observer: c.Metrics})
	}
}

// Mapper turns a stored delivery into task_state changes (SPEC §4).
type Mapper struct {
	cfg Config
}

// New builds a mapper; zero config fields take their defaults.
func New(cfg Config) *Mapper {
	cfg.setDefaults()
	return &Mapper{cfg: cfg}
}

// errPermanent marks failures that no retry can fix (a payload that does
// not parse): the delivery is parked at once.
var errPermanent = repository.ErrPermanent

// Apply maps one delivery inside tx. It is a repository.DeliveryFunc.
func (m *Mapper) Apply(ctx context.Context, tx *repository.Tx, d repository.Delivery) (repository.DeliveryResult, error) {
	kind := payload.Classify(d.Event, d.EventType)
	if kind == payload.KindIgnored {
		return repository.DeliveryResult{Outcome: repository.OutcomeIgnored}, nil
	}
	ev, err := deliveryEvent(ctx, tx, kind, d)
	if err != nil {
		return repository.DeliveryResult{}, err
	}
	key := ev.SemanticKey()
	claimed, err := tx.ClaimEffect(ctx, key, d.ID)
	if err != nil {
		return repository.DeliveryResult{}, err
	}
	if !claimed {
		return repository.DeliveryResult{Outcome: repository.OutcomeDuplicate, SemanticKey: key}, nil
	}
	e := &eventCtx{m: m, tx: tx, ev: ev, delivery: d, log: m.cfg.Logger.With(
		"delivery_id", d.ID, "event", d.Event, "action", ev.Action, "repo", ev.Repo)}
	if m.fromBot(ev) {
		e.log.Debug("event caused by mozi itself: no effect")
		return repository.DeliveryResult{Outcome: repository.OutcomeIgnored, SemanticKey: key}, nil
	}
	if err := e.follow(ctx, table[kind]); err != nil {
		return repository.DeliveryResult{}, err
	}
	return repository.DeliveryResult{Outcome: repository.OutcomeProcessed, SemanticKey: key}, nil
}

// deliveryEvent is the event a delivery carries: what the intake parsed,
// else its body parsed now (a delivery stored with nothing parsed, or
// parsed by a mozi that parsed differently).
func deliveryEvent(ctx context.Context, tx *repository.Tx, kind payload.Kind, d repository.Delivery) (payload.Event, error) {
	if d.Parsed != nil {
		if ev, err := payload.DecodeEvent(d.Parsed); err == nil && ev.Kind == kind {
			return ev, nil
		}
		if d.Body == nil {
			body, err := tx.DeliveryBody(ctx, d.ID)
			if err != nil {
				return payload.Event{}, err
			}
			d.Body = body
		}
	}
	ev, err := payload.Parse(kind, d.Body)
	if err != nil {
		return payload.Event{}, fmt.Errorf("%w: %v", errPermanent, err)
	}
	return ev, nil
}

// fromBot is the loop guard: a comment mozi posted (its failure notices)
// must never make work.
func (m *Mapper) fromBot(ev payload.Event) bool {
	if ev.Kind != payload.KindIssueComment {
		return false
	}
	bot := m.cfg.BotUser
	return bot != "" && (strings.EqualFold(ev.Sender, bot) || strings.EqualFold(ev.Comment.Author, bot))
}

// eventCtx carries one delivery through the mapping rules.
type eventCtx struct {
	m        *Mapper
	tx       *repository.Tx
	ev       payload.Event
	delivery repository.Delivery
	log      *slog.Logger

	// What the kind's enter step found, for the action's rule.
	issue   issueSync        // issues
	pr      task.PullRequest // pull_request, review: mozi's copy, updated
	current bool             // the pull request payload is not older than mozi's copy
}

func (e *eventCtx) agent(login string) (Agent, bool) { return e.m.cfg.Agents.Lookup(login) }

// newer compares Gitea timestamps, a zero (placeholder) time being oldest.
func newer(a, b time.Time) int { return a.Compare(b) }

// priority reads priority/P0…P3 (default P2).
func priority(labels []string) int { return task.PriorityFromLabels(labels) }

// spawn is a task the rules want, checked against the guards before it is
// created.
type spawn struct {
	task  repository.NewTask
	cause build.Cause
}

// create makes a task unless a guard refuses it: the issue closed after
// the event, or the per-issue budget is spent. It returns the task and
// whether it was created (false also when an equivalent live task exists).
func (e *eventCtx) create(ctx context.Context, s spawn) (task.Task, bool, error) {
	n := s.task
	n.Meta.Event = e.delivery.Event + "/" + e.ev.Action
	n.Meta.DeliveryID = e.delivery.ID
	if n.Meta.Sender == "" {
		n.Meta.Sender = e.ev.Sender
	}
	log := e.log.With("issue", n.IssueNumber, "action_type", n.ActionType, "agent", n.Agent)
	var out build.Outcomes
	t, refused, err := e.m.cfg.Tasks.Create(ctx, e.tx, &out, n, s.cause)
	if err != nil {
		return task.Task{}, false, err
	}
	switch refused {
	case repository.RefusedClosed:
		log.Debug("not creating task: the issue was closed after the event")
	case repository.RefusedBudget:
		log.Warn("task budget of the issue spent: not creating task", "budget_per_hour", e.m.cfg.Tasks.BudgetPerHour())
	case "":
		log.Info("task created", "task_id", t.ID, "business_type", t.BusinessType)
	}
	// Counted at once, inside the delivery's transaction, as the rules
	// always were: the mapper has no hook after the commit.
	e.m.cfg.Tasks.Report(out)
	return t, refused == "", nil
}

// apply moves a task and logs what happened; anomalies (a terminal event
// on a pending task) are logged and counted.
func (e *eventCtx) apply(ctx context.Context, t task.Task, ev task.Event, c repository.Change) error {
	if c.Actor == "" {
		c.Actor = e.ev.Sender // who ended it, if it ends: its running agent stops unless it did it itself
	}
	res, err := e.tx.Apply(ctx, t.ID, ev, c)
	if err != nil {
		return err
	}
	log := e.log.With("task_id", t.ID, "issue", t.IssueNumber, "agent", t.Agent, "action_type", t.ActionType)
	switch {
	case res.Applied && res.From == task.StatusPending && res.To == task.StatusDone:
		log.Warn("anomaly: terminal event for a task that never ran", "transition", ev)
		e.m.cfg.Metrics.anomalies.WithLabelValues(string(ev)).Inc()
	case res.Applied:
		log.Info("task moved", "from", res.From, "to", res.To)
	default:
		log.Debug("event does not apply to the task", "transition", ev, "status", res.From)
	}
	return nil
}

// finish completes every live task of an issue that matches keep.
func (e *eventCtx) finishWhere(ctx context.Context, repo string, number int, ev task.Event, c repository.Change, keep func(task.Task) bool) error {
	tasks, err := e.tx.LiveTasks(ctx, repo, number)
	if err != nil {
		return err
	}
	for _, t := range tasks {
		if keep(t) {
			if err := e.apply(ctx, t, ev, c); err != nil {
				return err
			}
		}
	}
	return nil
}

func (e *eventCtx) lock(ctx context.Context, number int) error {
	if number <= 0 {
		return nil
	}
	return e.tx.LockIssue(ctx, e.ev.Repo, number)
}

// clip bounds text copied into a task's meta; the prompt applies its own,
// finer budgets.
func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "\n[… cut by mozi]"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
