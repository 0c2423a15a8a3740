-- +goose Up
-- One status comment per issue, edited in place as the issue's tasks move
-- (issue 21). A change of a task only appends a mark (no row lock another
-- transaction could wait on); the status poster folds the marks into
-- status_comments, renders the issue's tasks and creates or edits the one
-- comment, at most once per min_edit_interval.
CREATE TABLE status_marks (
    id           BIGSERIAL PRIMARY KEY,
    repo         TEXT    NOT NULL,
    issue_number INTEGER NOT NULL
);

CREATE TABLE status_comments (
    repo         TEXT        NOT NULL,
    issue_number INTEGER     NOT NULL,
    comment_id   BIGINT,                        -- NULL until Gitea took the first post
    body         TEXT        NOT NULL DEFAULT '', -- what Gitea shows
    changes      BIGINT      NOT NULL DEFAULT 0, -- folds of task changes
    shown        BIGINT      NOT NULL DEFAULT 0, -- changes the body renders (dirty while changes > shown)
    last_edit_at TIMESTAMPTZ,
    edits        INTEGER     NOT NULL DEFAULT 0, -- posts and edits Gitea took
    reacted      BIGINT[]    NOT NULL DEFAULT '{}', -- tasks whose trigger got its 👀
    attempts     INTEGER     NOT NULL DEFAULT 0, -- failed tries since the last success
    next_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    locked_until TIMESTAMPTZ,
    last_error   TEXT        NOT NULL DEFAULT '',
    parked_at    TIMESTAMPTZ,
    PRIMARY KEY (repo, issue_number)
);
CREATE INDEX status_comments_dirty_idx ON status_comments (next_at) WHERE changes > shown AND parked_at IS NULL;

-- What Gitea took, in order: the e2e test and an operator read how the
-- comment moved (Gitea's API does not list a comment's edit history).
CREATE TABLE status_comment_edits (
    id           BIGSERIAL   PRIMARY KEY,
    repo         TEXT        NOT NULL,
    issue_number INTEGER     NOT NULL,
    comment_id   BIGINT      NOT NULL,
    body         TEXT        NOT NULL,
    at           TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX status_comment_edits_issue_idx ON status_comment_edits (repo, issue_number, id);

-- +goose StatementBegin
CREATE FUNCTION mozi_status_mark() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.issue_number > 0 THEN
        INSERT INTO status_marks (repo, issue_number) VALUES (NEW.repo, NEW.issue_number);
        PERFORM pg_notify('mozi_status', '');
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER task_state_status_mark_insert AFTER INSERT ON task_state
    FOR EACH ROW EXECUTE FUNCTION mozi_status_mark();
CREATE TRIGGER task_state_status_mark_update AFTER UPDATE ON task_state
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.held_for IS DISTINCT FROM NEW.held_for
        OR OLD.pr_number IS DISTINCT FROM NEW.pr_number OR OLD.dispatch_count IS DISTINCT FROM NEW.dispatch_count
        OR OLD.last_error IS DISTINCT FROM NEW.last_error)
    EXECUTE FUNCTION mozi_status_mark();

-- A tripped breaker holds the repository's pending tasks without changing
-- them: their comments say so.
-- +goose StatementBegin
CREATE FUNCTION mozi_status_mark_breaker() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO status_marks (repo, issue_number)
        SELECT DISTINCT repo, issue_number FROM task_state
        WHERE repo = NEW.repo AND status = 'pending' AND issue_number > 0;
    PERFORM pg_notify('mozi_status', '');
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER repo_breakers_status_mark AFTER INSERT OR UPDATE OF open_until ON repo_breakers
    FOR EACH ROW EXECUTE FUNCTION mozi_status_mark_breaker();

-- A dependency that closes or opens (or an issue's blocked-by list that
-- changes) changes what its dependents' pending tasks wait for.
-- +goose StatementBegin
CREATE FUNCTION mozi_status_mark_dependents() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO status_marks (repo, issue_number)
        SELECT DISTINCT t.repo, t.issue_number FROM task_state t
        WHERE t.repo = NEW.repo AND t.status = 'pending' AND t.issue_number > 0
          AND (t.issue_number = NEW.number OR NEW.number = ANY(t.depends_on)
               OR EXISTS (SELECT 1 FROM issues i WHERE i.repo = t.repo AND i.number = t.issue_number
                          AND NEW.number = ANY(i.blocked_by)));
    PERFORM pg_notify('mozi_status', '');
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER issues_status_mark AFTER UPDATE OF state, blocked_by ON issues
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.blocked_by IS DISTINCT FROM NEW.blocked_by)
    EXECUTE FUNCTION mozi_status_mark_dependents();

-- +goose Down
DROP TRIGGER issues_status_mark ON issues;
DROP FUNCTION mozi_status_mark_dependents();
DROP TRIGGER repo_breakers_status_mark ON repo_breakers;
DROP FUNCTION mozi_status_mark_breaker();
DROP TRIGGER task_state_status_mark_update ON task_state;
DROP TRIGGER task_state_status_mark_insert ON task_state;
DROP FUNCTION mozi_status_mark();
DROP TABLE status_comment_edits;
DROP TABLE status_comments;
DROP TABLE status_marks;
