-- +goose Up
-- A delivery names the issue or pull request it is about, so that work
-- about that issue can wait while its deliveries are still in the inbox
-- (a discussion broadcast must not overtake a queued assignment).
-- Deliveries stored before this have none: nothing waits on them. No
-- index of its own: the waiting deliveries are found through the inbox's
-- partial index (webhook_deliveries_inbox_idx), and every index is paid
-- for on the intake's insert path.
ALTER TABLE webhook_deliveries ADD COLUMN issue_number INTEGER;

-- +goose Down
ALTER TABLE webhook_deliveries DROP COLUMN issue_number;
