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

-- What a metrics scrape reads must not grow with history: the totals per
-- repository and agent are kept as outcomes are written (a trigger, so
-- whatever writes an outcome counts it), with the durations' histogram
-- buckets: cumulative counts of durations <= each bound of
-- mozi_outcome_buckets(). Outcomes are never updated; one deleted by hand
-- stays counted, as a Prometheus counter would.
-- +goose StatementBegin
CREATE FUNCTION mozi_outcome_buckets() RETURNS float8[] LANGUAGE sql IMMUTABLE AS $$
    SELECT '{60, 300, 900, 1800, 3600, 7200, 14400, 28800, 86400, 172800, 345600, 604800}'::float8[]
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION mozi_outcome_le(v float8) RETURNS bigint[] LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY(SELECT (v IS NOT NULL AND v <= b)::int::bigint
                 FROM unnest(mozi_outcome_buckets()) WITH ORDINALITY AS u(b, i) ORDER BY i)
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION mozi_outcome_add(a bigint[], b bigint[]) RETURNS bigint[] LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY(SELECT x + y FROM unnest(a, b) WITH ORDINALITY AS u(x, y, i) ORDER BY i)
$$;
-- +goose StatementEnd
CREATE TABLE pr_outcome_totals (
    repo          TEXT             NOT NULL,
    agent         TEXT             NOT NULL,
    merged        BIGINT           NOT NULL,
    autonomous    BIGINT           NOT NULL,
    ci_rounds     BIGINT           NOT NULL,
    review_rounds BIGINT           NOT NULL,
    tokens        BIGINT           NOT NULL,
    cost_usd      NUMERIC(20, 6)   NOT NULL,
    assign_n      BIGINT           NOT NULL,
    assign_sum    DOUBLE PRECISION NOT NULL,
    assign_le     BIGINT[]         NOT NULL,
    merge_n       BIGINT           NOT NULL,
    merge_sum     DOUBLE PRECISION NOT NULL,
    merge_le      BIGINT[]         NOT NULL,
    PRIMARY KEY (repo, agent)
);
-- +goose StatementBegin
CREATE FUNCTION mozi_pr_outcome_total() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pr_outcome_totals AS t VALUES (NEW.repo, NEW.agent, 1, (NOT NEW.human_push)::int,
        NEW.ci_rounds, NEW.review_rounds, NEW.tokens, NEW.cost_usd,
        (NEW.assign_to_pr_s IS NOT NULL)::int, COALESCE(NEW.assign_to_pr_s, 0), mozi_outcome_le(NEW.assign_to_pr_s),
        (NEW.pr_to_merge_s IS NOT NULL)::int, COALESCE(NEW.pr_to_merge_s, 0), mozi_outcome_le(NEW.pr_to_merge_s))
    ON CONFLICT (repo, agent) DO UPDATE SET
        merged = t.merged + 1, autonomous = t.autonomous + EXCLUDED.autonomous,
        ci_rounds = t.ci_rounds + EXCLUDED.ci_rounds, review_rounds = t.review_rounds + EXCLUDED.review_rounds,
        tokens = t.tokens + EXCLUDED.tokens, cost_usd = t.cost_usd + EXCLUDED.cost_usd,
        assign_n = t.assign_n + EXCLUDED.assign_n, assign_sum = t.assign_sum + EXCLUDED.assign_sum,
        assign_le = mozi_outcome_add(t.assign_le, EXCLUDED.assign_le),
        merge_n = t.merge_n + EXCLUDED.merge_n, merge_sum = t.merge_sum + EXCLUDED.merge_sum,
        merge_le = mozi_outcome_add(t.merge_le, EXCLUDED.merge_le);
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER pr_outcomes_total AFTER INSERT ON pr_outcomes
    FOR EACH ROW EXECUTE FUNCTION mozi_pr_outcome_total();

-- +goose Down
DROP TABLE pr_outcomes;
DROP FUNCTION mozi_pr_outcome_total();
DROP TABLE pr_outcome_totals;
DROP FUNCTION mozi_outcome_add(bigint[], bigint[]);
DROP FUNCTION mozi_outcome_le(float8);
DROP FUNCTION mozi_outcome_buckets();
ALTER TABLE pull_requests DROP COLUMN human_push;
ALTER TABLE pull_requests DROP COLUMN opened_at;
