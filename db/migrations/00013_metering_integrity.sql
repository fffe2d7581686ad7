-- +goose Up
-- The meter bills what was agreed at routing and no more than the gateway saw (see
-- docs/metering-integrity.md).
--
-- A usage row keeps the terms of its route ticket: the price version the customer pays
-- (price_id, NULL in rows metered before tickets carried it) and the provider's asks per input
-- and per output token (the single ask of older rows applied to both). input_tokens and
-- output_tokens are what was billed; reported_input_tokens and reported_output_tokens what the
-- rig reported (NULL in older rows, which billed what the rig reported). flag says why the
-- bill differs from the report or was not checked against the gateway's record, flag_reason
-- in words, for the discrepancies page.
ALTER TABLE usage_events RENAME COLUMN ask_price TO ask_input_price;
ALTER TABLE usage_events
    ADD COLUMN ask_output_price       bigint,
    ADD COLUMN price_id               bigint,
    ADD COLUMN reported_input_tokens  bigint CHECK (reported_input_tokens >= 0),
    ADD COLUMN reported_output_tokens bigint CHECK (reported_output_tokens >= 0),
    ADD COLUMN flag                   text CHECK (flag IN ('clipped', 'incomplete', 'failed_attempt', 'no_gateway_record')),
    ADD COLUMN flag_reason            text,
    ADD CONSTRAINT usage_events_flag_reason CHECK ((flag IS NULL) = (flag_reason IS NULL));
UPDATE usage_events SET ask_output_price = ask_input_price;
ALTER TABLE usage_events ALTER COLUMN ask_output_price SET NOT NULL;
CREATE INDEX usage_events_flagged_idx ON usage_events (metered_at DESC) WHERE flag IS NOT NULL;

-- Refused events are counted per rig (the provider and offering of the subject they came on),
-- reason and hour; only the first few of each are kept whole in usage_rejections, so that a
-- rig sending forged events without end fills no table.
CREATE TABLE usage_rejection_counts (
    hour        timestamptz NOT NULL,
    provider_id text NOT NULL,
    offering_id text NOT NULL,
    reason      text NOT NULL,
    rejected    bigint NOT NULL CHECK (rejected > 0),
    last_at     timestamptz NOT NULL,
    PRIMARY KEY (hour, provider_id, offering_id, reason)
);
INSERT INTO usage_rejection_counts (hour, provider_id, offering_id, reason, rejected, last_at)
SELECT date_trunc('hour', received_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', split_part(subject, '.', 2),
    split_part(subject, '.', 3), reason, count(*), max(received_at)
FROM usage_rejections
GROUP BY 1, 2, 3, 4;

-- The refused messages counted that the stream may still deliver again (not yet below the
-- meter consumer's acknowledgement floor), so that a redelivery is not counted twice. The meter
-- deletes the rows below the floor as it rises: the table holds the unacknowledged window only.
CREATE TABLE usage_rejections_counted (
    stream_seq bigint NOT NULL,
    raw_sha256 bytea NOT NULL,
    PRIMARY KEY (stream_seq, raw_sha256)
);

-- +goose Down
DROP TABLE usage_rejections_counted;
DROP TABLE usage_rejection_counts;
DROP INDEX usage_events_flagged_idx;
ALTER TABLE usage_events
    DROP CONSTRAINT usage_events_flag_reason,
    DROP COLUMN flag_reason,
    DROP COLUMN flag,
    DROP COLUMN reported_output_tokens,
    DROP COLUMN reported_input_tokens,
    DROP COLUMN price_id,
    DROP COLUMN ask_output_price;
ALTER TABLE usage_events RENAME COLUMN ask_input_price TO ask_price;
