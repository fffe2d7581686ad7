-- +goose Up
-- The usage rows are kept one table per calendar month (UTC) of the time the request finished,
-- occurred_at: the instant a request's invoice, statement, rollup hour and API key month all
-- go by (docs/invoicing.md, "The close"), so that a month's reads touch its own table only and
-- a month whose documents are final can be dropped whole (docs/usage-storage.md).
--
-- PostgreSQL keeps a unique index of a partitioned table within each partition, and only when
-- it holds the partition key: it cannot say that an event id or a request id is used once over
-- all months. usage_event_keys, one row per usage row and not partitioned, says it: the meter
-- writes the key row in the same transaction as the usage row, so a second event for an event
-- id or a request id fails or is skipped on its keys exactly as it did on the usage table's own
-- (docs/usage-storage.md, "One event id, one request id, over all months").
CREATE TABLE usage_event_keys (
    event_id    text PRIMARY KEY,
    request_id  text NOT NULL UNIQUE,
    occurred_at timestamptz NOT NULL, -- finds the row's month
    stream_seq  bigint NOT NULL       -- tells a redelivery of the stored message from a duplicate
);

CREATE TABLE usage_events_by_month (LIKE usage_events INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE)
    PARTITION BY RANGE (occurred_at);

-- A partition for every month that holds rows, and for this month and the next three, which
-- the platform would otherwise make at its start (services/usagestore). The DEFAULT partition
-- is a safety net that new usage does not rely on: the meter makes the month of every event it
-- writes first, and a row found there is moved to its month when that month is made.
-- +goose StatementBegin
DO $$
DECLARE
    this_month timestamptz := date_trunc('month', now(), 'UTC');
    m timestamptz := least(coalesce((SELECT date_trunc('month', min(occurred_at), 'UTC') FROM usage_events), this_month), this_month);
BEGIN
    WHILE m <= ((this_month AT TIME ZONE 'UTC') + interval '3 months') AT TIME ZONE 'UTC' LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF usage_events_by_month FOR VALUES FROM (%L) TO (%L)',
            'usage_events_' || to_char(m AT TIME ZONE 'UTC', 'YYYY_MM'),
            to_char(m AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS+00'),
            to_char((m AT TIME ZONE 'UTC') + interval '1 month', 'YYYY-MM-DD HH24:MI:SS+00'));
        m := ((m AT TIME ZONE 'UTC') + interval '1 month') AT TIME ZONE 'UTC';
    END LOOP;
END;
$$;
-- +goose StatementEnd

CREATE TABLE usage_events_default PARTITION OF usage_events_by_month DEFAULT;

INSERT INTO usage_events_by_month SELECT * FROM usage_events;
INSERT INTO usage_event_keys (event_id, request_id, occurred_at, stream_seq)
SELECT event_id, request_id, occurred_at, stream_seq FROM usage_events ORDER BY event_id;
DROP TABLE usage_events;
ALTER TABLE usage_events_by_month RENAME TO usage_events;

-- The indexes the readers use, built once the rows are in. Event ids are looked up in
-- usage_event_keys; request ids here too, where a reader needs the usage row itself (the
-- request log, a batch's charges).
CREATE INDEX usage_events_request_idx ON usage_events (request_id);
CREATE INDEX usage_events_account_idx ON usage_events (account_id, occurred_at DESC);
CREATE INDEX usage_events_provider_idx ON usage_events (provider_account_id, occurred_at DESC);
CREATE INDEX usage_events_flagged_idx ON usage_events (metered_at DESC) WHERE flag IS NOT NULL;

-- The months whose usage rows were dropped after their retention, once their documents were
-- final: what the platform did, and what it kept (docs/usage-storage.md, "Retention").
CREATE TABLE usage_months_dropped (
    month      timestamptz PRIMARY KEY CHECK (month = date_trunc('month', month AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'),
    events     bigint NOT NULL CHECK (events >= 0),
    dropped_at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE usage_months_dropped;
CREATE TABLE usage_events_unpartitioned (LIKE usage_events INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE);
INSERT INTO usage_events_unpartitioned SELECT * FROM usage_events;
DROP TABLE usage_events;
DROP TABLE usage_event_keys;
ALTER TABLE usage_events_unpartitioned RENAME TO usage_events;
ALTER TABLE usage_events ADD PRIMARY KEY (event_id), ADD UNIQUE (request_id);
CREATE INDEX usage_events_account_idx ON usage_events (account_id, occurred_at DESC);
CREATE INDEX usage_events_provider_idx ON usage_events (provider_account_id, occurred_at DESC);
CREATE INDEX usage_events_flagged_idx ON usage_events (metered_at DESC) WHERE flag IS NOT NULL;
