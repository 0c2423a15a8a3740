package progress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/gitea"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/spawner/worker"
)

// Gitea is where the status comments go (gitea.Client).
type Gitea interface {
	PostComment(ctx context.Context, repo string, number int, body string) (int64, error)
	EditComment(ctx context.Context, repo string, commentID int64, body string) error
	FetchComments(ctx context.Context, repo string, number, limit int) ([]task.Comment, error)
	ReactToIssue(ctx context.Context, repo string, number int, reaction string) error
	ReactToComment(ctx context.Context, repo string, commentID int64, reaction string) error
}

// Store is where task changes and the status comments are (repository.Store).
type Store interface {
	FoldStatusMarks(ctx context.Context) (int, error)
	ClaimStatusComments(ctx context.Context, limit int, minInterval, lockFor time.Duration) ([]repository.StatusComment, error)
	StatusShown(ctx context.Context, c repository.StatusComment, commentID int64, body string, edited bool) error
	StatusRetry(ctx context.Context, c repository.StatusComment, next time.Time, why string, lost bool) error
	StatusPark(ctx context.Context, c repository.StatusComment, why string) error
	StatusFactsOf(ctx context.Context, repo string, agents []string) (repository.StatusFacts, error)
	ListTasks(ctx context.Context, f repository.TaskFilter) ([]task.Task, error)
	OpenDependencies(ctx context.Context, id int64) ([]int, error)
}

// Defaults of Config.
const (
	DefaultMinEditInterval = 10 * time.Second
	DefaultPoll            = 2 * time.Second
	DefaultBackoffBase     = 2 * time.Second
	DefaultBackoffMax      = 5 * time.Minute
	// lockFor is how long a claimed comment is this poster's: longer than
	// its reactions, post and edit with their retries take.
	lockFor = 2 * time.Minute
	// lookBack is how many of an issue's comments a retried first post
	// reads to find an earlier try that reached Gitea.
	lookBack = 500
	// tasksShown bounds the tasks of one issue the comment is rendered
	// from (newest first).
	tasksShown = 50
)

// Config configures the poster; zero fields take defaults.
type Config struct {
	// Enabled says whether a repository gets status comments and
	// reactions (nil: every repository).
	Enabled func(repo string) bool
	// MinEditInterval is the least time between two edits of one comment
	// (default DefaultMinEditInterval): the states in between are
	// coalesced, the last one is always shown.
	MinEditInterval time.Duration
	// Poll is the safety net when no notification wakes it, and how soon
	// a comment held back by MinEditInterval is seen again (default
	// DefaultPoll).
	Poll time.Duration
	// MaxRepairRounds is the CI repair rounds a pull request gets: a task
	// waiting after CI stayed red used them all.
	MaxRepairRounds int
	BackoffBase     time.Duration
	BackoffMax      time.Duration
	Logger          *slog.Logger
	Metrics         *Metrics
}

// Poster keeps the issues' status comments up to date.
type Poster struct {
	cfg   Config
	store Store
	gitea Gitea
	loop  *worker.Loop
}

