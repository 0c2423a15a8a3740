package kube

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/client-go/kubernetes"

	"github.com/moziplus/mozi/spawner/backend"
)

// Backend runs each attempt as a Kubernetes Job.
type Backend struct {
	cfg Config
	cs  kubernetes.Interface
}

var _ backend.Backend = (*Backend)(nil)

// Where things are in the pod.
const (
	workspaceDir = "/workspace"
	moziDir      = "/mozi"
	promptFile   = moziDir + "/prompt.md"
	stdinFile    = moziDir + "/stdin"
)

// Name implements backend.Backend.
func (b *Backend) Name() string { return "kubernetes" }

// Check implements backend.Backend: the command is looked up in the image
// when the pod starts, so only what the spec needs is checked here.
func (b *Backend) Check(a backend.Agent, _ []string) (backend.Agent, error) {
	if len(a.Argv) == 0 || a.Argv[0] == "" {
		return a, errors.New("kubernetes backend: the agent has no command")
	}
	if a.Image == "" {
		a.Image = b.cfg.Image
	}
	if a.Image == "" {
		return a, errors.New("kubernetes backend: the agent names no image and no default image is configured")
	}
	return a, nil
}

// place is a run's place: nothing exists yet, the pod makes it.
type place struct {
	run   backend.Run
	where backend.Where
}

func (p *place) Where() backend.Where { return p.where }

// Release implements backend.Place: the checkout lives and dies with the
// pod, and the Job's TTL removes that.
func (p *place) Release() {}

// Prepare implements backend.Backend. Nothing is made on the host: the
// checkout happens in the pod's init step, so a branch that is gone shows
// as a failed checkout when the run starts.
func (b *Backend) Prepare(ctx context.Context, r backend.Run) (backend.Place, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if r.Agent.Worktree && (r.Checkout.Mode == backend.NewBranch || r.Checkout.Mode == backend.ExistingBranch) && r.Checkout.Branch == "" {
		return nil, fmt.Errorf("prepare task %d: checkout mode %d needs a branch", r.TaskID, r.Checkout.Mode)
	}
	return &place{run: r, where: b.Describe(ctx, r)}, nil
}

// Describe implements backend.Backend. The default branch is not known
// before the pod clones: Base stays empty and the note says where to find
// it.
func (b *Backend) Describe(_ context.Context, r backend.Run) backend.Where {
	w := backend.Where{Dir: workspaceDir, PromptFile: promptFile}
	if !r.Agent.Worktree {
		w.Note = "The working directory is an empty directory of the pod, discarded when the run ends."
		return w
	}
	switch r.Checkout.Mode {
	case backend.NewBranch:
		w.Branch = r.Checkout.Branch
		w.Note = "The checkout is a fresh clone made in the pod: the branch is origin's if it existed, else new from the default branch (origin/HEAD). Push to keep your work: the pod is discarded when the run ends."
	case backend.ExistingBranch:
		w.Branch = r.Checkout.Branch
		w.Note = "The checkout is a fresh clone made in the pod, on origin's branch. Push to keep your work: the pod is discarded when the run ends."
	case backend.Detached:
		w.Ref = r.Checkout.Ref
		if w.Ref == "" {
			w.Ref = "origin/HEAD"
		}
		w.Note = "The checkout is a fresh clone made in the pod, detached at the ref; the default branch is origin/HEAD."
	}
	return w
}
