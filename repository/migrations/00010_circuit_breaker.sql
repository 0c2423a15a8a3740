-- +goose Up
-- Comments agents post, per repository: a storm of them (agents answering
-- agents) trips the repository's circuit breaker.
CREATE TABLE agent_comments (
    repo       TEXT        NOT NULL,
    author     TEXT        NOT NULL,
    comment_id BIGINT      NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (repo, comment_id)
);
CREATE INDEX agent_comments_recent_idx ON agent_comments (repo, created_at);

-- An open breaker (open_until in the future) pauses new agent runs on its
-- repository; it closes by itself. notified_at records its one comment.
CREATE TABLE repo_breakers (
    repo        TEXT        PRIMARY KEY,
    tripped_at  TIMESTAMPTZ NOT NULL,
    open_until  TIMESTAMPTZ NOT NULL,
    comments    INTEGER     NOT NULL,
    issue       INTEGER     NOT NULL,
    notified_at TIMESTAMPTZ
);

-- +goose Down
DROP TABLE repo_breakers;
DROP TABLE agent_comments;
