-- +goose Up

-- One row per elected role (the ticker): whoever holds an unexpired lease leads.
CREATE TABLE leader_leases (
    name       TEXT        PRIMARY KEY,
    holder     TEXT        NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    acquired_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Spawn budgets count attempts per issue and per agent over a window.
ALTER TABLE task_attempts ADD COLUMN repo TEXT NOT NULL DEFAULT '';
ALTER TABLE task_attempts ADD COLUMN issue_number INTEGER NOT NULL DEFAULT 0;
CREATE INDEX task_attempts_issue_idx ON task_attempts (repo, issue_number, started_at);
CREATE INDEX task_attempts_agent_idx ON task_attempts (agent, started_at);
CREATE INDEX task_attempts_running_idx ON task_attempts (task_id) WHERE finished_at IS NULL;

-- Runs hold leases: the dispatcher counts them per agent.
CREATE INDEX task_state_running_idx ON task_state (agent) WHERE lease_owner IS NOT NULL;

-- Wake every dispatcher, in every replica, when work becomes pending.
-- Notifications are sent at commit and folded within a transaction.
-- +goose StatementBegin
CREATE FUNCTION mozi_notify_pending() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('mozi_pending', '');
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER task_state_pending_notify
    AFTER INSERT OR UPDATE OF status ON task_state
    FOR EACH ROW WHEN (NEW.status = 'pending')
    EXECUTE FUNCTION mozi_notify_pending();

-- +goose Down
DROP TRIGGER task_state_pending_notify ON task_state;
DROP FUNCTION mozi_notify_pending();
DROP INDEX task_state_running_idx;
DROP INDEX task_attempts_running_idx;
DROP INDEX task_attempts_agent_idx;
DROP INDEX task_attempts_issue_idx;
ALTER TABLE task_attempts DROP COLUMN issue_number;
ALTER TABLE task_attempts DROP COLUMN repo;
DROP TABLE leader_leases;
