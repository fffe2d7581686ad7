-- +goose Up
-- Auto top-up of prepaid credit (docs/auto-topup.md). One row per account that saved a card or the
-- setting: the Stripe customer its card is saved on, the card, "when the balance falls below
-- threshold, add amount", and whether the current crossing below the threshold has had its charge
-- (armed is false from the charge until the balance is seen at or above the threshold again, or the
-- charge's credit lands).
CREATE TABLE topup_settings (
    account_id         uuid PRIMARY KEY REFERENCES accounts (id),
    enabled            boolean NOT NULL DEFAULT false,
    threshold_cents    bigint NOT NULL DEFAULT 500 CHECK (threshold_cents BETWEEN 0 AND 1000000),
    amount_cents       bigint NOT NULL DEFAULT 2000 CHECK (amount_cents BETWEEN 500 AND 1000000),
    stripe_customer_id text NOT NULL DEFAULT '',
    payment_method_id  text NOT NULL DEFAULT '',
    card_brand         text NOT NULL DEFAULT '',
    card_last4         text NOT NULL DEFAULT '',
    notify_email       text NOT NULL DEFAULT '',
    armed              boolean NOT NULL DEFAULT true,
    stopped_reason     text NOT NULL DEFAULT '',
    stopped_at         timestamptz,
    updated_at         timestamptz NOT NULL,
    CHECK (NOT enabled OR payment_method_id <> '')
);

-- One charge per crossing: a row is created, in the transaction that locks the account's settings,
-- before Stripe is called; its id is the PaymentIntent's idempotency key. 'created' has not had
-- Stripe's answer yet (next_try_at says when a worker may call again with the same key), 'pending'
-- waits for the payment_intent.succeeded webhook that credits it, 'succeeded' was credited,
-- 'failed' was declined or needed the customer.
CREATE TABLE topup_attempts (
    id                    uuid PRIMARY KEY,
    account_id            uuid NOT NULL REFERENCES accounts (id),
    amount_cents          bigint NOT NULL CHECK (amount_cents > 0),
    stripe_customer_id    text NOT NULL,
    payment_method_id     text NOT NULL,
    status                text NOT NULL CHECK (status IN ('created', 'pending', 'succeeded', 'failed')),
    stripe_payment_intent text UNIQUE,
    failure               text NOT NULL DEFAULT '',
    credit_transaction_id uuid,
    next_try_at           timestamptz NOT NULL,
    created_at            timestamptz NOT NULL,
    updated_at            timestamptz NOT NULL
);
-- At most one charge of an account is open at a time, whatever the balance does meanwhile.
CREATE UNIQUE INDEX topup_attempts_one_open ON topup_attempts (account_id) WHERE status IN ('created', 'pending');
CREATE INDEX topup_attempts_to_call ON topup_attempts (next_try_at) WHERE status = 'created';
CREATE INDEX topup_attempts_by_account ON topup_attempts (account_id, created_at DESC);

-- +goose Down
DROP TABLE topup_attempts;
DROP TABLE topup_settings;
