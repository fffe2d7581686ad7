-- +goose Up
-- A purchase of prepaid credits through Stripe Checkout. The platform records it as pending
-- before it creates the Checkout Session; the webhook credits it once, matching this row's
-- account and amount, whatever events arrive and however often.
CREATE TABLE credit_purchases (
    id                      uuid PRIMARY KEY,
    account_id              uuid NOT NULL REFERENCES accounts (id),
    created_by              uuid NOT NULL REFERENCES users (id),
    amount_cents            bigint NOT NULL CHECK (amount_cents BETWEEN 500 AND 1000000),
    currency                text NOT NULL DEFAULT 'usd' CHECK (currency = 'usd'),
    status                  text NOT NULL CHECK (status IN ('pending', 'awaiting_payment', 'paid', 'failed')),
    stripe_session_id       text UNIQUE,
    stripe_payment_intent   text,
    credit_transaction_id   uuid REFERENCES ledger_transactions (id),
    refunded_cents          bigint NOT NULL DEFAULT 0 CHECK (refunded_cents >= 0),
    problem                 text NOT NULL DEFAULT '',
    created_at              timestamptz NOT NULL,
    updated_at              timestamptz NOT NULL
);
CREATE INDEX credit_purchases_account_idx ON credit_purchases (account_id, created_at DESC);
CREATE INDEX credit_purchases_payment_intent_idx ON credit_purchases (stripe_payment_intent);

-- Every Stripe event received, stored as it came (the raw body), for audit. A redelivery of
-- the same event counts a delivery and keeps the first body.
CREATE TABLE stripe_events (
    id                text PRIMARY KEY,
    type              text NOT NULL,
    payload           bytea NOT NULL,
    deliveries        integer NOT NULL DEFAULT 1,
    outcome           text NOT NULL DEFAULT '',
    first_received_at timestamptz NOT NULL,
    last_received_at  timestamptz NOT NULL
);
CREATE INDEX stripe_events_received_idx ON stripe_events (first_received_at DESC);

-- +goose Down
DROP TABLE stripe_events;
DROP TABLE credit_purchases;
