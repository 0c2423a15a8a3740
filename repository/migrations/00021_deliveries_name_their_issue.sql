-- +goose Up
-- A delivery names the issue or pull request it is about, so that work
-- about that issue can wait while its deliveries are still in the inbox
-- (a discussion broadcast must not overtake a queued assignment).
-- Deliveries stored before this have none: nothing waits on them.
ALTER TABLE webhook_deliveries ADD COLUMN issue_number INTEGER;
CREATE INDEX webhook_deliveries_waiting_issue_idx ON webhook_deliveries (repo, issue_number)
    WHERE processed_at IS NULL AND outcome = '' AND issue_number IS NOT NULL;

-- +goose Down
DROP INDEX webhook_deliveries_waiting_issue_idx;
ALTER TABLE webhook_deliveries DROP COLUMN issue_number;
