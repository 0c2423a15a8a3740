package workspace_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moziplus/mozi/spawner/backend/local/workspace"
	"github.com/moziplus/mozi/spawner/backend/local/workspace/workspacetest"
)

// benchFiles is the size of the benchmarks' repository (issue 10: "a
// repository of 10,000 files").
const benchFiles = 10_000

var (
	bigOnce   sync.Once
	bigRemote string
)

// bigRepo is a bare repository of benchFiles files (in 100 directories,
// ~1 KiB each), made once per test binary with git fast-import.
func bigRepo(b *testing.B) string {
	bigOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mozi-bench-repo-")
		if err != nil {
			panic(err)
		}
		bigRemote = filepath.Join(dir, "big.git")
		workspacetest.Git(b, dir, "init", "-q", "--bare", "-b", "main", bigRemote)
		var stream strings.Builder
		stream.WriteString("commit refs/heads/main\ncommitter bench <b@example.test> 1700000000 +0000\ndata 7\ninitial\n")
		line := strings.Repeat("x", 63) + "\n"
		for i := range benchFiles {
			content := fmt.Sprintf("file %d\n%s", i, strings.Repeat(line, 16))
			fmt.Fprintf(&stream, "M 100644 inline dir%02d/file%05d.txt\ndata %d\n%s\n", i%100, i, len(content), content)
		}
		cmd := exec.Command("git", "-C", bigRemote, "fast-import", "--quiet")
		cmd.Stdin = strings.NewReader(stream.String())
		if out, err := cmd.CombinedOutput(); err != nil {
			panic(fmt.Sprintf("fast-import: %v: %s", err, out))
		}
	})
	return bigRemote
}

func newBenchManager(b *testing.B, root string) *workspace.Manager {
	remote := bigRepo(b)
	mgr, err := workspace.New(workspace.Config{Root: root,
		RemoteURL: func(string) (string, error) { return remote, nil }})
	if err != nil {
		b.Fatal(err)
	}
	return mgr
}

func git(b *testing.B, args ...string) {
	if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
		b.Fatalf("git %v: %v: %s", args, err, out)
	}
}

// BenchmarkWorktreeReady compares, side by side, what mozi does to give a
// run its worktree with what git alone does, alternating the two in each
// iteration so that both see the same machine load, and reports the
// medians and their ratio:
//
//   - warm: Prepare on a repository already mirrored (an incremental
//     fetch, the branch bookkeeping, the worktree on a new branch) against
//     plain `git worktree add -b` of a mirror of the same repository;
//   - cold: Prepare on a repository never seen (mirror created and
//     fetched, then the worktree) against `git clone --mirror` then
//     `git worktree add`.
//
// Targets (issue 10): warm ≤ 1.5×, cold ≤ 1.2×.
func BenchmarkWorktreeReady(b *testing.B) {
	remote := bigRepo(b)
	ctx := context.Background()

	b.Run("warm", func(b *testing.B) {
		mgr := newBenchManager(b, b.TempDir())
		if _, err := mgr.Prepare(ctx, workspace.Request{TaskID: 1, Repo: "acme/big", Mode: workspace.Detached}); err != nil {
			b.Fatal(err)
		}
		root := b.TempDir()
		mirror := filepath.Join(root, "mirror.git")
		git(b, "clone", "-q", "--mirror", remote, mirror)
		mozi := func(i int) {
			id := int64(i + 2)
			if _, err := mgr.Prepare(ctx, workspace.Request{TaskID: id, Repo: "acme/big", Mode: workspace.NewBranch,
				Branch: fmt.Sprintf("fix/%d-bench", id)}); err != nil {
				b.Fatal(err)
			}
			mgr.Done(id)
		}
		plain := func(i int) {
			git(b, "--git-dir="+mirror, "worktree", "add", "-q", "-b", fmt.Sprintf("fix/%d-bench", i),
				filepath.Join(root, fmt.Sprint(i)), "main")
		}
		sideBySide(b, mozi, plain)
	})
	b.Run("cold", func(b *testing.B) {
		mozi := func(int) {
			mgr := newBenchManager(b, b.TempDir())
			if _, err := mgr.Prepare(ctx, workspace.Request{TaskID: 1, Repo: "acme/big", Mode: workspace.NewBranch,
				Branch: "fix/1-bench"}); err != nil {
				b.Fatal(err)
			}
		}
		plain := func(int) {
			root := b.TempDir()
			mirror := filepath.Join(root, "mirror.git")
			git(b, "clone", "-q", "--mirror", remote, mirror)
			git(b, "--git-dir="+mirror, "worktree", "add", "-q", "-b", "fix/1-bench", filepath.Join(root, "tree"), "main")
		}
		sideBySide(b, mozi, plain)
	})
}

