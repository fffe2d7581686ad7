-- +goose Up
-- How far a month's close was at each of its last reports, so that its page can tell the pace
-- of the last minutes and the time left (docs/progress.md): a list of {"at", "done"} (accounts
-- done, customers and providers), oldest first, kept to the recent window and the report just
-- before it. A run starts it again.
ALTER TABLE invoice_closes ADD COLUMN progress_marks jsonb NOT NULL DEFAULT '[]';

-- +goose Down
ALTER TABLE invoice_closes DROP COLUMN progress_marks;
