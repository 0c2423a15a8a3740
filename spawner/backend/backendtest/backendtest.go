// Package backendtest is a scripted backend for tests of the run
// lifecycle: no git, no sandbox, no process. Each start plays a Script:
// output written, then an exit, or a run that lasts until it is stopped.
package backendtest

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/moziplus/mozi/spawner/backend"
)

// Script is what one started run does.
type Script struct {
	// Output is written to the run's output, in the chunks given.
	Output []string
	// Exit is how it ends by itself.
	Exit backend.Exit
	// UntilStopped: after its output, the run lasts until Stop.
	UntilStopped bool
	// IgnoreTerm: a stop needs its grace to run out (SIGKILL).
	IgnoreTerm bool
}

// Backend is the scripted backend. Its zero value runs every step as an
// immediate exit 0; set its fields before use.
type Backend struct {
	// Dir is the place's working directory ("/work" when empty).
	Dir string
	// CheckErr, PrepareErr and StartErr fail those steps.
	CheckErr   error
	PrepareErr error
	StartErr   error
	// Play says what a step does (nil: exit 0 at once).
	Play func(backend.Step) Script

	mu       sync.Mutex
	runs     []backend.Run
	steps    []backend.Step
	released int
	stops    []time.Duration
}

var _ backend.Backend = (*Backend)(nil)

// Name is "fake".
func (b *Backend) Name() string { return "fake" }

// Check passes the agent through unless CheckErr is set.
func (b *Backend) Check(a backend.Agent, _ []string) (backend.Agent, error) {
	return a, b.CheckErr
}

func (b *Backend) where(r backend.Run) backend.Where {
	dir := b.Dir
	if dir == "" {
		dir = "/work"
	}
	w := backend.Where{Dir: dir, PromptFile: filepath.Join(dir, ".mozi-prompt.md"), Base: "main"}
	switch r.Checkout.Mode {
	case backend.NewBranch, backend.ExistingBranch:
		w.Branch = r.Checkout.Branch
	default:
		w.Ref = r.Checkout.Ref
	}
	return w
}

// Describe is where r would run.
func (b *Backend) Describe(_ context.Context, r backend.Run) backend.Where { return b.where(r) }

// Prepare records r and returns its place.
func (b *Backend) Prepare(_ context.Context, r backend.Run) (backend.Place, error) {
	if b.PrepareErr != nil {
		return nil, b.PrepareErr
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.runs = append(b.runs, r)
	return &place{b: b, where: b.where(r)}, nil
}

// Start plays the step's script.
func (b *Backend) Start(_ context.Context, _ backend.Place, s backend.Step, out io.Writer) (backend.Process, error) {
	if b.StartErr != nil {
		return nil, b.StartErr
	}
	b.mu.Lock()
	b.steps = append(b.steps, s)
	b.mu.Unlock()
	var sc Script
	if b.Play != nil {
		sc = b.Play(s)
	}
	p := &process{b: b, script: sc, done: make(chan struct{}), term: make(chan struct{}), kill: make(chan struct{})}
	go p.run(out)
	return p, nil
}

// Sweep finds nothing.
func (b *Backend) Sweep(context.Context, backend.Ledger) (backend.SweepResult, error) {
	return backend.SweepResult{}, nil
}

// Runs are the runs prepared, in order.
func (b *Backend) Runs() []backend.Run {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]backend.Run(nil), b.runs...)
}

// Steps are the steps started, in order.
func (b *Backend) Steps() []backend.Step {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]backend.Step(nil), b.steps...)
}

// Released counts places released.
func (b *Backend) Released() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.released
}

// Stops are the graces of the stops asked, in order.
func (b *Backend) Stops() []time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]time.Duration(nil), b.stops...)
}

type place struct {
	b     *Backend
	where backend.Where
	once  sync.Once
}

func (p *place) Where() backend.Where { return p.where }

func (p *place) Release() {
	p.once.Do(func() {
		p.b.mu.Lock()
		p.b.released++
		p.b.mu.Unlock()
	})
}

type process struct {
	b          *Backend
	script     Script
	done       chan struct{}
	term, kill chan struct{}
	stopOnce   sync.Once
	exit       backend.Exit
}

func (p *process) run(out io.Writer) {
	defer close(p.done)
	for _, chunk := range p.script.Output {
		_, _ = io.Copy(out, strings.NewReader(chunk))
	}
	if !p.script.UntilStopped {
		p.exit = p.script.Exit
		return
	}
	select {
	case <-p.term:
		if !p.script.IgnoreTerm {
			p.exit = backend.Exit{Code: 143, Why: "killed by signal terminated"}
			return
		}
		<-p.kill
	case <-p.kill:
	}
	p.exit = backend.Exit{Code: -1, Why: "killed by signal killed"}
}

func (p *process) Done() <-chan struct{} { return p.done }
func (p *process) Exit() backend.Exit    { return p.exit }

func (p *process) Stop(grace time.Duration) {
	p.stopOnce.Do(func() {
		p.b.mu.Lock()
		p.b.stops = append(p.b.stops, grace)
		p.b.mu.Unlock()
		close(p.term)
		go func() {
			select {
			case <-p.done:
			case <-time.After(grace):
				close(p.kill)
			}
		}()
	})
}
