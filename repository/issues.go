package repository

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/moziplus/mozi/repository/task"
)

const issueColumns = `repo, number, is_pull, title, body, state, author, labels, assignees,
	parent_issue, depends_on, gitea_created_at, gitea_updated_at, closed_at, closed_by,
	discussion_due_at, discussed_at, synced_at`

func scanIssue(row pgx.Row) (task.Issue, error) {
	var (
		i                                        task.Issue
		parent                                   *int32
		depends                                  []int32
		created, updated, closed, due, discussed *time.Time
	)
	if err := row.Scan(&i.Repo, &i.Number, &i.IsPull, &i.Title, &i.Body, &i.State, &i.Author,
		&i.Labels, &i.Assignees, &parent, &depends, &created, &updated, &closed, &i.ClosedBy,
		&due, &discussed, &i.SyncedAt); err != nil {
		return task.Issue{}, err
	}
	i.ParentIssue = derefInt(parent)
	for _, d := range depends {
		i.DependsOn = append(i.DependsOn, int(d))
	}
	i.CreatedAt, i.UpdatedAt, i.ClosedAt = derefTime(created), derefTime(updated), derefTime(closed)
	i.DiscussionDueAt, i.DiscussedAt = derefTime(due), derefTime(discussed)
	return i, nil
}

// Issue returns the cached issue (task.ErrNotFound: none).
func (q *Queries) Issue(ctx context.Context, repo string, number int) (task.Issue, error) {
	i, err := scanIssue(q.db.QueryRow(ctx, `SELECT `+issueColumns+` FROM issues WHERE repo = $1 AND number = $2`, repo, number))
	if errors.Is(err, pgx.ErrNoRows) {
		return task.Issue{}, fmt.Errorf("issue %s#%d: %w", repo, number, task.ErrNotFound)
	}
	if err != nil {
		return task.Issue{}, fmt.Errorf("read issue %s#%d: %w", repo, number, err)
	}
	return i, nil
}

