-- +goose Up
-- Payouts to providers through Stripe Connect (see docs/payouts.md).

-- A provider's connected Stripe account (Connect Express): one per provider, created once at
-- Stripe. stripe_account_id is NULL until Stripe answered the creation; creating_since marks a
-- creation under way, so that a second click waits for it instead of creating another.
-- details_submitted and payouts_enabled are Stripe's description of the account as of
-- observed_at: a description older than the one recorded changes nothing.
CREATE TABLE provider_stripe_accounts (
    provider_account_id uuid PRIMARY KEY REFERENCES accounts (id),
    stripe_account_id   text UNIQUE CHECK (stripe_account_id ~ '^acct_[A-Za-z0-9]{1,64}$'),
    email               text NOT NULL CHECK (length(email) BETWEEN 3 AND 320),
    country             text NOT NULL CHECK (country ~ '^[A-Z]{2}$'),
    details_submitted   boolean NOT NULL DEFAULT false,
    payouts_enabled     boolean NOT NULL DEFAULT false,
    observed_at         timestamptz,
    onboarded_at        timestamptz, -- when both were first seen true
    creating_since      timestamptz,
    last_error          text NOT NULL DEFAULT '' CHECK (length(last_error) <= 1000),
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL
);

-- A payout pays one provider statement, once: statement_id is unique. The amount, the
-- provider and the statement's number and period are fixed when the payout is first made,
-- because every attempt sends Stripe the same idempotency key, which must carry the same
-- parameters. pending: an attempt is under way (attempt_started_at), or one ended without
-- the platform learning its outcome (a crash). failed: the last attempt was refused, or got no
-- answer (in_doubt: a transfer may exist; the next attempt looks for it before it sends
-- anything). paid: the transfer exists and the ledger posted it, in the same database
-- transaction that set paid.
CREATE TABLE payouts (
    id                    uuid PRIMARY KEY,
    statement_id          text NOT NULL UNIQUE CHECK (statement_id ~ '^[A-Za-z0-9_-]{1,100}$'),
    statement_number      text NOT NULL CHECK (length(statement_number) BETWEEN 1 AND 64),
    period                text NOT NULL CHECK (period ~ '^[0-9]{4}-(0[1-9]|1[0-2])$'),
    provider_account_id   uuid NOT NULL REFERENCES accounts (id),
    amount_cents          bigint NOT NULL CHECK (amount_cents > 0),
    currency              text NOT NULL DEFAULT 'usd' CHECK (currency = 'usd'),
    status                text NOT NULL CHECK (status IN ('pending', 'paid', 'failed')),
    stripe_account_id     text,
    stripe_transfer_id    text UNIQUE,
    ledger_transaction_id uuid UNIQUE REFERENCES ledger_transactions (id),
    attempts              integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_error            text NOT NULL DEFAULT '' CHECK (length(last_error) <= 1000),
    in_doubt              boolean NOT NULL DEFAULT false,
    attempt_started_at    timestamptz,
    created_at            timestamptz NOT NULL,
    updated_at            timestamptz NOT NULL,
    paid_at               timestamptz,
    CHECK ((status = 'paid') = (stripe_transfer_id IS NOT NULL AND ledger_transaction_id IS NOT NULL AND paid_at IS NOT NULL)),
    CHECK (status <> 'paid' OR NOT in_doubt)
);
CREATE INDEX payouts_provider_idx ON payouts (provider_account_id, created_at DESC);
CREATE INDEX payouts_created_idx ON payouts (created_at DESC);

-- A paid payout is final: money left and the ledger says so. It is never changed or deleted,
-- and no payout is deleted.
-- +goose StatementBegin
CREATE FUNCTION payouts_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.status <> 'paid' THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION '% on payouts refused: % payouts are kept as they are', TG_OP,
        CASE WHEN TG_OP = 'DELETE' THEN 'all' ELSE 'paid' END USING ERRCODE = 'restrict_violation';
END
$$;
-- +goose StatementEnd
CREATE TRIGGER payouts_guard BEFORE UPDATE OR DELETE ON payouts
    FOR EACH ROW EXECUTE FUNCTION payouts_guard();

-- +goose Down
DROP TABLE payouts;
DROP FUNCTION payouts_guard();
DROP TABLE provider_stripe_accounts;