// sideBySide runs mozi and plain b.N times each, alternating which goes
// first, and reports both medians and their ratio.
func sideBySide(b *testing.B, mozi, plain func(i int)) {
	var moziTimes, plainTimes []time.Duration
	timed := func(f func(int), i int, into *[]time.Duration) {
		start := time.Now()
		f(i)
		*into = append(*into, time.Since(start))
	}
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			timed(mozi, i, &moziTimes)
			timed(plain, i, &plainTimes)
		} else {
			timed(plain, i, &plainTimes)
			timed(mozi, i, &moziTimes)
		}
	}
	m, p := median(moziTimes), median(plainTimes)
	b.ReportMetric(m.Seconds()*1000, "mozi-p50-ms")
	b.ReportMetric(p.Seconds()*1000, "git-p50-ms")
	b.ReportMetric(float64(m)/float64(p), "mozi/git")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkWorktreeDisk shows what one more concurrent worktree costs on
// disk: its checkout, while the objects stay shared in the mirror.
func BenchmarkWorktreeDisk(b *testing.B) {
	ctx := context.Background()
	mgr := newBenchManager(b, b.TempDir())
	for i := range b.N {
		id := int64(i + 1)
		if _, err := mgr.Prepare(ctx, workspace.Request{TaskID: id, Repo: "acme/big", Mode: workspace.Detached}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	mirror := du(mgr.MirrorPath("acme/big"))
	var trees, content int64
	for i := range b.N {
		dir := mgr.TreePath("acme/big", int64(i+1))
		trees += du(dir)
		content += fileBytes(dir)
	}
	// The same files checked out by a plain clone, objects included: what
	// a clone per task would cost each time.
	clone := filepath.Join(b.TempDir(), "clone")
	git(b, "clone", "-q", bigRepo(b), clone)
	b.ReportMetric(float64(mirror)/(1<<20), "shared-mirror-MiB")
	b.ReportMetric(float64(trees)/float64(b.N)/(1<<20), "disk-per-worktree-MiB")
	b.ReportMetric(float64(du(clone)-du(filepath.Join(clone, ".git")))/(1<<20), "plain-checkout-MiB")
	b.ReportMetric(float64(du(clone))/(1<<20), "plain-clone-MiB")
	b.ReportMetric(float64(content)/float64(b.N)/(1<<20), "file-content-per-worktree-MiB")
}

// du is the disk a directory takes (allocated blocks).
func du(dir string) int64 {
	out, err := exec.Command("du", "-sk", dir).Output()
	if err != nil {
		return 0
	}
	var kib int64
	fmt.Sscan(string(out), &kib)
	return kib << 10
}

// fileBytes is the size of the files of a worktree, .git left out.
func fileBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Name() == ".git" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if info, err := d.Info(); err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
		return nil
	})
	return n
}

// BenchmarkFourCheckoutsOfOneRepository prepares at once the worktrees of
// four tasks of one repository (mirrored already, each task on its new
// branch) and reports when the first and when the last is ready: when the
// first and the last agent can start. Checkouts per repository capped at
// 1, at 2, and not capped (mozi before the cap) run in turns in each
// iteration, so that all three see the same machine load.
func BenchmarkFourCheckoutsOfOneRepository(b *testing.B) {
	remote := bigRepo(b)
	ctx := context.Background()
	caps := []struct {
		name string
		cap  int
	}{{"cap1", 1}, {"cap2", 2}, {"nocap", -1}}
	managers := make([]*workspace.Manager, len(caps))
	for i, c := range caps {
		mgr, err := workspace.New(workspace.Config{Root: b.TempDir(), CheckoutsPerRepo: c.cap,
			RemoteURL: func(string) (string, error) { return remote, nil }, KeepFinished: time.Nanosecond})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := mgr.Prepare(ctx, workspace.Request{TaskID: 1, Repo: "acme/big", Mode: workspace.Detached}); err != nil {
			b.Fatal(err)
		}
		mgr.Done(1)
		managers[i] = mgr
	}
	first, last := make([][]time.Duration, len(caps)), make([][]time.Duration, len(caps))
	id := int64(1)
	b.ResetTimer()
	for i := range b.N {
		for j := range caps {
			k := (i + j) % len(caps)
			mgr := managers[k]
			ready := make([]time.Duration, 4)
			var wg sync.WaitGroup
			start := time.Now()
			for t := range ready {
				id++
				taskID := id
				wg.Go(func() {
					if _, err := mgr.Prepare(ctx, workspace.Request{TaskID: taskID, Repo: "acme/big",
						Mode: workspace.NewBranch, Branch: fmt.Sprintf("fix/%d-bench", taskID)}); err != nil {
						b.Error(err)
					}
					ready[t] = time.Since(start)
					mgr.Done(taskID)
				})
			}
			wg.Wait()
			slices.Sort(ready)
			first[k], last[k] = append(first[k], ready[0]), append(last[k], ready[3])
			b.StopTimer()
			if _, err := mgr.Sweep(ctx, allFinished{}); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
	for k, c := range caps {
		b.ReportMetric(median(first[k]).Seconds()*1000, c.name+"-first-ms")
		b.ReportMetric(median(last[k]).Seconds()*1000, c.name+"-last-ms")
	}
}

// allFinished says every task finished long ago: the sweep removes every
// idle worktree.
type allFinished struct{}

func (allFinished) TaskEnds(_ context.Context, ids []int64) (map[int64]workspace.TaskEnd, error) {
	out := make(map[int64]workspace.TaskEnd, len(ids))
	for _, id := range ids {
		out[id] = workspace.TaskEnd{Terminal: true}
	}
	return out, nil
}
