-- +goose Up
-- A task that waits for a person: the agent asked a question
-- (wait_reason 'question'), or its pull request stayed red after its last
-- CI repair round ('ci_red'). It is live (one live task per issue, action
-- and agent still holds) but nobody claims it and the watchdog leaves it be;
-- a person's next comment puts it back to pending.
ALTER TABLE task_state ADD COLUMN wait_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE task_state DROP CONSTRAINT task_state_status_check;
ALTER TABLE task_state ADD CONSTRAINT task_state_status_check CHECK (status IN
    ('pending', 'claimed', 'working', 'review', 'waiting', 'done', 'failed', 'cancelled'));
-- A finished task keeps the reason it last waited for.
ALTER TABLE task_state ADD CONSTRAINT task_state_wait_reason_check CHECK (
    (status <> 'waiting' OR wait_reason <> '') AND wait_reason IN ('', 'question', 'ci_red'));
DROP INDEX task_state_one_live_idx;
CREATE UNIQUE INDEX task_state_one_live_idx ON task_state (repo, issue_number, action_type, agent)
    WHERE status IN ('pending', 'claimed', 'working', 'review', 'waiting') AND issue_number > 0;

-- The latest state of every status context of every commit mozi heard of:
-- whether a pull request's head is green decides when its reviewers run.
-- commit_statuses keeps only failures no pull request explains yet.
CREATE TABLE head_statuses (
    repo        TEXT        NOT NULL,
    sha         TEXT        NOT NULL,
    context     TEXT        NOT NULL,
    state       TEXT        NOT NULL,
    description TEXT        NOT NULL DEFAULT '',
    target_url  TEXT        NOT NULL DEFAULT '',
    updated_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (repo, sha, context)
);

-- +goose Down
DROP TABLE head_statuses;
UPDATE task_state SET status = 'pending', not_before = now() WHERE status = 'waiting';
DROP INDEX task_state_one_live_idx;
CREATE UNIQUE INDEX task_state_one_live_idx ON task_state (repo, issue_number, action_type, agent)
    WHERE status IN ('pending', 'claimed', 'working', 'review') AND issue_number > 0;
ALTER TABLE task_state DROP CONSTRAINT task_state_wait_reason_check;
ALTER TABLE task_state DROP CONSTRAINT task_state_status_check;
ALTER TABLE task_state ADD CONSTRAINT task_state_status_check CHECK (status IN
    ('pending', 'claimed', 'working', 'review', 'done', 'failed', 'cancelled'));
ALTER TABLE task_state DROP COLUMN wait_reason;
