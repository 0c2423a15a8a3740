package main

import (
	"context"
	"fmt"

	"github.com/moziplus/mozi/cmd/mozi/internal/config"
	"github.com/moziplus/mozi/repository"
)

// taskResume is a person's go-ahead for a task held at a usage limit past
// the daily cap of unattended resumes: it runs now, and its agent's
// credential resumes (docs/loop/usage-limits.md).
func taskResume(ctx context.Context, e *env, _ *config.Config, store *repository.Store, a taskArgs) error {
	ok, err := store.ResumeHeld(ctx, a.id)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("task %d is not held for a usage limit", a.id)
	}
	fmt.Fprintf(e.stdout, "task %d resumes now; its agent's credential is no longer paused\n", a.id)
	return nil
}
