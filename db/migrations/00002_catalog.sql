-- +goose Up
-- An offering is one provider's rig serving one model. Its tier is claimed at listing from
-- the provider's own figures and later earned from measured traffic.
-- Prices are integers of micro-dollars per million tokens.
CREATE TABLE offerings (
    id                      uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    provider_account_id     uuid NOT NULL REFERENCES accounts (id),
    gpu                     text NOT NULL,
    gpu_count               integer NOT NULL CHECK (gpu_count BETWEEN 1 AND 8),
    region                  text NOT NULL,
    model                   text NOT NULL CHECK (length(model) BETWEEN 1 AND 200),
    ask_micro_usd_per_mtok  bigint NOT NULL CHECK (ask_micro_usd_per_mtok > 0),
    agent_url               text NOT NULL,
    claimed_ttft_p50_ms     double precision CHECK (claimed_ttft_p50_ms > 0),
    claimed_ttft_p99_ms     double precision CHECK (claimed_ttft_p99_ms > 0),
    claimed_tokens_per_sec  double precision CHECK (claimed_tokens_per_sec > 0),
    measured_requests       bigint NOT NULL DEFAULT 0,
    measured_ttft_p50_ms    double precision,
    measured_ttft_p99_ms    double precision,
    measured_tokens_per_sec double precision,
    tier                    text NOT NULL CHECK (tier IN ('realtime', 'standard', 'batch')),
    status                  text NOT NULL CHECK (status IN ('active', 'paused', 'delisted')),
    source                  text NOT NULL DEFAULT '',
    seed_key                text UNIQUE,
    created_at              timestamptz NOT NULL,
    updated_at              timestamptz NOT NULL
);
CREATE INDEX offerings_provider_idx ON offerings (provider_account_id);
CREATE INDEX offerings_listed_idx ON offerings (tier, model) WHERE status <> 'delisted';

-- The price book: what customers pay per tier, effective from a date. Rows are never edited;
-- a change is a new row with a later effective_from.
CREATE TABLE prices (
    id                        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tier                      text NOT NULL CHECK (tier IN ('realtime', 'standard', 'batch')),
    input_micro_usd_per_mtok  bigint NOT NULL CHECK (input_micro_usd_per_mtok >= 0),
    output_micro_usd_per_mtok bigint NOT NULL CHECK (output_micro_usd_per_mtok >= 0),
    effective_from            timestamptz NOT NULL,
    created_by                uuid REFERENCES users (id),
    created_at                timestamptz NOT NULL,
    UNIQUE (tier, effective_from)
);

-- +goose Down
DROP TABLE prices;
DROP TABLE offerings;
