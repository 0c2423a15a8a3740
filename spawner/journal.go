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
	"time"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/task"
)

// The outcome journal: a run's outcome is kept on disk next to its log
// until the database has it, so that no finished run is run again because
// PostgreSQL was away as it ended.

// recordTimeout bounds one try to record a run.
const recordTimeout = 10 * time.Second

// record writes how a run ended to the database, retrying while the
// database does not answer, however long (only mozi's end stops it): a run
// that finished must not be rescued and run again because PostgreSQL was
// away as it ended. Retries come at most a second apart, so the record
// lands as soon as the database is back. The outcome is kept on disk, next
// to the attempt's log, until it is recorded; if mozi stops first,
// RecordLeftovers records it at the next start.
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
		wait := task.Backoff(try, 100*time.Millisecond, time.Second)
		select {
		case <-s.cfg.Done:
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
	}
	return n, nil
}
