package spawner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/spawner/notice"
)

// Store is what the spawner records runs in (repository.Store).
type Store interface {
	Apply(ctx context.Context, id int64, ev repository.Event, c repository.Change) (repository.Result, error)
	StartRun(ctx context.Context, t repository.Task, owner, logPath string) (repository.Attempt, bool, error)
	FinishRun(ctx context.Context, e repository.RunEnd) (repository.Result, error)
}

// Runner runs one process (ProcessRunner; tests use fakes).
type Runner interface {
	Run(ctx context.Context, c Command) Result
}

// PromptFunc builds a task's prompt.
type PromptFunc func(ctx context.Context, t repository.Task) (string, error)

// Config configures the spawner.
type Config struct {
	// Owner names this runner: the lease holder of the tasks it runs.
	Owner string
	// Agents by login.
	Agents map[string]Agent
	// StateDir holds runs/ (prompt files) and logs/ (one log per attempt,
	// and the outcome of a run not recorded yet).
	StateDir string
	GiteaURL string
	// RetryBase and RetryMax shape the backoff between attempts (defaults
	// 30s and 30m); HoldBase and HoldMax the wait of a task whose prompt
	// cannot be built yet (defaults 15s and 10m).
	RetryBase time.Duration
	RetryMax  time.Duration
	HoldBase  time.Duration
	HoldMax   time.Duration
	TailBytes int
	Getenv    func(string) string
	Logger    *slog.Logger
	Metrics   *Metrics
	// Notifier tells the issue when a task fails for good (nil: nobody).
	Notifier *notice.Notifier
}

// Spawner runs a claimed task's agent and moves the task by the outcome.
// The caller (the dispatcher) holds the task's lease for the whole of
// Handle and cancels its context with repository.ErrLeaseLost when the
// lease is lost.
type Spawner struct {
	cfg    Config
	store  Store
	runner Runner
	prompt PromptFunc

	// recording are the outcome files a Handle is recording right now,
	// which RecordLeftovers must leave alone.
	mu        sync.Mutex
	recording map[string]bool
}

// New builds a spawner.
func New(cfg Config, store Store, runner Runner, prompt PromptFunc) *Spawner {
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = 30 * time.Second
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = 30 * time.Minute
	}
	if cfg.HoldBase <= 0 {
		cfg.HoldBase = 15 * time.Second
	}
	if cfg.HoldMax <= 0 {
		cfg.HoldMax = 10 * time.Minute
	}
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	return &Spawner{cfg: cfg, store: store, runner: runner, prompt: prompt, recording: map[string]bool{}}
}

// errPromptUnavailable is a transient failure to build the prompt.
var errPromptUnavailable = errors.New("prompt unavailable")

// Handle runs a claimed task. ctx ending means shutdown (the agent is
// killed and the attempt recorded as interrupted, not as a failure) or a
// lost lease (context.Cause is repository.ErrLeaseLost).
func (s *Spawner) Handle(ctx context.Context, t repository.Task) {
	log := s.cfg.Logger.With("task_id", t.ID, "repo", t.Repo, "issue", t.IssueNumber, "agent", t.Agent,
		"action_type", t.ActionType, "attempt", t.DispatchCount)
	bg := context.WithoutCancel(ctx) // bookkeeping outlives the shutdown signal
	agent, ok := s.cfg.Agents[t.Agent]
	if !ok {
		s.apply(bg, log, t, repository.EventFail, repository.Change{Error: "agent " + t.Agent + " is not declared"})
		return
	}
	prompt, err := s.prompt(ctx, t)
	if err != nil {
		// Gitea down, issue unreadable: the task waits, nothing is lost.
		wait := repository.Backoff(t.Holds+1, s.cfg.HoldBase, s.cfg.HoldMax)
		log.Warn("prompt not built, task waits", "error", err, "wait", wait.Round(time.Second).String())
		s.apply(bg, log, t, repository.EventRelease, repository.Change{
			NotBefore: time.Now().Add(wait), Error: fmt.Sprintf("%v: %v", errPromptUnavailable, err)})
		return
	}
	runDir := filepath.Join(s.cfg.StateDir, "runs", fmt.Sprintf("%d-%d", t.ID, t.DispatchCount))
	logPath := filepath.Join(s.cfg.StateDir, "logs", safeName(t.Repo), fmt.Sprintf("%d-%d.log", t.ID, t.DispatchCount))
	attempt, started, err := s.store.StartRun(bg, t, s.cfg.Owner, logPath)
	if err != nil || !started {
		log.Info("task moved before its agent started: not spawning", "error", err)
		return
	}
	promptFile := filepath.Join(runDir, "prompt.md")
	if err := writePrompt(promptFile, prompt); err != nil {
		s.finish(ctx, log, t, attempt, Result{ExitCode: -1, Outcome: OutcomeSpawnError, Err: err.Error()})
		return
	}
	defer os.RemoveAll(runDir)
	args, stdin := argv(agent.Argv, promptFile, prompt)
	cmd := Command{Argv: args, Dir: agent.Workdir, LogPath: logPath, Timeout: agent.Timeout,
		Usage: agent.Usage, MaxCostUSD: agent.MaxCostUSD, MaxTokens: agent.MaxTokens, TailBytes: s.cfg.TailBytes,
		Env: environment(agent, Vars{TaskID: t.ID, Repo: t.Repo, Issue: t.IssueNumber, PR: t.PRNumber,
			Action: string(t.ActionType), Attempt: t.DispatchCount, PromptFile: promptFile, GiteaURL: s.cfg.GiteaURL},
			s.cfg.Getenv)}
	if stdin {
		cmd.Stdin = []byte(prompt)
	}
	if err := os.MkdirAll(agent.Workdir, 0o755); err != nil {
		s.finish(ctx, log, t, attempt, Result{ExitCode: -1, Outcome: OutcomeSpawnError,
			Err: "create working directory: " + err.Error()})
		return
	}
	log.Info("agent started")
	s.cfg.Metrics.started(t)
	result := s.runner.Run(ctx, cmd)
	s.finish(ctx, log, t, attempt, result)
}

