-- +goose Up
-- Why a held task waits (task.HeldFor*): a Gitea outage, a dependency, a
-- budget, a branch in use. When Gitea answers again the tasks held for it
-- are made due at once instead of waiting out their backoff.
ALTER TABLE task_state ADD COLUMN held_for TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE task_state DROP COLUMN held_for;
