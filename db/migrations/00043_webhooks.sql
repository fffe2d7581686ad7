-- +goose Up
-- Outgoing webhooks, signed as the Standard Webhooks specification says (see docs/webhooks.md).

-- An account's endpoint: where its events are POSTed. The signing secret is kept sealed
-- (AES-256-GCM under the platform's webhook key, nonce first), because signing needs the secret
-- itself; secret_hint is its first characters, to tell endpoints apart. event_types empty: every
-- event type.
CREATE TABLE webhook_endpoints (
    id            uuid PRIMARY KEY,
    account_id    uuid NOT NULL REFERENCES accounts (id),
    url           text NOT NULL CHECK (length(url) BETWEEN 8 AND 2000),
    description   text NOT NULL DEFAULT '' CHECK (length(description) <= 200),
    event_types   text[] NOT NULL DEFAULT '{}',
    secret_sealed bytea NOT NULL,
    secret_hint   text NOT NULL CHECK (length(secret_hint) <= 20),
    enabled       boolean NOT NULL DEFAULT true,
    created_by    uuid NOT NULL REFERENCES users (id),
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL
);
CREATE INDEX webhook_endpoints_account_idx ON webhook_endpoints (account_id, created_at);

-- An event that happened to an account, once per (account, key): the key is the caller's event id,
-- so that a retried caller emits once. id is the webhook-id every delivery of it carries.
CREATE TABLE webhook_events (
    id          text PRIMARY KEY CHECK (id ~ '^msg_[0-9a-f]{32}$'),
    account_id  uuid NOT NULL REFERENCES accounts (id),
    event_key   text NOT NULL CHECK (length(event_key) BETWEEN 1 AND 200),
    type        text NOT NULL CHECK (type ~ '^[a-z_]+(\.[a-z_]+)+$'),
    payload     jsonb NOT NULL,
    created_at  timestamptz NOT NULL,
    UNIQUE (account_id, event_key)
);

-- One event to one endpoint. pending: due at next_attempt_at, or held by a worker until
-- lease_until (lease names the holder); delivered: an attempt got a 2xx; failed: the retry
-- schedule ran out. tries counts the attempts since the delivery was made or last replayed;
-- replays counts the times its account sent it again.
CREATE TABLE webhook_deliveries (
    id               uuid PRIMARY KEY,
    event_id         text NOT NULL REFERENCES webhook_events (id) ON DELETE CASCADE,
    endpoint_id      uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    account_id       uuid NOT NULL REFERENCES accounts (id),
    status           text NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    tries            integer NOT NULL DEFAULT 0 CHECK (tries >= 0),
    replays          integer NOT NULL DEFAULT 0 CHECK (replays >= 0),
    next_attempt_at  timestamptz,
    lease            uuid,
    lease_until      timestamptz,
    last_status_code integer,
    last_error       text NOT NULL DEFAULT '' CHECK (length(last_error) <= 1000),
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    finished_at      timestamptz,
    UNIQUE (event_id, endpoint_id),
    CHECK ((status = 'pending') = (next_attempt_at IS NOT NULL))
);
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_account_idx ON webhook_deliveries (account_id, created_at DESC);

-- Every attempt of a delivery: what was sent where, and what came back. status_code is NULL
-- when no answer came; response_body is its first 4 KB.
CREATE TABLE webhook_attempts (
    id            uuid PRIMARY KEY,
    delivery_id   uuid NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    account_id    uuid NOT NULL REFERENCES accounts (id),
    url           text NOT NULL,
    attempted_at  timestamptz NOT NULL,
    duration_ms   integer NOT NULL CHECK (duration_ms >= 0),
    status_code   integer,
    error         text NOT NULL DEFAULT '' CHECK (length(error) <= 1000),
    response_body text NOT NULL DEFAULT '',
    replay        boolean NOT NULL DEFAULT false
);
CREATE INDEX webhook_attempts_delivery_idx ON webhook_attempts (delivery_id, attempted_at);

-- +goose Down
DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_events;
DROP TABLE webhook_endpoints;
