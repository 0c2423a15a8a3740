package gitea

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/moziplus/mozi/repository/task"
)

// IssueReader serves issue data (text, latest [Action Report], native
// dependencies, sub-issues) to prompts and the dispatcher. It reads mozi's
// cache (the issues table, kept fresh by webhooks) and asks Gitea only for
// what the cache lacks; an in-memory layer in front makes a warm read touch
// neither. Without a Gitea client it serves the cache alone.
type IssueReader struct {
	store  IssueCache
	client *Client
	ttl    time.Duration
	// depsTTL is how long Gitea's native dependencies are trusted: Gitea
	// sends no webhook when they change.
	depsTTL time.Duration
	now     func() time.Time

	mu    sync.Mutex
	mem   map[string]memEntry
	bytes int       // what mem holds, roughly
	swept time.Time // when expired entries were last dropped
}

type memEntry struct {
	at       time.Time
	issue    task.Issue
	notFound bool // Gitea said 404: asked again after the TTL
	report   *string
	blocked  *[]int
}

// size is roughly what an entry holds in memory.
func (e memEntry) size() int {
	n := 128 + len(e.issue.Title) + len(e.issue.Body) + 16*(len(e.issue.Labels)+len(e.issue.Assignees))
	if e.report != nil {
		n += len(*e.report)
	}
	if e.blocked != nil {
		n += 8 * len(*e.blocked)
	}
	return n
}

// Bounds of the in-memory layer: a few thousand issues, at most
// maxMemBytes in all; an entry bigger than maxMemEntryBytes (a huge issue
// body) is served from the database instead. Entries expire after the
// reader's TTL and are dropped then, read or not.
const (
	maxMemEntries    = 10000
	maxMemBytes      = 64 << 20
	maxMemEntryBytes = 1 << 20
)

// IssueCache is mozi's copy of issues, which the reader reads first and
// keeps (repository.Store).
type IssueCache interface {
	Issue(ctx context.Context, repo string, number int) (task.Issue, error)
	SaveIssue(ctx context.Context, i task.Issue) error
	CachedReport(ctx context.Context, repo string, number int) (report string, synced bool, err error)
	CacheReport(ctx context.Context, repo string, number int, report string, at time.Time) error
	CachedBlockedBy(ctx context.Context, repo string, number int) ([]int, time.Time, error)
	CacheBlockedBy(ctx context.Context, repo string, number int, blocked []int) error
	SubIssues(ctx context.Context, repo string, parent int) ([]task.Issue, error)
	RefreshIssueCopy(ctx context.Context, id int64, issue task.Issue) error
}

// NewIssueReader builds a reader; client may be nil (cache only).
func NewIssueReader(store IssueCache, client *Client) *IssueReader {
	return &IssueReader{store: store, client: client, ttl: 30 * time.Second, depsTTL: 10 * time.Minute,
		now: time.Now, mem: map[string]memEntry{}}
}

func memKey(repo string, number int) string { return fmt.Sprintf("%s#%d", repo, number) }

func (r *IssueReader) cached(key string) (memEntry, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.mem[key]
	if !ok || r.now().Sub(e.at) > r.ttl {
		return memEntry{}, false
	}
	return e, true
}

func (r *IssueReader) remember(key string, update func(*memEntry)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if now.Sub(r.swept) > r.ttl {
		r.evict(func(e memEntry) bool { return now.Sub(e.at) > r.ttl })
		r.swept = now
	}
	e, ok := r.mem[key]
	if ok {
		r.bytes -= e.size()
		delete(r.mem, key)
	}
	if !ok || now.Sub(e.at) > r.ttl {
		e = memEntry{at: now}
	}
	update(&e)
	size := e.size()
	if size > maxMemEntryBytes {
		return
	}
	if r.bytes+size > maxMemBytes || len(r.mem) >= maxMemEntries {
		r.evictOldest(size)
	}
	r.mem[key] = e
	r.bytes += size
}

// evict drops the entries drop selects.
func (r *IssueReader) evict(drop func(memEntry) bool) {
	for k, e := range r.mem {
		if drop(e) {
			r.bytes -= e.size()
			delete(r.mem, k)
		}
	}
}

// evictOldest makes room for an entry of size bytes: the oldest entries
// go until a quarter of the budget (and of the entries) is free, so that
// eviction is rare.
func (r *IssueReader) evictOldest(size int) {
	type aged struct {
		key string
		at  time.Time
	}
	all := make([]aged, 0, len(r.mem))
	for k, e := range r.mem {
		all = append(all, aged{k, e.at})
	}
	slices.SortFunc(all, func(a, b aged) int { return a.at.Compare(b.at) })
	for _, a := range all {
		if r.bytes+size <= maxMemBytes*3/4 && len(r.mem) < maxMemEntries*3/4 {
			return
		}
		r.bytes -= r.mem[a.key].size()
		delete(r.mem, a.key)
	}
}

// ErrUnavailable means the data is not cached and Gitea could not be asked.
var ErrUnavailable = errors.New("not cached and no Gitea to ask")

