-- +goose Up
-- When a batch line's last attempt ended (done or failed), so the admin's batch queue can tell the
-- lines per minute (docs/batches.md, "The queue"). A line's claimed_at is cleared when it ends and
-- no other column kept the time. A line expired unsent has none: it never ran. Lines that ended
-- before this migration have none either and are not counted.
ALTER TABLE batch_lines ADD COLUMN finished_at timestamptz;
CREATE INDEX batch_lines_finished_idx ON batch_lines (finished_at) WHERE finished_at IS NOT NULL;

-- +goose Down
DROP INDEX batch_lines_finished_idx;
ALTER TABLE batch_lines DROP COLUMN finished_at;