// finish records the attempt and moves the task by its outcome, in one
// transaction, and does not give up while the database is away (see
// record).
func (s *Spawner) finish(ctx context.Context, log *slog.Logger, t repository.Task, attempt repository.Attempt, r Result) {
	attempt.Outcome, attempt.Error, attempt.OutputTail = r.Outcome, r.Err, r.Tail
	attempt.Duration, attempt.TokensIn, attempt.TokensOut, attempt.CostUSD = r.Duration, r.TokensIn, r.TokensOut, r.CostUSD
	if r.ExitCode >= 0 {
		code := r.ExitCode
		attempt.ExitCode = &code
	}
	s.cfg.Metrics.finished(t, r)
	log = log.With("outcome", r.Outcome, "duration", r.Duration.Round(time.Millisecond).String())
	end := repository.RunEnd{Attempt: attempt, Owner: s.cfg.Owner, Reclaim: true}
	var msg string
	switch {
	case r.Outcome == OutcomeLeaseLost:
		end.Reclaim = false // the run was killed: its task belongs to someone else now
		msg = "agent stopped: its task was taken over or ended in Gitea"
	case r.Outcome == OutcomeInterrupted:
		end.Event, end.Change, end.Reclaim = repository.EventInterrupt, repository.Change{LeaseOwner: s.cfg.Owner}, false
		msg = "agent interrupted by shutdown; the task will run again"
	case r.Outcome == OutcomeSucceeded || t.ActionType.Notification() && r.Outcome != OutcomeSpawnError:
		if t.ActionType.FinishedOnExit() {
			end.Event, msg = repository.EventComplete, "agent finished; task done"
		} else {
			msg = "agent finished; task waits for Gitea" // no event: only the lease is dropped
		}
	case t.RetryCount < t.MaxRetries:
		delay := repository.Backoff(t.RetryCount+1, s.cfg.RetryBase, s.cfg.RetryMax)
		end.Event, end.Change = repository.EventRetry, repository.Change{NotBefore: time.Now().Add(delay), Error: r.Err}
		log = log.With("error", r.Err, "retry_in", delay.Round(time.Second).String(), "retries_left", t.MaxRetries-t.RetryCount-1)
		msg = "agent failed, will retry"
		s.cfg.Metrics.retries.WithLabelValues(t.Agent).Inc()
	default:
		end.Event, end.Change = repository.EventFail, repository.Change{Error: r.Err}
		log = log.With("error", r.Err)
		msg = "agent failed, no retry left: task failed"
	}
	res, ok := s.record(ctx, log, end)
	switch {
	case !ok:
		return
	case end.Event != "" && !res.Applied:
		log.Info("task had already moved", "transition", end.Event, "status", res.From)
		return
	case end.Event == repository.EventRetry || end.Event == repository.EventFail || r.Outcome == OutcomeLeaseLost:
		log.Warn(msg)
	default:
		log.Info(msg)
	}
	if end.Event == repository.EventFail {
		s.cfg.Notifier.TaskFailed(context.WithoutCancel(ctx), t.ID, r.Err)
	}
}

// recordTimeout bounds one try to record a run.
const recordTimeout = 10 * time.Second

