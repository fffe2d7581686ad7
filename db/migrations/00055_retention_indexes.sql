-- +goose Up
-- The periodic cleanup (docs/email.md, docs/webhooks.md, "Retention") deletes sent e-mail and
-- finished webhook deliveries, and then the events no delivery names, older than their retention:
-- these indexes find them without reading the tables through.
CREATE INDEX mail_outbox_sent_idx ON mail_outbox (sent_at) WHERE status = 'sent';
CREATE INDEX webhook_deliveries_finished_idx ON webhook_deliveries (finished_at) WHERE status <> 'pending';
CREATE INDEX webhook_events_created_idx ON webhook_events (created_at);

-- +goose Down
DROP INDEX webhook_events_created_idx;
DROP INDEX webhook_deliveries_finished_idx;
DROP INDEX mail_outbox_sent_idx;
