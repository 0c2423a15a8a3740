package container

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moziplus/mozi/spawner/backend"
	"github.com/moziplus/mozi/spawner/backend/container/engine"
)

// cleanupTimeout bounds the engine calls made after a run (inspect,
// remove) and a stop beyond its grace.
const cleanupTimeout = time.Minute

// Start writes the prompt into the place, creates the run's container,
// attaches to it and starts it. Its output goes to out until it ends;
// then its status is read and the container removed.
func (b *Backend) Start(ctx context.Context, p backend.Place, s backend.Step, out io.Writer) (backend.Process, error) {
	binder, ok := p.(backend.Binder)
	if !ok {
		return nil, fmt.Errorf("task %d: the container backend needs a place it can bind in (%T is not a backend.Binder)", s.TaskID, p)
	}
	if len(s.Argv) == 0 {
		return nil, fmt.Errorf("task %d: no command", s.TaskID)
	}
	image := s.Agent.Image
	if image == "" {
		image = b.cfg.Image
	}
	if image == "" {
		return nil, fmt.Errorf("task %d: agent %s has no container image", s.TaskID, s.Agent.Login)
	}
	w := p.Where()
	if w.PromptFile != "" {
		if err := os.WriteFile(w.PromptFile, []byte(s.Prompt), 0o644); err != nil {
			return nil, fmt.Errorf("task %d: write the prompt: %w", s.TaskID, err)
		}
	}
	if _, err := b.engine.InspectImage(ctx, image); err != nil {
		if engine.IsNotFound(err) {
			return nil, fmt.Errorf("task %d: image %q is not on the container engine at %s (mozi does not pull: pull, load or build it there)",
				s.TaskID, image, b.cfg.Socket)
		}
		return nil, fmt.Errorf("task %d: %w", s.TaskID, unavailable(err))
	}
	id, err := b.engine.CreateContainer(ctx, containerName(s.TaskID, s.Attempt), b.spec(image, w, binder.Binds(), s))
	if err != nil {
		return nil, fmt.Errorf("task %d: %w", s.TaskID, unavailable(err))
	}
	b.setLive(id, true)
	pr, err := b.launch(ctx, id, s, out)
	if err != nil {
		b.setLive(id, false)
		b.remove(id)
		return nil, fmt.Errorf("task %d: %w", s.TaskID, unavailable(err))
	}
	return pr, nil
}

// launch attaches to the created container and starts it.
func (b *Backend) launch(ctx context.Context, id string, s backend.Step, out io.Writer) (*process, error) {
	stream, err := b.engine.Attach(ctx, id, s.Stdin != nil)
	if err != nil {
		return nil, err
	}
	if err := b.engine.StartContainer(ctx, id); err != nil {
		stream.Close()
		return nil, err
	}
	pr := &process{b: b, id: id, task: s.TaskID, out: out, done: make(chan struct{})}
	if s.Stdin != nil {
		go func() {
			// A process that never reads its stdin leaves this write
			// blocked until its end closes the stream.
			if _, err := stream.Write(s.Stdin); err == nil {
				_ = stream.CloseStdin()
			}
		}()
	}
	go pr.follow(stream, s.Attempt)
	return pr, nil
}

// process is a run's container.
type process struct {
	b    *Backend
	id   string
	task int64
	out  io.Writer
	done chan struct{}
	exit backend.Exit

	stopped atomic.Bool
	stopMu  sync.Mutex
}

func (p *process) Done() <-chan struct{} { return p.done }
func (p *process) Exit() backend.Exit    { return p.exit }

// Stop asks the engine to stop the container: its stop signal (SIGTERM)
// to the process, SIGKILL after grace. It returns at once.
func (p *process) Stop(grace time.Duration) {
	p.stopped.Store(true)
	go func() {
		// Two stops at once would only race for the same SIGKILL.
		p.stopMu.Lock()
		defer p.stopMu.Unlock()
		select {
		case <-p.done:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), grace+cleanupTimeout)
		defer cancel()
		if err := p.b.engine.StopContainer(ctx, p.id, grace); err != nil && !engine.IsNotFound(err) {
			p.b.log.Error("stop the run's container", "task_id", p.task, "container", short(p.id), "err", err)
		}
	}()
}

