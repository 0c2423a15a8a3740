package container

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/moziplus/mozi/spawner/backend"
	"github.com/moziplus/mozi/spawner/backend/container/engine"
)

// Sweep sweeps the places (the Places') and removes the containers of
// this scope that no live run owns: their task is over, or the task's
// running attempt or lease owner is not the one on their labels (a dead
// replica's, or an earlier life's of this one: the owner id is new each
// life). A container whose run is live — this replica's or another
// live one's — stays.
func (b *Backend) Sweep(ctx context.Context, l backend.Ledger) (backend.SweepResult, error) {
	res, placesErr := b.cfg.Places.Sweep(ctx, l)
	if placesErr != nil {
		placesErr = fmt.Errorf("sweep places: %w", placesErr)
	}
	ended, err := b.sweepContainers(ctx, l)
	res.Ended += ended
	return res, errors.Join(placesErr, err)
}

// sweepContainers removes the leftover containers and counts them.
func (b *Backend) sweepContainers(ctx context.Context, l backend.Ledger) (int, error) {
	list, err := b.engine.ListContainers(ctx, backend.LabelScope+"="+b.cfg.Scope)
	if err != nil {
		return 0, fmt.Errorf("sweep containers: %w", unavailable(err))
	}
	type run struct {
		id      string
		task    int64
		attempt int
		owner   string
	}
	var runs []run
	var ids []int64
	seen := map[int64]bool{}
	for _, c := range list {
		task, err1 := strconv.ParseInt(c.Labels[backend.LabelTask], 10, 64)
		attempt, err2 := strconv.Atoi(c.Labels[backend.LabelAttempt])
		if err1 != nil || err2 != nil {
			// Not one mozi made, though it carries the scope: not
			// this sweep's to judge.
			b.log.Warn("a container of this scope without a task or attempt label stays", "container", short(c.ID))
			continue
		}
		runs = append(runs, run{id: c.ID, task: task, attempt: attempt, owner: c.Labels[backend.LabelOwner]})
		if !seen[task] {
			seen[task] = true
			ids = append(ids, task)
		}
	}
	if len(runs) == 0 {
		return 0, nil
	}
	ends, err := l.TaskEnds(ctx, ids)
	if err != nil {
		return 0, fmt.Errorf("sweep containers: read the tasks' state: %w", err)
	}
	ended := 0
	var errs []error
	for _, r := range runs {
		// A task the ledger does not know is gone: its run is over.
		end, known := ends[r.task]
		// A run whose task ended meanwhile keeps its lease until its
		// outcome is recorded: while it does, it is live.
		if known && end.LeaseOwner != "" && end.RunningAttempt == r.attempt && end.LeaseOwner == r.owner || b.isLive(r.id) {
			continue
		}
		// The agent of a dead replica gets no grace: like a local
		// leftover run it is killed outright (force removal).
		if err := b.engine.RemoveContainer(ctx, r.id); err != nil && !engine.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("sweep container of task %d attempt %d: %w", r.task, r.attempt, unavailable(err)))
			continue
		}
		ended++
		b.log.Info("removed a leftover run's container", "task_id", r.task, "attempt", r.attempt, "owner", r.owner,
			"container", short(r.id))
	}
	return ended, errors.Join(errs...)
}
