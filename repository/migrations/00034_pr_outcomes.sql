-- +goose Up
-- Outcome metrics (docs/loop/outcomes.md): what it took an agent to get a
-- pull request merged.

-- When mozi first saw the pull request (its opened webhook, or the catch-up
-- after downtime): the start of "PR to merge" and the end of "assignment to
-- PR". NULL for pull requests known before this migration.
ALTER TABLE pull_requests ADD COLUMN opened_at TIMESTAMPTZ;
-- A synchronized event (a push to the PR branch) whose sender is not a
-- registered agent: a person committed to the PR.
ALTER TABLE pull_requests ADD COLUMN human_push BOOLEAN NOT NULL DEFAULT false;

-- One row per merged pull request authored by an agent, written once by the
-- merge rule in the merge's transaction and never changed: the Prometheus
-- collector and `mozi tasks --stats` read the same rows. Durations are NULL
-- when a start is unknown (no assignment task, a PR seen before 00034).
CREATE TABLE pr_outcomes (
    repo           TEXT           NOT NULL,
    pr_number      INTEGER        NOT NULL,
    agent          TEXT           NOT NULL,
    merged_at      TIMESTAMPTZ    NOT NULL,
    human_push     BOOLEAN        NOT NULL,
    ci_rounds      INTEGER        NOT NULL,
    review_rounds  INTEGER        NOT NULL,
    assign_to_pr_s DOUBLE PRECISION,
    pr_to_merge_s  DOUBLE PRECISION,
    tokens         BIGINT         NOT NULL,
    cost_usd       NUMERIC(14, 6) NOT NULL,
    PRIMARY KEY (repo, pr_number)
);
CREATE INDEX pr_outcomes_merged_idx ON pr_outcomes (merged_at);

-- +goose Down
DROP TABLE pr_outcomes;
ALTER TABLE pull_requests DROP COLUMN human_push;
ALTER TABLE pull_requests DROP COLUMN opened_at;
