-- +goose Up
-- How far the ticker's catch-up has read each repository's open issues and
-- pull requests from Gitea: what happened while no mozi listened (Gitea
-- does not redeliver a webhook that failed) is found from here on.
CREATE TABLE repo_catch_up (
    repo          TEXT        PRIMARY KEY,
    caught_up_at  TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE repo_catch_up;