// Issue returns an issue: cache first, Gitea on a miss (and cached then).
func (r *IssueReader) Issue(ctx context.Context, repo string, number int) (task.Issue, error) {
	key := memKey(repo, number)
	if e, ok := r.cached(key); ok && e.issue.Number != 0 {
		return e.issue, nil
	} else if ok && e.notFound {
		return task.Issue{}, fmt.Errorf("issue %s#%d: %w in Gitea", repo, number, task.ErrNotFound)
	}
	issue, err := r.store.Issue(ctx, repo, number)
	if err != nil && !errors.Is(err, task.ErrNotFound) {
		return task.Issue{}, err
	}
	if err != nil {
		if r.client == nil {
			return task.Issue{}, fmt.Errorf("issue %s#%d: %w", repo, number, ErrUnavailable)
		}
		if issue, err = r.client.FetchIssue(ctx, repo, number); err != nil {
			if errors.Is(err, task.ErrNotFound) {
				r.remember(key, func(e *memEntry) { e.notFound = true })
			}
			return task.Issue{}, err
		}
		if err := r.store.SaveIssue(ctx, issue); err != nil {
			return task.Issue{}, err
		}
	}
	r.remember(key, func(e *memEntry) { e.issue = issue })
	return issue, nil
}

// LatestReport returns the latest [Action Report] comment on an issue ("" if
// none). The webhook mapper keeps it; an issue mozi did not watch from the
// start has its comments read from Gitea once.
func (r *IssueReader) LatestReport(ctx context.Context, repo string, number int) (string, error) {
	key := memKey(repo, number)
	if e, ok := r.cached(key); ok && e.report != nil {
		return *e.report, nil
	}
	report, synced, err := r.store.CachedReport(ctx, repo, number)
	if err != nil {
		return "", err
	}
	if !synced && r.client != nil {
		comments, err := r.client.FetchComments(ctx, repo, number, 500)
		if err != nil {
			return "", err
		}
		var at time.Time
		for _, c := range comments {
			if isActionReport(c.Body) {
				report, at = c.Body, c.CreatedAt
			}
		}
		if err := r.store.CacheReport(ctx, repo, number, report, at); err != nil {
			return "", err
		}
	}
	r.remember(key, func(e *memEntry) { e.report = &report })
	return report, nil
}

func isActionReport(body string) bool {
	return strings.Contains(strings.ToLower(body), "[action report]")
}

// BlockedBy lists the issues that Gitea's native dependencies say block this
// one, refreshed from Gitea when older than a few minutes.
func (r *IssueReader) BlockedBy(ctx context.Context, repo string, number int) ([]int, error) {
	key := memKey(repo, number)
	if e, ok := r.cached(key); ok && e.blocked != nil {
		return *e.blocked, nil
	}
	out, synced, err := r.store.CachedBlockedBy(ctx, repo, number)
	if err != nil {
		return nil, err
	}
	stale := synced.IsZero() || r.now().Sub(synced) > r.depsTTL
	if stale && r.client != nil {
		fresh, err := r.client.FetchBlockedBy(ctx, repo, number)
		switch {
		case err == nil:
			out = fresh
			if err := r.store.CacheBlockedBy(ctx, repo, number, fresh); err != nil {
				return nil, err
			}
		case synced.IsZero():
			return nil, err
		}
		// A stale copy beats no answer while Gitea is down.
	}
	r.remember(key, func(e *memEntry) { e.blocked = &out })
	return out, nil
}

// SubIssues lists the cached sub-issues of a parent issue, by number.
func (r *IssueReader) SubIssues(ctx context.Context, repo string, parent int) ([]task.Issue, error) {
	return r.store.SubIssues(ctx, repo, parent)
}

// MergeTask merges a task in hand (the claim's row) with its issue (SPEC
// §7, the Repository's GetTask): title, body and labels come from the
// task's own copy (issue_body_cache), refreshed from mozi's issue cache
// only when that cache — kept by webhooks and the reconcile pass — has a
// newer updated_at than the copy; Gitea is asked only for an issue mozi
// has never seen. When nothing newer can be had (Gitea down), the task's
// copy is served.
func (r *IssueReader) MergeTask(ctx context.Context, t task.Task) (task.MergedTask, error) {
	m := task.MergedTask{Task: t, Issue: task.Issue{Repo: t.Repo, Number: t.IssueNumber, Title: t.Meta.Title,
		Body: t.IssueBodyCache, Labels: t.Meta.Labels, Author: t.Meta.IssueAuthor, UpdatedAt: t.IssueUpdatedAt,
		State: "open"}}
	if t.IssueNumber == 0 {
		return m, nil
	}
	issue, err := r.Issue(ctx, t.Repo, t.IssueNumber)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return task.MergedTask{}, err
		}
		return m, nil
	}
	if !issue.UpdatedAt.After(t.IssueUpdatedAt) {
		// The copy is current: serve it, with the state mozi knows.
		m.Issue.State, m.Issue.Assignees = issue.State, issue.Assignees
		return m, nil
	}
	if err := r.store.RefreshIssueCopy(ctx, t.ID, issue); err != nil {
		return task.MergedTask{}, err
	}
	m.Task.IssueBodyCache, m.Task.IssueUpdatedAt = issue.Body, issue.UpdatedAt
	m.Task.Meta.Title, m.Task.Meta.Labels = issue.Title, issue.Labels
	m.Issue = issue
	return m, nil
}
