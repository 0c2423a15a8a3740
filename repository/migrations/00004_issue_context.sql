-- +goose Up
-- What prompts need of an issue besides its text: its latest [Action Report]
-- (kept by the webhook mapper, or read from Gitea once) and Gitea's native
-- dependencies (read from Gitea, refreshed now and then).
ALTER TABLE issues ADD COLUMN last_report TEXT NOT NULL DEFAULT '';
ALTER TABLE issues ADD COLUMN last_report_at TIMESTAMPTZ;
ALTER TABLE issues ADD COLUMN comments_synced_at TIMESTAMPTZ;
ALTER TABLE issues ADD COLUMN blocked_by INTEGER[] NOT NULL DEFAULT '{}';
ALTER TABLE issues ADD COLUMN deps_synced_at TIMESTAMPTZ;

-- +goose Down
ALTER TABLE issues DROP COLUMN deps_synced_at;
ALTER TABLE issues DROP COLUMN blocked_by;
ALTER TABLE issues DROP COLUMN comments_synced_at;
ALTER TABLE issues DROP COLUMN last_report_at;
ALTER TABLE issues DROP COLUMN last_report;
