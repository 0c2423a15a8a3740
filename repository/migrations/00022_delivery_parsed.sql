-- +goose Up
-- What the intake made of a delivery when it parsed it (payload.Event, as
-- payload.Encode writes it: a few KiB, an issue body as mozi keeps it), so
-- that processing need not read the body back and parse it again: a 9 MB
-- body was read and parsed twice. NULL: processing parses the body
-- (deliveries stored before this, ignored ones, the catch-up's).
ALTER TABLE webhook_deliveries ADD COLUMN parsed BYTEA;

-- +goose Down
ALTER TABLE webhook_deliveries DROP COLUMN parsed;
