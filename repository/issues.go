package repository

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Issue is what mozi knows of a Gitea issue (or the issue side of a pull
// request): collaboration data cached from webhooks and API reads.
type Issue struct {
	Repo        string
	Number      int
	IsPull      bool
	Title       string
	Body        string
	State       string // open or closed
	Author      string
	Labels      []string
	Assignees   []string
	ParentIssue int
	DependsOn   []int
	CreatedAt   time.Time // Gitea's created_at
	UpdatedAt   time.Time // Gitea's updated_at: orders competing payloads
	ClosedAt    time.Time
	ClosedBy    string
	// DiscussionDueAt is when an unassigned top-level issue gets its
	// discussion broadcast; DiscussedAt records that it happened.
	DiscussionDueAt time.Time
	DiscussedAt     time.Time
	SyncedAt        time.Time
}

// Closed reports whether the issue is closed.
func (i Issue) Closed() bool { return i.State == "closed" }

const issueColumns = `repo, number, is_pull, title, body, state, author, labels, assignees,
	parent_issue, depends_on, gitea_created_at, gitea_updated_at, closed_at, closed_by,
	discussion_due_at, discussed_at, synced_at`

func scanIssue(row pgx.Row) (Issue, error) {
	var (
		i                                        Issue
		parent                                   *int32
		depends                                  []int32
		created, updated, closed, due, discussed *time.Time
	)
	if err := row.Scan(&i.Repo, &i.Number, &i.IsPull, &i.Title, &i.Body, &i.State, &i.Author,
		&i.Labels, &i.Assignees, &parent, &depends, &created, &updated, &closed, &i.ClosedBy,
		&due, &discussed, &i.SyncedAt); err != nil {
		return Issue{}, err
	}
	i.ParentIssue = derefInt(parent)
	for _, d := range depends {
		i.DependsOn = append(i.DependsOn, int(d))
	}
	i.CreatedAt, i.UpdatedAt, i.ClosedAt = derefTime(created), derefTime(updated), derefTime(closed)
	i.DiscussionDueAt, i.DiscussedAt = derefTime(due), derefTime(discussed)
	return i, nil
}

func getIssue(ctx context.Context, q querier, repo string, number int) (Issue, bool, error) {
	i, err := scanIssue(q.QueryRow(ctx, `SELECT `+issueColumns+` FROM issues WHERE repo = $1 AND number = $2`, repo, number))
	if errors.Is(err, pgx.ErrNoRows) {
		return Issue{}, false, nil
	}
	if err != nil {
		return Issue{}, false, fmt.Errorf("read issue %s#%d: %w", repo, number, err)
	}
	return i, true, nil
}

func saveIssue(ctx context.Context, q querier, i Issue) error {
	labels, assignees := nonNil(i.Labels), nonNil(i.Assignees)
	depends := i.DependsOn
	if depends == nil {
		depends = []int{}
	}
	state := i.State
	if state == "" {
		state = "open"
	}
	_, err := q.Exec(ctx, `INSERT INTO issues (`+issueColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, now())
		ON CONFLICT (repo, number) DO UPDATE SET is_pull = EXCLUDED.is_pull, title = EXCLUDED.title,
			body = EXCLUDED.body, state = EXCLUDED.state, author = EXCLUDED.author,
			labels = EXCLUDED.labels, assignees = EXCLUDED.assignees,
			parent_issue = EXCLUDED.parent_issue, depends_on = EXCLUDED.depends_on,
			gitea_created_at = EXCLUDED.gitea_created_at, gitea_updated_at = EXCLUDED.gitea_updated_at,
			closed_at = EXCLUDED.closed_at, closed_by = EXCLUDED.closed_by,
			discussion_due_at = EXCLUDED.discussion_due_at, discussed_at = EXCLUDED.discussed_at,
			synced_at = now()`,
		i.Repo, i.Number, i.IsPull, i.Title, i.Body, state, i.Author, labels, assignees,
		nullInt(i.ParentIssue), depends, nullTime(i.CreatedAt), nullTime(i.UpdatedAt),
		nullTime(i.ClosedAt), i.ClosedBy, nullTime(i.DiscussionDueAt), nullTime(i.DiscussedAt))
	if err != nil {
		return fmt.Errorf("save issue %s#%d: %w", i.Repo, i.Number, err)
	}
	return nil
}

// Issue returns the cached issue.
func (t *Tx) Issue(ctx context.Context, repo string, number int) (Issue, bool, error) {
	return getIssue(ctx, t.tx, repo, number)
}

// SaveIssue writes the whole cached issue (insert or replace).
func (t *Tx) SaveIssue(ctx context.Context, i Issue) error { return saveIssue(ctx, t.tx, i) }

// Issue returns the cached issue.
func (s *Store) Issue(ctx context.Context, repo string, number int) (Issue, bool, error) {
	return getIssue(ctx, s.pool, repo, number)
}

// SaveIssue writes the whole cached issue (insert or replace).
func (s *Store) SaveIssue(ctx context.Context, i Issue) error { return saveIssue(ctx, s.pool, i) }

// PullRequest is what mozi knows of a Gitea pull request.
type PullRequest struct {
	Repo     string
	Number   int
	Author   string
	Title    string
	HeadRef  string
	HeadSHA  string
	BaseRef  string
	State    string // open or closed
	Merged   bool
	MergedBy string
	// LinkedIssues are the issues the PR closes, as owner/name#N.
	LinkedIssues []string
	// ChangesRequestedBy are reviewers whose latest verdict asked for changes.
	ChangesRequestedBy []string
	UpdatedAt          time.Time
	ClosedAt           time.Time
}

const prColumns = `repo, number, author, title, head_ref, head_sha, base_ref, state, merged,
	merged_by, linked_issues, changes_requested_by, gitea_updated_at, closed_at`

func scanPR(row pgx.Row) (PullRequest, error) {
	var (
		p               PullRequest
		updated, closed *time.Time
	)
	if err := row.Scan(&p.Repo, &p.Number, &p.Author, &p.Title, &p.HeadRef, &p.HeadSHA, &p.BaseRef,
		&p.State, &p.Merged, &p.MergedBy, &p.LinkedIssues, &p.ChangesRequestedBy, &updated, &closed); err != nil {
		return PullRequest{}, err
	}
	p.UpdatedAt, p.ClosedAt = derefTime(updated), derefTime(closed)
	return p, nil
}

func getPR(ctx context.Context, q querier, where string, args ...any) (PullRequest, bool, error) {
	p, err := scanPR(q.QueryRow(ctx, `SELECT `+prColumns+` FROM pull_requests WHERE `+where, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return PullRequest{}, false, nil
	}
	if err != nil {
		return PullRequest{}, false, fmt.Errorf("read pull request: %w", err)
	}
	return p, true, nil
}

// PullRequest returns the cached pull request.
func (t *Tx) PullRequest(ctx context.Context, repo string, number int) (PullRequest, bool, error) {
	return getPR(ctx, t.tx, `repo = $1 AND number = $2`, repo, number)
}

// OpenPullRequestByHead finds the open pull request whose head is sha.
func (t *Tx) OpenPullRequestByHead(ctx context.Context, repo, sha string) (PullRequest, bool, error) {
	return getPR(ctx, t.tx, `repo = $1 AND head_sha = $2 AND state = 'open' ORDER BY number DESC LIMIT 1`, repo, sha)
}

// SavePullRequest writes the whole cached pull request.
func (t *Tx) SavePullRequest(ctx context.Context, p PullRequest) error {
	state := p.State
	if state == "" {
		state = "open"
	}
	_, err := t.tx.Exec(ctx, `INSERT INTO pull_requests (`+prColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
		ON CONFLICT (repo, number) DO UPDATE SET author = EXCLUDED.author, title = EXCLUDED.title,
			head_ref = EXCLUDED.head_ref, head_sha = EXCLUDED.head_sha, base_ref = EXCLUDED.base_ref,
			state = EXCLUDED.state, merged = EXCLUDED.merged, merged_by = EXCLUDED.merged_by,
			linked_issues = EXCLUDED.linked_issues, changes_requested_by = EXCLUDED.changes_requested_by,
			gitea_updated_at = EXCLUDED.gitea_updated_at, closed_at = EXCLUDED.closed_at, synced_at = now()`,
		p.Repo, p.Number, p.Author, p.Title, p.HeadRef, p.HeadSHA, p.BaseRef, state, p.Merged,
		p.MergedBy, nonNil(p.LinkedIssues), nonNil(p.ChangesRequestedBy), nullTime(p.UpdatedAt), nullTime(p.ClosedAt))
	if err != nil {
		return fmt.Errorf("save pull request %s#%d: %w", p.Repo, p.Number, err)
	}
	return nil
}

// CommitStatus is a failing commit status kept until its commit is known.
type CommitStatus struct {
	Repo        string
	ID          int64
	SHA         string
	Context     string
	State       string
	TargetURL   string
	Description string
	Sender      string
}

// SaveUnmatchedStatus keeps a failing status whose commit is not a tracked
// PR head yet.
func (t *Tx) SaveUnmatchedStatus(ctx context.Context, st CommitStatus) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO commit_statuses (repo, status_id, sha, context, state,
			target_url, description, sender) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (repo, status_id) DO NOTHING`,
		st.Repo, st.ID, st.SHA, st.Context, st.State, st.TargetURL, st.Description, st.Sender)
	if err != nil {
		return fmt.Errorf("save status %d of %s@%s: %w", st.ID, st.Repo, st.SHA, err)
	}
	return nil
}

// TakeUnmatchedStatuses returns and marks matched the kept statuses of sha.
func (t *Tx) TakeUnmatchedStatuses(ctx context.Context, repo, sha string) ([]CommitStatus, error) {
	rows, err := t.tx.Query(ctx, `UPDATE commit_statuses SET matched_at = now()
		WHERE repo = $1 AND sha = $2 AND matched_at IS NULL
		RETURNING repo, status_id, sha, context, state, target_url, description, sender`, repo, sha)
	if err != nil {
		return nil, fmt.Errorf("take statuses of %s@%s: %w", repo, sha, err)
	}
	defer rows.Close()
	var out []CommitStatus
	for rows.Next() {
		var st CommitStatus
		if err := rows.Scan(&st.Repo, &st.ID, &st.SHA, &st.Context, &st.State, &st.TargetURL,
			&st.Description, &st.Sender); err != nil {
			return nil, fmt.Errorf("scan status: %w", err)
		}
		out = append(out, st)
	}
	return out, rows.Err()
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// PullRequest returns the cached pull request.
func (s *Store) PullRequest(ctx context.Context, repo string, number int) (PullRequest, bool, error) {
	return getPR(ctx, s.pool, `repo = $1 AND number = $2`, repo, number)
}
