package console

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/moziplus/mozi/repository/task"
)

// maxShown is how much of a log a run page renders (its end).
const maxShown = 1 << 20

// runAttempt reads the attempt a run page is about, of a readable task.
func (s *Server) runAttempt(w http.ResponseWriter, r *http.Request) (task.Task, task.Attempt, bool) {
	t, _, ok := s.visibleTask(w, r)
	if !ok {
		return t, task.Attempt{}, false
	}
	n, err := strconv.Atoi(chi.URLParam(r, "n"))
	if err != nil {
		http.Error(w, "not an attempt number", http.StatusBadRequest)
		return t, task.Attempt{}, false
	}
	a, err := s.attempt(r.Context(), t.ID, n)
	if errors.Is(err, task.ErrNotFound) {
		http.NotFound(w, r)
		return t, task.Attempt{}, false
	}
	if err != nil {
		s.fail(w, r, err)
		return t, task.Attempt{}, false
	}
	return t, a, true
}

func (s *Server) attempt(ctx context.Context, taskID int64, n int) (task.Attempt, error) {
	list, err := s.store.Attempts(ctx, taskID)
	if err != nil {
		return task.Attempt{}, err
	}
	for _, a := range list {
		if a.Attempt == n {
			return a, nil
		}
	}
	return task.Attempt{}, fmt.Errorf("attempt %d of task %d: %w", n, taskID, task.ErrNotFound)
}

type runData struct {
	Task    task.Task
	Attempt task.Attempt
	Running bool
	Log     string // "" with NoLog: the file is not on this replica (or pruned)
	NoLog   bool
	Offset  int64 // where the live stream goes on from
	Steps   []step
}

// runPage shows a run: while it runs, what it wrote so far and the live
// stream; afterwards, the replay of its structured output, or its log.
func (s *Server) runPage(w http.ResponseWriter, r *http.Request) {
	t, a, ok := s.runAttempt(w, r)
	if !ok {
		return
	}
	d := runData{Task: t, Attempt: a, Running: a.Outcome == "running"}
	data, size, err := readTail(a.LogPath, maxShown)
	switch {
	case err == nil:
		d.Log, d.Offset = string(data), size
	case errors.Is(err, os.ErrNotExist) || a.LogPath == "":
		d.NoLog = true
		d.Log = a.OutputTail // what the run's record kept
	default:
		s.fail(w, r, err)
		return
	}
	if !d.Running {
		d.Steps = replay(d.Log)
	}
	s.render(w, r, "run", d)
}

func readTail(path string, limit int64) ([]byte, int64, error) {
	if path == "" {
		return nil, 0, os.ErrNotExist
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("read the run's log: %w", err)
	}
	from := max(st.Size()-limit, 0)
	data, err := io.ReadAll(io.NewSectionReader(f, from, st.Size()-from))
	if err != nil {
		return nil, 0, fmt.Errorf("read the run's log: %w", err)
	}
	return data, st.Size(), nil
}

// runStream sends a run's output as server-sent events from the byte
// offset `from` on: one `line` event per line as the agent writes it, and
// an `end` event with the outcome once the run is over and its log is
// drained. The log file is the spawner's (stdout and stderr, redacted),
// so only the replica that runs the agent has it.
func (s *Server) runStream(w http.ResponseWriter, r *http.Request) {
	t, a, ok := s.runAttempt(w, r)
	if !ok {
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	// A browser that reconnects says how far it got (the id of the last
	// event: the offset after its line).
	from, _ := strconv.ParseInt(r.URL.Query().Get("from"), 10, 64)
	if id, err := strconv.ParseInt(r.Header.Get("Last-Event-ID"), 10, 64); err == nil && id > from {
		from = id
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	ctx := r.Context()
	// A stream may outlive the server's write timeout.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	var partial string
	send := func(event, data string) {
		fmt.Fprintf(w, "id: %d\nevent: %s\n", from, event)
		for l := range strings.SplitSeq(data, "\n") {
			fmt.Fprintf(w, "data: %s\n", l)
		}
		fmt.Fprint(w, "\n")
	}
	// drain sends what the log holds past from; a line not ended yet waits
	// for its end (or the run's).
	drain := func(final bool) error {
		f, err := os.Open(a.LogPath)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := f.Seek(from, io.SeekStart); err != nil {
			return err
		}
		br := bufio.NewReaderSize(f, 64<<10)
		for {
			chunk, err := br.ReadString('\n')
			from += int64(len(chunk))
			partial += chunk
			if strings.HasSuffix(partial, "\n") {
				send("line", strings.TrimSuffix(partial, "\n"))
				partial = ""
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
		}
		if final && partial != "" {
			send("line", partial)
			partial = ""
		}
		flusher.Flush()
		return nil
	}
	tick := time.NewTicker(s.cfg.PollEvery)
	defer tick.Stop()
	for {
		running := a.Outcome == "running"
		if err := drain(!running); err != nil {
			s.log.Warn("console stream", "task", t.ID, "attempt", a.Attempt, "error", err)
			send("end", "error reading the log")
			flusher.Flush()
			return
		}
		if !running {
			send("end", a.Outcome)
			flusher.Flush()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var err error
		if a, err = s.attempt(ctx, t.ID, a.Attempt); err != nil {
			if ctx.Err() == nil {
				s.log.Warn("console stream", "task", t.ID, "error", err)
			}
			return
		}
	}
}