// record writes how a run ended to the database, retrying with backoff
// while the database does not answer: a run that finished must not be
// rescued and run again because PostgreSQL blinked as it ended. The
// outcome is kept on disk, next to the attempt's log, until it is
// recorded; if mozi stops first, RecordLeftovers records it later.
func (s *Spawner) record(ctx context.Context, log *slog.Logger, end repository.RunEnd) (repository.Result, bool) {
	path := outcomePath(end.Attempt.LogPath)
	if path != "" {
		if err := writeOutcome(path, end); err != nil {
			log.Warn("run outcome not kept on disk; recording it in the database only", "error", err)
			path = ""
		} else {
			s.setRecording(path, true)
			defer s.setRecording(path, false)
		}
	}
	for try := 1; ; try++ {
		res, err := s.finishRun(context.WithoutCancel(ctx), end)
		if err == nil {
			if path != "" {
				_ = os.Remove(path)
			}
			if try > 1 {
				log.Info("run recorded after the database came back", "tries", try)
			}
			return res, true
		}
		if try == 1 {
			log.Warn("run not recorded yet, retrying until the database answers", "error", err)
		}
		wait := repository.Backoff(try, 250*time.Millisecond, 10*time.Second)
		select {
		case <-ctx.Done():
			if path != "" {
				log.Error("run not recorded before mozi stops: kept on disk, recorded at the next start",
					"outcome_file", path, "error", err)
			} else {
				log.Error("run not recorded", "error", err)
			}
			return repository.Result{}, false
		case <-time.After(wait):
		}
	}
}

func (s *Spawner) finishRun(ctx context.Context, end repository.RunEnd) (repository.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, recordTimeout)
	defer cancel()
	return s.store.FinishRun(ctx, end)
}

func (s *Spawner) setRecording(path string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if on {
		s.recording[path] = true
	} else {
		delete(s.recording, path)
	}
}

// outcomeSuffix names the file that keeps a run's outcome until it is
// recorded: <log>.outcome.json.
const outcomeSuffix = ".outcome.json"

func outcomePath(logPath string) string {
	if logPath == "" {
		return ""
	}
	return strings.TrimSuffix(logPath, ".log") + outcomeSuffix
}

func writeOutcome(path string, end repository.RunEnd) error {
	data, err := json.Marshal(end)
	if err != nil {
		return fmt.Errorf("encode run outcome: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create log directory: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("write run outcome: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write run outcome: %w", err)
	}
	return nil
}

// RecordLeftovers records the run outcomes kept on disk that no Handle is
// recording: those of a mozi that stopped while the database was away. It
// returns how many it recorded; the rest stay for the next call.
func (s *Spawner) RecordLeftovers(ctx context.Context) (int, error) {
	var paths []string
	err := filepath.WalkDir(filepath.Join(s.cfg.StateDir, "logs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, outcomeSuffix) {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("look for unrecorded runs: %w", err)
	}
	n := 0
	for _, p := range paths {
		s.mu.Lock()
		busy := s.recording[p]
		s.mu.Unlock()
		if busy {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			continue // recorded and removed meanwhile
		}
		var end repository.RunEnd
		if err := json.Unmarshal(data, &end); err != nil {
			s.cfg.Logger.Error("unreadable run outcome set aside", "outcome_file", p, "error", err)
			_ = os.Rename(p, p+".broken")
			continue
		}
		res, err := s.finishRun(ctx, end)
		if err != nil {
			return n, fmt.Errorf("record run of task %d kept in %s: %w", end.Attempt.TaskID, p, err)
		}
		_ = os.Remove(p)
		n++
		s.cfg.Logger.Info("recorded a run kept on disk", "task_id", end.Attempt.TaskID, "attempt", end.Attempt.Attempt,
			"outcome", end.Attempt.Outcome, "applied", res.Applied, "status", res.From)
		if end.Event == repository.EventFail && res.Applied {
			s.cfg.Notifier.TaskFailed(ctx, end.Attempt.TaskID, end.Change.Error)
		}
	}
	return n, nil
}

func (s *Spawner) apply(ctx context.Context, log *slog.Logger, t repository.Task, ev repository.Event, c repository.Change) bool {
	res, err := s.store.Apply(ctx, t.ID, ev, c)
	if err != nil {
		log.Error("task not moved", "transition", ev, "error", err)
		return false
	}
	if !res.Applied {
		log.Info("task had already moved", "transition", ev, "status", res.From)
	}
	return res.Applied
}

func writePrompt(path, prompt string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create run directory: %w", err)
	}
	if err := os.WriteFile(path, []byte(prompt), 0o600); err != nil {
		return fmt.Errorf("write prompt: %w", err)
	}
	return nil
}

// safeName makes owner/name usable as a directory name.
func safeName(repo string) string {
	return strings.NewReplacer("/", "_", "..", "_").Replace(repo)
}