// follow copies the output until the container ends, reads how it
// ended, removes it, and only then says it is done.
func (p *process) follow(stream *engine.Stream, attempt int) {
	defer close(p.done)
	defer p.b.setLive(p.id, false)
	w := &keepReading{w: p.out}
	derr := engine.Demux(stream, w, w)
	stream.Close()
	if w.err != nil {
		p.b.log.Warn("the run's output could not be written", "task_id", p.task, "err", w.err)
	}

	// The stream ends with the container, or when the engine's
	// connection broke: then the engine is gone (the status read fails
	// at once), or only the stream was lost and the status is read until
	// the container ends (what it wrote meanwhile is lost).
	info, werr := p.b.ended(p.id)
	if werr != nil {
		why := "lost the container: " + werr.Error()
		if derr != nil {
			why += " (" + derr.Error() + ")"
		}
		p.exit = backend.Exit{Code: -1, Why: why}
		p.b.log.Error("lost the run's container (removed meanwhile, or the engine went away)", "task_id", p.task, "attempt", attempt,
			"container", short(p.id), "err", werr)
		return
	}
	code, oom := info.State.ExitCode, info.State.OOMKilled
	p.exit = exitOf(code, p.stopped.Load(), oom)
	p.b.remove(p.id)
}

// ended reads the state of a container whose output stream ended until
// it says the container is no longer running. It is not the API's wait:
// podman 4.3 answers that 1.5 to 3.5 seconds after the exit, where an
// inspect has the status within milliseconds (the process has exited
// once its output closed; the engine may take a moment to notice).
func (b *Backend) ended(id string) (engine.ContainerInfo, error) {
	pause := 5 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		info, err := b.engine.InspectContainer(ctx, id)
		cancel()
		if err != nil {
			return info, err
		}
		switch info.State.Status {
		case "created", "configured", "initialized", "running", "paused", "restarting", "stopping":
		default:
			if !info.State.Running {
				return info, nil
			}
		}
		time.Sleep(pause)
		pause = min(2*pause, time.Second)
	}
}

// remove removes a container, logging what keeps it.
func (b *Backend) remove(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if err := b.engine.RemoveContainer(ctx, id); err != nil && !engine.IsNotFound(err) {
		b.log.Error("remove a run's container; the sweep removes it later", "container", short(id), "err", err)
	}
}

// keepReading passes output on until its writer fails, and discards it
// after that: the container must not block on a full pipe because mozi
// cannot keep its output.
type keepReading struct {
	w   io.Writer
	err error
}

func (k *keepReading) Write(b []byte) (int, error) {
	if k.err == nil {
		if _, err := k.w.Write(b); err != nil {
			k.err = err
		}
	}
	return len(b), nil
}

// exitOf is how a container with status code ended. A process killed
// by signal n makes the container's status 128+n; that is told apart
// from a process exiting so only where mozi knows: it stopped the
// container, or the engine says the memory limit killed it.
func exitOf(code int, stopped, oom bool) backend.Exit {
	switch {
	case code == 0:
		return backend.Exit{Code: 0}
	case code > 128 && code-128 < len(signalNames) && signalNames[code-128] != "" && (stopped || oom):
		why := "killed by signal " + signalNames[code-128]
		if oom {
			why += " (out of memory: the container's memory limit)"
		}
		return backend.Exit{Code: -1, Why: why}
	case oom:
		return backend.Exit{Code: code, Why: "exited with status " + strconv.Itoa(code) + " after running out of memory (the container's memory limit)"}
	case code > 128 && code-128 < len(signalNames) && signalNames[code-128] != "":
		// The engine's init, or a shell, reports a child killed by a
		// signal this way; a process may also exit so by itself.
		return backend.Exit{Code: code, Why: "exited with status " + strconv.Itoa(code) + " (as a process killed by signal " +
			signalNames[code-128] + " does)"}
	default:
		return backend.Exit{Code: code, Why: "exited with status " + strconv.Itoa(code)}
	}
}

// signalNames are Linux's signal names by number.
var signalNames = [...]string{1: "HUP", 2: "INT", 3: "QUIT", 4: "ILL", 5: "TRAP", 6: "ABRT", 7: "BUS", 8: "FPE", 9: "KILL",
	10: "USR1", 11: "SEGV", 12: "USR2", 13: "PIPE", 14: "ALRM", 15: "TERM", 16: "STKFLT", 17: "CHLD", 18: "CONT",
	19: "STOP", 20: "TSTP", 21: "TTIN", 22: "TTOU", 23: "URG", 24: "XCPU", 25: "XFSZ", 26: "VTALRM", 27: "PROF",
	28: "WINCH", 29: "IO", 30: "PWR", 31: "SYS"}

// short is a container id as logs show it.
func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
