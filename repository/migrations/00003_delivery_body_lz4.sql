-- +goose Up
-- Delivery bodies are JSON of a few to a few hundred KiB: lz4 compresses
-- them about twice as fast as the default pglz, a visible share of the
-- intake's cost per delivery (docs/performance.md). A server built without
-- lz4 keeps pglz.
-- +goose StatementBegin
DO $$
BEGIN
    ALTER TABLE webhook_deliveries ALTER COLUMN body SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
    RAISE NOTICE 'lz4 not available: delivery bodies stay pglz-compressed';
END
$$;
-- +goose StatementEnd

-- +goose Down
ALTER TABLE webhook_deliveries ALTER COLUMN body SET COMPRESSION pglz;
