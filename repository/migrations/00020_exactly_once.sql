-- +goose Up
-- Why a held task waits (task.HoldReason): a Gitea outage, a dependency, a
-- budget, a branch in use. When Gitea answers again the tasks held for it
-- are made due at once instead of waiting out their backoff.
ALTER TABLE task_state ADD COLUMN held_for TEXT NOT NULL DEFAULT '';

-- Who ended a task (the Gitea login behind the event, "mozi", or an
-- operator): a run whose task someone else ended is stopped, one whose
-- agent ended it itself (its own review, its report) may finish.
ALTER TABLE task_state ADD COLUMN ended_by TEXT NOT NULL DEFAULT '';

-- A run holds its task's lease until its outcome is recorded, even when
-- Gitea ends the task meanwhile: the agent's slot stays taken while its
-- process lives. The runner hears of the end at once.
-- +goose StatementBegin
CREATE FUNCTION mozi_notify_task_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('mozi_task_ended', NEW.id::text);
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER task_state_ended_notify
    AFTER UPDATE OF status ON task_state
    FOR EACH ROW WHEN (NEW.status IN ('done', 'failed', 'cancelled')
                       AND OLD.status NOT IN ('done', 'failed', 'cancelled')
                       AND NEW.lease_owner IS NOT NULL)
    EXECUTE FUNCTION mozi_notify_task_ended();

-- Every mozi process heartbeats here: a run's task is rescued only when
-- its runner stopped beating (it died), not because the database was
-- away longer than the lease while the runner lived.
CREATE TABLE runners (
    owner        TEXT PRIMARY KEY,
    started_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    heartbeat_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- What mozi itself says on Gitea (a failure, a tripped circuit breaker) is
-- written here in the transaction of the change that calls for it, and
-- posted by a worker with retries until Gitea takes it: never lost on one
-- Gitea error, never posted twice (each body carries its row's marker,
-- looked for before a retry).
CREATE TABLE outbox (
    id           BIGSERIAL PRIMARY KEY,
    repo         TEXT NOT NULL,
    issue_number INTEGER NOT NULL,
    kind         TEXT NOT NULL,
    dedupe_key   TEXT NOT NULL,
    body         TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    attempts     INTEGER NOT NULL DEFAULT 0,
    next_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    locked_until TIMESTAMPTZ,
    last_error   TEXT NOT NULL DEFAULT '',
    posted_at    TIMESTAMPTZ,
    comment_id   BIGINT,
    parked_at    TIMESTAMPTZ,
    UNIQUE (kind, dedupe_key)
);
CREATE INDEX outbox_waiting_idx ON outbox (next_at) WHERE posted_at IS NULL AND parked_at IS NULL;

-- +goose StatementBegin
CREATE FUNCTION mozi_notify_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('mozi_outbox', '');
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER outbox_notify AFTER INSERT ON outbox
    FOR EACH ROW EXECUTE FUNCTION mozi_notify_outbox();

-- +goose Down
DROP TABLE outbox;
DROP FUNCTION mozi_notify_outbox();
DROP TABLE runners;
DROP TRIGGER task_state_ended_notify ON task_state;
DROP FUNCTION mozi_notify_task_ended();
ALTER TABLE task_state DROP COLUMN ended_by;
ALTER TABLE task_state DROP COLUMN held_for;
