-- +goose Up
-- What the /v1 gateway saw of each request it sent to a rig: one row per attempt that reached
-- the rig's agent (a failover leaves a row for the attempt that failed and one for the next).
-- The tokens are those of the usage in the response as it passed through the gateway, NULL
-- when none came by (a client that went away mid-stream, a refused request). Reconciliation
-- compares them with the metered usage_events row of the same request id: a difference of
-- more than 1% sets flagged_at and flag_reason for an admin to review (docs/failure-cases.md,
-- case 17).
CREATE TABLE gateway_requests (
    request_id    text PRIMARY KEY,
    account_id    uuid NOT NULL REFERENCES accounts (id),
    api_key_id    uuid NOT NULL REFERENCES api_keys (id),
    offering_id   uuid NOT NULL REFERENCES offerings (id),
    tier          text NOT NULL CHECK (tier IN ('realtime', 'standard', 'batch')),
    model         text NOT NULL,
    http_status   integer NOT NULL,
    status        text NOT NULL CHECK (status IN ('ok', 'error', 'canceled', 'failed_over')),
    input_tokens  bigint CHECK (input_tokens >= 0),
    output_tokens bigint CHECK (output_tokens >= 0),
    ttft_ms       double precision,
    duration_ms   double precision NOT NULL,
    at            timestamptz NOT NULL, -- when the attempt ended
    reconciled_at timestamptz,
    flagged_at    timestamptz,
    flag_reason   text
);
CREATE INDEX gateway_requests_unreconciled_idx ON gateway_requests (at) WHERE reconciled_at IS NULL;
CREATE INDEX gateway_requests_flagged_idx ON gateway_requests (flagged_at DESC) WHERE flagged_at IS NOT NULL;

-- Admission sums a key's metered charges of the month to hold it to its monthly limit.
CREATE INDEX usage_events_api_key_idx ON usage_events (api_key_id, occurred_at) INCLUDE (charge_pico);

-- +goose Down
DROP INDEX usage_events_api_key_idx;
DROP TABLE gateway_requests;
