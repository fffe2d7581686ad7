-- +goose Up
-- One row per metered request. The meter inserts it and the ledger postings in one database
-- transaction per batch; the unique keys make a second row for an event id or a request id
-- impossible forever, whatever the broker's deduplication window (docs/failure-cases.md,
-- cases 1-5).
-- Charges are exact: picodollars (1e-12 USD) in NUMERIC.
CREATE TABLE usage_events (
    event_id            text PRIMARY KEY,
    request_id          text NOT NULL UNIQUE,
    account_id          uuid NOT NULL REFERENCES accounts (id),
    api_key_id          text NOT NULL DEFAULT '',
    offering_id         uuid NOT NULL REFERENCES offerings (id),
    provider_account_id uuid NOT NULL REFERENCES accounts (id),
    tier                text NOT NULL,
    model               text NOT NULL,
    input_tokens        bigint NOT NULL CHECK (input_tokens >= 0),
    output_tokens       bigint NOT NULL CHECK (output_tokens >= 0),
    ttft_ms             double precision NOT NULL,
    duration_ms         double precision NOT NULL,
    energy_j            double precision NOT NULL,
    energy_source       text NOT NULL,
    status              text NOT NULL,
    input_price         bigint NOT NULL,  -- micro-dollars per million tokens, the tier's price in force
    output_price        bigint NOT NULL,
    ask_price           bigint NOT NULL,  -- micro-dollars per million tokens, the provider's ask
    charge_pico         numeric(38, 0) NOT NULL CHECK (charge_pico >= 0),
    payable_pico        numeric(38, 0) NOT NULL CHECK (payable_pico >= 0),
    occurred_at         timestamptz NOT NULL,
    metered_at          timestamptz NOT NULL,
    stream_seq          bigint NOT NULL
);
CREATE INDEX usage_events_account_idx ON usage_events (account_id, occurred_at DESC);
CREATE INDEX usage_events_provider_idx ON usage_events (provider_account_id, occurred_at DESC);

-- Hourly rollups per account, offering, tier and model, kept exact in the same transaction as
-- the usage rows they sum.
CREATE TABLE usage_hourly (
    hour                timestamptz NOT NULL,
    account_id          uuid NOT NULL,
    offering_id         uuid NOT NULL,
    tier                text NOT NULL,
    model               text NOT NULL,
    provider_account_id uuid NOT NULL,
    requests            bigint NOT NULL,
    input_tokens        bigint NOT NULL,
    output_tokens       bigint NOT NULL,
    charge_pico         numeric(38, 0) NOT NULL,
    payable_pico        numeric(38, 0) NOT NULL,
    energy_j            double precision NOT NULL,
    PRIMARY KEY (hour, account_id, offering_id, tier, model)
);
CREATE INDEX usage_hourly_provider_idx ON usage_hourly (provider_account_id, hour);

-- Events the meter refused, with the reason and the raw event, for review. stream_seq makes
-- a redelivered rejection one row.
CREATE TABLE usage_rejections (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    stream_seq  bigint NOT NULL UNIQUE,
    subject     text NOT NULL,
    event_id    text NOT NULL DEFAULT '',
    reason      text NOT NULL,
    detail      text NOT NULL,
    raw         bytea NOT NULL,
    received_at timestamptz NOT NULL
);
CREATE INDEX usage_rejections_received_idx ON usage_rejections (received_at DESC);

-- +goose Down
DROP TABLE usage_rejections;
DROP TABLE usage_hourly;
DROP TABLE usage_events;
