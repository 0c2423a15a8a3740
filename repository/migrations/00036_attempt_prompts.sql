-- +goose Up
-- The prompt each attempt got, as the console shows it (docs/console.md):
-- redacted of the agent's secrets as its output is, and cut at 256 KiB so
-- a huge prompt cannot bloat the table. NULL: not stored (attempts before
-- this migration, or a run whose prompt could not be recorded). TOAST
-- keeps it out of the row, so reading attempts without it costs nothing.
ALTER TABLE task_attempts ADD COLUMN prompt TEXT;

-- +goose Down
ALTER TABLE task_attempts DROP COLUMN prompt;