// NewPoster builds a poster.
func NewPoster(store Store, g Gitea, cfg Config) *Poster {
	if cfg.Enabled == nil {
		cfg.Enabled = func(string) bool { return true }
	}
	if cfg.MinEditInterval <= 0 {
		cfg.MinEditInterval = DefaultMinEditInterval
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = DefaultBackoffBase
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = DefaultBackoffMax
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	return &Poster{cfg: cfg, store: store, gitea: g, loop: worker.New()}
}

// Wake asks for a pass now (new work was written). It never blocks.
func (p *Poster) Wake() { p.loop.Wake() }

// Run keeps the status comments up to date until ctx ends.
func (p *Poster) Run(ctx context.Context) { p.loop.Run(ctx, p.cfg.Poll, p.Pass) }

// Pass folds the task changes, shows what is due and reports whether more
// may be.
func (p *Poster) Pass(ctx context.Context) bool {
	const batch = 16
	folded, err := p.store.FoldStatusMarks(ctx)
	if err != nil && ctx.Err() == nil {
		p.cfg.Logger.Warn("status comments: task changes not folded", "error", err)
	}
	due, err := p.store.ClaimStatusComments(ctx, batch, p.cfg.MinEditInterval, lockFor)
	if err != nil {
		if ctx.Err() == nil {
			p.cfg.Logger.Warn("status comments unavailable", "error", err)
		}
		return false
	}
	for _, c := range due {
		p.show(ctx, c)
	}
	return len(due) == batch || folded == 1000
}

func (p *Poster) show(ctx context.Context, c repository.StatusComment) {
	log := p.cfg.Logger.With("repo", c.Repo, "issue", c.Issue, "tries", c.Attempts)
	bg := context.WithoutCancel(ctx)
	if !p.cfg.Enabled(c.Repo) {
		// Off for the repository: the changes are seen, nothing is said.
		if err := p.store.StatusShown(bg, c, c.CommentID, c.Body, false); err != nil {
			log.Error("status comment not updated", "error", err)
		}
		return
	}
	tasks, err := p.store.ListTasks(ctx, repository.TaskFilter{Repo: c.Repo, IssueNumber: c.Issue, Limit: tasksShown})
	if err != nil {
		p.retry(bg, log, c, err)
		return
	}
	if err := p.react(ctx, log, &c, tasks); err != nil {
		p.retry(bg, log, c, err)
		return
	}
	var agents []string
	items := make([]Item, len(tasks))
	for i, t := range tasks {
		items[i] = Item{Task: t}
		if t.WaitReason == task.WaitCIRed {
			items[i].CIRound, items[i].CIRounds = p.cfg.MaxRepairRounds, p.cfg.MaxRepairRounds
		}
		if t.Status == task.StatusPending {
			if items[i].OpenDeps, err = p.store.OpenDependencies(ctx, t.ID); err != nil {
				p.retry(bg, log, c, err)
				return
			}
		}
		if !slices.Contains(agents, t.Agent) {
			agents = append(agents, t.Agent)
		}
	}
	facts, err := p.store.StatusFactsOf(ctx, c.Repo, agents)
	if err != nil {
		p.retry(bg, log, c, err)
		return
	}
	body := Render(items, Facts{Now: facts.Now, BreakerUntil: facts.BreakerUntil, Busy: facts.Busy})
	if body == "" || (body == c.Body && c.CommentID != 0) {
		if err := p.store.StatusShown(bg, c, c.CommentID, c.Body, false); err != nil {
			log.Error("status comment not updated", "error", err)
		}
		return
	}
	id, result, err := p.write(ctx, c, body)
	if err != nil {
		switch {
		case c.CommentID != 0 && errors.Is(err, task.ErrNotFound):
			p.lost(ctx, log, c, err)
		case gitea.Refused(err):
			log.Error("Gitea refuses mozi's status comment for good: given up", "error", err)
			p.cfg.Metrics.edits.WithLabelValues("parked").Inc()
			if err := p.store.StatusPark(bg, c, err.Error()); err != nil {
				log.Error("status comment not updated", "error", err)
			}
		default:
			p.retry(bg, log, c, err)
		}
		return
	}
	p.cfg.Metrics.edits.WithLabelValues(result).Inc()
	if err := p.store.StatusShown(bg, c, id, body, true); err != nil {
		// The lock runs out and the next pass edits the same comment (or
		// finds the first post by its marker): no second comment.
		log.Error("status comment shown but not recorded", "comment_id", id, "error", err)
	}
}

// lost handles an edit Gitea answered 404: someone deleted the comment,
// and the next try posts a new one; but a comment Gitea still lists
// cannot be edited there (no edit route), and posting anew would leave
// one more comment per change: given up.
func (p *Poster) lost(ctx context.Context, log *slog.Logger, c repository.StatusComment, editErr error) {
	bg := context.WithoutCancel(ctx)
	found, err := p.find(ctx, c)
	switch {
	case err != nil:
		p.retry(bg, log, c, fmt.Errorf("%w; and listing the comments: %w", editErr, err))
	case found == c.CommentID:
		log.Error("Gitea lists mozi's status comment but refuses to edit it: given up", "comment_id", c.CommentID, "error", editErr)
		p.cfg.Metrics.edits.WithLabelValues("parked").Inc()
		if err := p.store.StatusPark(bg, c, editErr.Error()); err != nil {
			log.Error("status comment not updated", "error", err)
		}
	default:
		log.Info("status comment gone from Gitea: posting a new one", "comment_id", c.CommentID)
		p.cfg.Metrics.edits.WithLabelValues("lost").Inc()
		if err := p.store.StatusRetry(bg, c, time.Now(), editErr.Error(), true); err != nil {
			log.Error("status comment not updated", "error", err)
		}
	}
}

// write posts the issue's status comment or edits it; result names which.
func (p *Poster) write(ctx context.Context, c repository.StatusComment, body string) (int64, string, error) {
	id := c.CommentID
	if id == 0 && c.Attempts > 1 {
		// An earlier first post may have reached Gitea though its answer
		// did not reach mozi: edit that one rather than post another.
		found, err := p.find(ctx, c)
		if err != nil {
			return 0, "", fmt.Errorf("look for an earlier status comment: %w", err)
		}
		id = found
	}
	if id == 0 {
		id, err := p.gitea.PostComment(ctx, c.Repo, c.Issue, body)
		return id, "created", err
	}
	return id, "edited", p.gitea.EditComment(ctx, c.Repo, id, body)
}

func (p *Poster) find(ctx context.Context, c repository.StatusComment) (int64, error) {
	comments, err := p.gitea.FetchComments(ctx, c.Repo, c.Issue, lookBack)
	if err != nil {
		return 0, err
	}
	for _, cm := range comments {
		if strings.Contains(cm.Body, Marker) {
			return cm.ID, nil
		}
	}
	return 0, nil
}

// react leaves 👀 on what triggered each task not reacted to yet: the
// comment of a mention, else the issue. A reaction Gitea refuses for good
// (the comment is gone) is not tried again.
func (p *Poster) react(ctx context.Context, log *slog.Logger, c *repository.StatusComment, tasks []task.Task) error {
	for _, t := range tasks {
		if slices.Contains(c.Reacted, t.ID) {
			continue
		}
		var err error
		if t.ActionType == task.ActionMention && t.Meta.CommentID != 0 {
			err = p.gitea.ReactToComment(ctx, c.Repo, t.Meta.CommentID, gitea.ReactionTaken)
		} else {
			err = p.gitea.ReactToIssue(ctx, c.Repo, c.Issue, gitea.ReactionTaken)
		}
		switch {
		case err == nil:
			p.cfg.Metrics.reactions.WithLabelValues("ok").Inc()
		case gitea.Refused(err):
			p.cfg.Metrics.reactions.WithLabelValues("refused").Inc()
			log.Warn("Gitea refuses mozi's reaction: not tried again", "task_id", t.ID, "error", err)
		default:
			return fmt.Errorf("react to the trigger of task %d: %w", t.ID, err)
		}
		c.Reacted = append(c.Reacted, t.ID)
	}
	return nil
}

func (p *Poster) retry(ctx context.Context, log *slog.Logger, c repository.StatusComment, err error) {
	wait := task.Backoff(c.Attempts, p.cfg.BackoffBase, p.cfg.BackoffMax)
	if c.Attempts == 1 {
		log.Warn("status comment not shown, will retry until Gitea takes it", "retry_in", wait.Round(time.Second).String(), "error", err)
	} else {
		log.Debug("status comment still not shown", "retry_in", wait.Round(time.Second).String(), "error", err)
	}
	p.cfg.Metrics.edits.WithLabelValues("retried").Inc()
	if err := p.store.StatusRetry(ctx, c, time.Now().Add(wait), err.Error(), false); err != nil {
		log.Error("status comment not updated", "error", err)
	}
}

// Metrics are the poster's collectors.
type Metrics struct {
	edits     *prometheus.CounterVec
	reactions *prometheus.CounterVec
}

// NewMetrics creates the collectors on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		edits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mozi_status_comment_edits_total",
			Help: "Writes of issues' status comments, by result (created, edited, retried, lost, parked).",
		}, []string{"result"}),
		reactions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mozi_status_reactions_total",
			Help: "Reactions mozi left on what triggered a task it took, by result (ok, refused).",
		}, []string{"result"}),
	}
	if reg != nil {
		reg.MustRegister(m.edits, m.reactions)
	}
	return m
}
