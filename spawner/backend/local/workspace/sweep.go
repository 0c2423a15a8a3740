package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// TaskEnd is what the sweep needs to know of a worktree's task.
type TaskEnd struct {
	Terminal   bool
	FinishedAt time.Time
}

// Tasks tells the sweep which tasks are finished (repository.Store).
type Tasks interface {
	// TaskEnds returns the tasks of ids that still exist.
	TaskEnds(ctx context.Context, ids []int64) (map[int64]TaskEnd, error)
}

// tree is a worktree found on disk.
type tree struct {
	repo string
	id   int64
	dir  string
	end  TaskEnd
	gone bool // its task no longer exists
	size int64
}

// SweepResult counts what a sweep did.
type SweepResult struct {
	Removed int
	// Bytes are the bytes the worktrees use after the sweep.
	Bytes int64
	// OverBudget is true when the worktrees still use more than the disk
	// budget (what is left belongs to live tasks).
	OverBudget bool
}

// Sweep removes the worktrees of tasks finished longer than KeepFinished
// ago or gone, then, while the worktrees use more than DiskBudget, those
// of finished tasks, oldest finished first. Worktrees of running tasks are
// never touched. A worktree that cannot be removed is reported in the
// error and the sweep goes on with the others.
func (m *Manager) Sweep(ctx context.Context, tasks Tasks) (SweepResult, error) {
	var res SweepResult
	trees, err := m.trees()
	if err != nil || len(trees) == 0 {
		return res, err
	}
	ids := make([]int64, len(trees))
	for i, t := range trees {
		ids[i] = t.id
	}
	ends, err := tasks.TaskEnds(ctx, ids)
	if err != nil {
		return res, fmt.Errorf("sweep worktrees: %w", err)
	}
	now := m.cfg.Now()
	// One worktree that cannot go (a directory the agent made undeletable,
	// a broken mirror) must not keep the others, and the disk budget, from
	// being swept: its error is collected and the sweep goes on.
	var errs []error
	var kept []*tree
	for _, t := range trees {
		end, ok := ends[t.id]
		t.end, t.gone = end, !ok
		expired := t.gone || end.Terminal && now.Sub(end.FinishedAt) >= m.cfg.KeepFinished
		if expired && !m.isActive(t.id) {
			removed, err := m.remove(ctx, t, "finished")
			if err != nil {
				errs = append(errs, err)
			}
			if removed {
				res.Removed++
				continue
			}
		}
		kept = append(kept, t)
	}
	for _, t := range kept {
		t.size = diskUsage(t.dir)
		res.Bytes += t.size
	}
	if m.cfg.DiskBudget <= 0 || res.Bytes <= m.cfg.DiskBudget {
		return res, errors.Join(errs...)
	}
	finished := slices.DeleteFunc(slices.Clone(kept), func(t *tree) bool { return !t.end.Terminal || m.isActive(t.id) })
	slices.SortFunc(finished, func(a, b *tree) int { return a.end.FinishedAt.Compare(b.end.FinishedAt) })
	for _, t := range finished {
		if res.Bytes <= m.cfg.DiskBudget {
			break
		}
		removed, err := m.remove(ctx, t, "disk budget")
		if err != nil {
			errs = append(errs, err)
		}
		if removed {
			res.Removed++
			res.Bytes -= t.size
		}
	}
	res.OverBudget = res.Bytes > m.cfg.DiskBudget
	return res, errors.Join(errs...)
}

// trees lists the worktree directories: trees/<owner>/<name>/<id>.
func (m *Manager) trees() ([]*tree, error) {
	root := filepath.Join(m.cfg.Root, "trees")
	owners, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list worktrees: %w", err)
	}
	var out []*tree
	for _, o := range owners {
		names, _ := os.ReadDir(filepath.Join(root, o.Name()))
		for _, n := range names {
			entries, _ := os.ReadDir(filepath.Join(root, o.Name(), n.Name()))
			for _, e := range entries {
				id, err := strconv.ParseInt(e.Name(), 10, 64)
				if err != nil || !e.IsDir() {
					continue
				}
				out = append(out, &tree{repo: o.Name() + "/" + n.Name(), id: id,
					dir: filepath.Join(root, o.Name(), n.Name(), e.Name())})
			}
		}
	}
	return out, nil
}

// remove removes an idle task's worktree, and reports whether it did. That
// the task is idle is checked again under the repository's lock: an
// operator may have requeued it since the sweep looked, and Prepare,
// which marks it running before it takes that lock, would otherwise have
// the worktree removed under the run it prepared.
func (m *Manager) remove(ctx context.Context, t *tree, why string) (bool, error) {
	rs := m.repo(t.repo)
	rs.mu.Lock()
	if m.isActive(t.id) {
		rs.mu.Unlock()
		return false, nil
	}
	err := m.removeTreeLocked(ctx, m.MirrorPath(t.repo), t.dir)
	rs.mu.Unlock()
	if err != nil {
		return false, fmt.Errorf("task %d of %s: %w", t.id, t.repo, err)
	}
	m.cfg.Logger.Info("worktree removed", "task_id", t.id, "repo", t.repo, "reason", why)
	return true, nil
}

// removeTree deletes a worktree and its registration in the mirror.
func (m *Manager) removeTree(ctx context.Context, repo, dir string) error {
	rs := m.repo(repo)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return m.removeTreeLocked(ctx, m.MirrorPath(repo), dir)
}

func (m *Manager) removeTreeLocked(ctx context.Context, mirror, dir string) error {
	if err := removeAll(dir); err != nil {
		return fmt.Errorf("remove worktree %s: %w", dir, err)
	}
	if _, err := os.Stat(mirror); err != nil {
		return nil
	}
	// prune only looks at which registered worktrees still exist.
	if _, err := m.git.run(ctx, m.inMirror(mirror, "worktree", "prune")); err != nil {
		return fmt.Errorf("forget worktree %s: %w", dir, err)
	}
	return nil
}

// removeAll removes dir even where an agent left directories without
// write permission (a module cache, a build tool's output).
func removeAll(dir string) error {
	err := os.RemoveAll(dir)
	if err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// diskUsage is the disk space a directory tree takes (allocated blocks,
// hard links counted once).
func diskUsage(dir string) int64 {
	var total int64
	seen := map[uint64]bool{}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			if st.Nlink > 1 {
				if seen[st.Ino] {
					return nil
				}
				seen[st.Ino] = true
			}
			total += st.Blocks * 512
			return nil
		}
		total += info.Size()
		return nil
	})
	return total
}