// SaveIssue writes the whole cached issue (insert or replace), its body as
// task.CapBody keeps it.
func (q *Queries) SaveIssue(ctx context.Context, i task.Issue) error {
	labels, assignees := nonNil(i.Labels), nonNil(i.Assignees)
	depends := i.DependsOn
	if depends == nil {
		depends = []int{}
	}
	state := i.State
	if state == "" {
		state = "open"
	}
	_, err := q.db.Exec(ctx, `INSERT INTO issues (`+issueColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, now())
		ON CONFLICT (repo, number) DO UPDATE SET is_pull = EXCLUDED.is_pull, title = EXCLUDED.title,
			body = EXCLUDED.body, state = EXCLUDED.state, author = EXCLUDED.author,
			labels = EXCLUDED.labels, assignees = EXCLUDED.assignees,
			parent_issue = EXCLUDED.parent_issue, depends_on = EXCLUDED.depends_on,
			gitea_created_at = EXCLUDED.gitea_created_at, gitea_updated_at = EXCLUDED.gitea_updated_at,
			closed_at = EXCLUDED.closed_at, closed_by = EXCLUDED.closed_by,
			discussion_due_at = EXCLUDED.discussion_due_at, discussed_at = EXCLUDED.discussed_at,
			synced_at = now()`,
		i.Repo, i.Number, i.IsPull, i.Title, task.CapBody(i.Body), state, i.Author, labels, assignees,
		nullInt(i.ParentIssue), depends, nullTime(i.CreatedAt), nullTime(i.UpdatedAt),
		nullTime(i.ClosedAt), i.ClosedBy, nullTime(i.DiscussionDueAt), nullTime(i.DiscussedAt))
	if err != nil {
		return fmt.Errorf("save issue %s#%d: %w", i.Repo, i.Number, err)
	}
	return nil
}

const prColumns = `repo, number, author, title, head_ref, head_sha, base_ref, state, merged,
	merged_by, linked_issues, changes_requested_by, gitea_updated_at, closed_at`

func scanPR(row pgx.Row) (task.PullRequest, error) {
	var (
		p               task.PullRequest
		updated, closed *time.Time
	)
	if err := row.Scan(&p.Repo, &p.Number, &p.Author, &p.Title, &p.HeadRef, &p.HeadSHA, &p.BaseRef,
		&p.State, &p.Merged, &p.MergedBy, &p.LinkedIssues, &p.ChangesRequestedBy, &updated, &closed); err != nil {
		return task.PullRequest{}, err
	}
	p.UpdatedAt, p.ClosedAt = derefTime(updated), derefTime(closed)
	return p, nil
}

func (q *Queries) pullRequestWhere(ctx context.Context, what, where string, args ...any) (task.PullRequest, error) {
	p, err := scanPR(q.db.QueryRow(ctx, `SELECT `+prColumns+` FROM pull_requests WHERE `+where, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return task.PullRequest{}, fmt.Errorf("%s: %w", what, task.ErrNotFound)
	}
	if err != nil {
		return task.PullRequest{}, fmt.Errorf("read pull request: %w", err)
	}
	return p, nil
}

// OpenPullRequestByHead finds the open pull request whose head is sha
// (task.ErrNotFound: none).
func (q *Queries) OpenPullRequestByHead(ctx context.Context, repo, sha string) (task.PullRequest, error) {
	return q.pullRequestWhere(ctx, fmt.Sprintf("open pull request of %s@%s", repo, sha),
		`repo = $1 AND head_sha = $2 AND state = 'open' ORDER BY number DESC LIMIT 1`, repo, sha)
}

// SavePullRequest writes the whole cached pull request.
func (q *Queries) SavePullRequest(ctx context.Context, p task.PullRequest) error {
	state := p.State
	if state == "" {
		state = "open"
	}
	// opened_at is written once, when mozi first sees the pull request
	// open; first seen closed (merged during downtime), it stays unknown.
	_, err := q.db.Exec(ctx, `INSERT INTO pull_requests (`+prColumns+`, opened_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,
			CASE WHEN $8 = 'open' THEN now() END)
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

// SaveUnmatchedStatus keeps a failing status whose commit is not a tracked
// PR head yet.
func (q *Queries) SaveUnmatchedStatus(ctx context.Context, st task.CommitStatus) error {
	_, err := q.db.Exec(ctx, `INSERT INTO commit_statuses (repo, status_id, sha, context, state,
			target_url, description, sender) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (repo, status_id) DO NOTHING`,
		st.Repo, st.ID, st.SHA, st.Context, st.State, st.TargetURL, st.Description, st.Sender)
	if err != nil {
		return fmt.Errorf("save status %d of %s@%s: %w", st.ID, st.Repo, st.SHA, err)
	}
	return nil
}

// TakeUnmatchedStatuses returns and marks matched the kept statuses of sha.
func (q *Queries) TakeUnmatchedStatuses(ctx context.Context, repo, sha string) ([]task.CommitStatus, error) {
	rows, err := q.db.Query(ctx, `UPDATE commit_statuses SET matched_at = now()
		WHERE repo = $1 AND sha = $2 AND matched_at IS NULL
		RETURNING repo, status_id, sha, context, state, target_url, description, sender`, repo, sha)
	if err != nil {
		return nil, fmt.Errorf("take statuses of %s@%s: %w", repo, sha, err)
	}
	defer rows.Close()
	var out []task.CommitStatus
	for rows.Next() {
		var st task.CommitStatus
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

// PullRequest returns the cached pull request (task.ErrNotFound: none).
func (q *Queries) PullRequest(ctx context.Context, repo string, number int) (task.PullRequest, error) {
	return q.pullRequestWhere(ctx, fmt.Sprintf("pull request %s#%d", repo, number), `repo = $1 AND number = $2`, repo, number)
}

// SetLatestReport records an [Action Report] seen on an issue, unless a
// newer one is already known.
func (q *Queries) SetLatestReport(ctx context.Context, repo string, number int, body string, at time.Time) error {
	_, err := q.db.Exec(ctx, `UPDATE issues SET last_report = $3, last_report_at = $4
		WHERE repo = $1 AND number = $2 AND (last_report_at IS NULL OR last_report_at <= $4)`,
		repo, number, body, at)
	if err != nil {
		return fmt.Errorf("record report on %s#%d: %w", repo, number, err)
	}
	return nil
}

// CachedReport returns the latest [Action Report] mozi knows on an issue
// ("" if none), and whether that is all there is: the issue's comments
// were read from Gitea, or a report was seen since.
func (q *Queries) CachedReport(ctx context.Context, repo string, number int) (report string, synced bool, err error) {
	err = q.db.QueryRow(ctx, `SELECT last_report, comments_synced_at IS NOT NULL OR last_report <> ''
		FROM issues WHERE repo = $1 AND number = $2`, repo, number).Scan(&report, &synced)
	if err != nil && !isNoRows(err) {
		return "", false, fmt.Errorf("read latest report of %s#%d: %w", repo, number, err)
	}
	return report, synced, nil
}

// CacheReport records the latest [Action Report] found in an issue's
// comments as read from Gitea ("" if none; at is when it was posted).
func (q *Queries) CacheReport(ctx context.Context, repo string, number int, report string, at time.Time) error {
	if _, err := q.db.Exec(ctx, `UPDATE issues SET last_report = $3,
			last_report_at = $4, comments_synced_at = now() WHERE repo = $1 AND number = $2`,
		repo, number, report, nullTime(at)); err != nil {
		return fmt.Errorf("cache latest report of %s#%d: %w", repo, number, err)
	}
	return nil
}

// CachedBlockedBy returns the issues that Gitea's native dependencies
// said block this one, and when that was read (zero: never).
func (q *Queries) CachedBlockedBy(ctx context.Context, repo string, number int) ([]int, time.Time, error) {
	var (
		blocked []int32
		synced  *time.Time
	)
	err := q.db.QueryRow(ctx, `SELECT blocked_by, deps_synced_at FROM issues
		WHERE repo = $1 AND number = $2`, repo, number).Scan(&blocked, &synced)
	if err != nil && !isNoRows(err) {
		return nil, time.Time{}, fmt.Errorf("read dependencies of %s#%d: %w", repo, number, err)
	}
	out := make([]int, 0, len(blocked))
	for _, b := range blocked {
		out = append(out, int(b))
	}
	return out, derefTime(synced), nil
}

// CacheBlockedBy records the issues that Gitea's native dependencies say
// block this one, as read now.
func (q *Queries) CacheBlockedBy(ctx context.Context, repo string, number int, blocked []int) error {
	if blocked == nil {
		blocked = []int{}
	}
	if _, err := q.db.Exec(ctx, `UPDATE issues SET blocked_by = $3, deps_synced_at = now()
		WHERE repo = $1 AND number = $2`, repo, number, blocked); err != nil {
		return fmt.Errorf("cache dependencies of %s#%d: %w", repo, number, err)
	}
	return nil
}

// SubIssues lists the cached sub-issues of a parent issue, by number.
func (q *Queries) SubIssues(ctx context.Context, repo string, parent int) ([]task.Issue, error) {
	rows, err := q.db.Query(ctx, `SELECT `+issueColumns+` FROM issues
		WHERE repo = $1 AND parent_issue = $2 ORDER BY number`, repo, parent)
	if err != nil {
		return nil, fmt.Errorf("list sub-issues of %s#%d: %w", repo, parent, err)
	}
	defer rows.Close()
	var out []task.Issue
	for rows.Next() {
		i, err := scanIssue(rows)
		if err != nil {
			return nil, fmt.Errorf("scan sub-issue: %w", err)
		}
		out = append(out, i)
	}
	return out, rows.Err()
}

// RefreshIssueCopy replaces a task's copy of its issue (body, updated_at,
// title and labels) with a newer one, its body as task.CapBody keeps it.
func (q *Queries) RefreshIssueCopy(ctx context.Context, id int64, issue task.Issue) error {
	if _, err := q.db.Exec(ctx, `UPDATE task_state SET issue_body_cache = $2, issue_updated_at = $3,
			daemon_meta = daemon_meta || jsonb_build_object('title', $4::text, 'labels', to_jsonb($5::text[]))
		WHERE id = $1`, id, task.CapBody(issue.Body), issue.UpdatedAt, issue.Title, nonNil(issue.Labels)); err != nil {
		return fmt.Errorf("refresh task %d's copy of its issue: %w", id, err)
	}
	return nil
}
