-- +goose Up
-- The web console (webhook/console, docs/console.md).

-- A signed-in console user. The cookie carries a random id; only its
-- SHA-256 is stored, so a copy of this table opens no session. The user's
-- Gitea token is kept to ask Gitea what the user may read and write: it
-- is as secret as the cookie and never leaves this row.
CREATE TABLE console_sessions (
    id_hash     BYTEA       PRIMARY KEY,
    login       TEXT        NOT NULL,
    token       TEXT        NOT NULL,
    csrf        TEXT        NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX console_sessions_expires_idx ON console_sessions (expires_at);

-- A task's state history: one row per change of its status, written by a
-- trigger so that whatever moves a task is recorded. The delivery behind
-- the change (set by the inbox processor for its transaction as
-- mozi.delivery) and who asked for it (mozi.actor: a console user) are
-- read from transaction-local settings; neither set means the engine
-- itself (a run, the ticker, a CLI verb).
CREATE TABLE task_events (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id     BIGINT      NOT NULL REFERENCES task_state (id) ON DELETE CASCADE,
    from_status TEXT        NOT NULL DEFAULT '',
    to_status   TEXT        NOT NULL,
    delivery_id TEXT,
    actor       TEXT        NOT NULL DEFAULT '',
    last_error  TEXT        NOT NULL DEFAULT '',
    at          TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX task_events_task_idx ON task_events (task_id, id);

-- +goose StatementBegin
CREATE FUNCTION mozi_task_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO task_events (task_id, from_status, to_status, delivery_id, actor, last_error)
    VALUES (NEW.id, CASE WHEN TG_OP = 'INSERT' THEN '' ELSE OLD.status END, NEW.status,
            NULLIF(current_setting('mozi.delivery', true), ''),
            COALESCE(current_setting('mozi.actor', true), ''), NEW.last_error);
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER task_state_event_insert AFTER INSERT ON task_state
    FOR EACH ROW EXECUTE FUNCTION mozi_task_event();
CREATE TRIGGER task_state_event_update AFTER UPDATE OF status ON task_state
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION mozi_task_event();

-- What console users did (stop, retry, requeue), whether it took effect.
CREATE TABLE console_actions (
    id      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    login   TEXT        NOT NULL,
    action  TEXT        NOT NULL,
    target  TEXT        NOT NULL,
    applied BOOLEAN     NOT NULL,
    at      TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE console_actions;
DROP TRIGGER task_state_event_update ON task_state;
DROP TRIGGER task_state_event_insert ON task_state;
DROP FUNCTION mozi_task_event();
DROP TABLE task_events;
DROP TABLE console_sessions;
