-- +goose Up
-- API keys for the /v1 gateway. The key itself is shown once; only its SHA-256 is kept (a key
-- has 256 bits of randomness, so a fast hash is enough), with a visible prefix to tell keys
-- apart.
CREATE TABLE api_keys (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    account_id          uuid NOT NULL REFERENCES accounts (id),
    created_by          uuid NOT NULL REFERENCES users (id),
    name                text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    prefix              text NOT NULL,
    key_hash            bytea NOT NULL UNIQUE,
    monthly_limit_pico  numeric(38, 0) CHECK (monthly_limit_pico > 0),
    default_tier        text CHECK (default_tier IN ('realtime', 'standard', 'batch')),
    created_at          timestamptz NOT NULL,
    last_used_at        timestamptz,
    revoked_at          timestamptz
);
CREATE INDEX api_keys_account_idx ON api_keys (account_id, created_at DESC);

-- +goose Down
DROP TABLE api_keys;
