-- +goose Up
-- The double-entry ledger. Amounts are signed integers of picodollars (1e-12 USD) in
-- NUMERIC(38,0), so that no sum in SQL overflows. Every transaction's postings sum to zero;
-- postings and transactions are never edited or deleted (a correction is a new transaction);
-- an account's cached balance is kept by a trigger on posting insert and always equals the
-- sum of its postings.

-- A ledger account: one per kind and owner. Customer credit and provider payable accounts
-- belong to an organisation; platform revenue and Stripe clearing belong to the platform.
CREATE TABLE ledger_accounts (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    kind             text NOT NULL CHECK (kind IN ('customer_credit', 'provider_payable', 'platform_revenue', 'stripe_clearing')),
    owner_account_id uuid REFERENCES accounts (id),
    balance          numeric(38, 0) NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL,
    CHECK ((kind IN ('customer_credit', 'provider_payable')) = (owner_account_id IS NOT NULL)),
    -- NULLS NOT DISTINCT: one platform account of each kind, not one per NULL owner.
    CONSTRAINT ledger_accounts_kind_owner_key UNIQUE NULLS NOT DISTINCT (kind, owner_account_id)
);
CREATE INDEX ledger_accounts_owner_idx ON ledger_accounts (owner_account_id);

-- A ledger transaction: one business event (a purchase, a batch of usage, a refund, an
-- adjustment, a payout). A non-NULL idempotency key makes it exactly-once.
CREATE TABLE ledger_transactions (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    kind            text NOT NULL CHECK (kind IN ('purchase', 'usage', 'refund', 'adjustment', 'payout')),
    idempotency_key text UNIQUE CHECK (length(idempotency_key) BETWEEN 1 AND 200),
    memo            text NOT NULL DEFAULT '' CHECK (length(memo) <= 500),
    created_by      uuid REFERENCES users (id),
    occurred_at     timestamptz NOT NULL,
    created_at      timestamptz NOT NULL
);

-- A posting moves a signed amount into one ledger account as part of one transaction.
CREATE TABLE ledger_postings (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    transaction_id    uuid NOT NULL REFERENCES ledger_transactions (id),
    ledger_account_id uuid NOT NULL REFERENCES ledger_accounts (id),
    amount            numeric(38, 0) NOT NULL
);
CREATE INDEX ledger_postings_transaction_idx ON ledger_postings (transaction_id);
CREATE INDEX ledger_postings_account_idx ON ledger_postings (ledger_account_id, id);

-- Each posting adds its amount to its account's cached balance, in the inserting database
-- transaction. Writers lock the accounts first (SELECT ... FOR UPDATE ORDER BY id), so the
-- update here never takes a lock they do not already hold.
-- +goose StatementBegin
CREATE FUNCTION ledger_postings_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE ledger_accounts SET balance = balance + NEW.amount WHERE id = NEW.ledger_account_id;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER ledger_postings_apply AFTER INSERT ON ledger_postings
    FOR EACH ROW EXECUTE FUNCTION ledger_postings_apply();

-- At commit, every transaction touched has postings and they sum to zero. Checked both when
-- a transaction is inserted (so that one with no postings fails) and when a posting is
-- inserted (so that postings added later to an old transaction must still balance it).
-- +goose StatementBegin
CREATE FUNCTION ledger_check_balanced() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    txn   uuid;
    n     bigint;
    total numeric;
BEGIN
    IF TG_TABLE_NAME = 'ledger_transactions' THEN
        txn := NEW.id;
    ELSE
        txn := NEW.transaction_id;
    END IF;
    SELECT count(*), coalesce(sum(amount), 0) INTO n, total FROM ledger_postings WHERE transaction_id = txn;
    IF n = 0 THEN
        RAISE EXCEPTION 'ledger transaction % has no postings', txn USING ERRCODE = 'check_violation';
    END IF;
    IF total <> 0 THEN
        RAISE EXCEPTION 'ledger transaction % does not balance: its postings sum to %', txn, total
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE CONSTRAINT TRIGGER ledger_transactions_balanced AFTER INSERT ON ledger_transactions
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ledger_check_balanced();
CREATE CONSTRAINT TRIGGER ledger_postings_balanced AFTER INSERT ON ledger_postings
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ledger_check_balanced();

-- Postings and transactions are append-only.
-- +goose StatementBegin
CREATE FUNCTION ledger_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% on % refused: the ledger is append-only; post a correcting transaction instead',
        TG_OP, TG_TABLE_NAME USING ERRCODE = 'restrict_violation';
END
$$;
-- +goose StatementEnd
CREATE TRIGGER ledger_postings_append_only BEFORE UPDATE OR DELETE ON ledger_postings
    FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
CREATE TRIGGER ledger_postings_no_truncate BEFORE TRUNCATE ON ledger_postings
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
CREATE TRIGGER ledger_transactions_append_only BEFORE UPDATE OR DELETE ON ledger_transactions
    FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
CREATE TRIGGER ledger_transactions_no_truncate BEFORE TRUNCATE ON ledger_transactions
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

-- A ledger account is never deleted, its kind and owner never change, and its balance
-- changes only through ledger_postings_apply (trigger depth 2), never by a direct UPDATE.
-- +goose StatementBegin
CREATE FUNCTION ledger_accounts_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE'
       AND NEW.id = OLD.id AND NEW.kind = OLD.kind
       AND NEW.owner_account_id IS NOT DISTINCT FROM OLD.owner_account_id
       AND NEW.created_at = OLD.created_at
       AND (NEW.balance = OLD.balance OR pg_trigger_depth() > 1) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION '% on ledger_accounts refused: balances change only by posting', TG_OP
        USING ERRCODE = 'restrict_violation';
END
$$;
-- +goose StatementEnd
CREATE TRIGGER ledger_accounts_guard BEFORE UPDATE OR DELETE ON ledger_accounts
    FOR EACH ROW EXECUTE FUNCTION ledger_accounts_guard();
CREATE TRIGGER ledger_accounts_no_truncate BEFORE TRUNCATE ON ledger_accounts
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

-- +goose Down
DROP TABLE ledger_postings;
DROP TABLE ledger_transactions;
DROP TABLE ledger_accounts;
DROP FUNCTION ledger_accounts_guard();
DROP FUNCTION ledger_refuse_change();
DROP FUNCTION ledger_check_balanced();
DROP FUNCTION ledger_postings_apply();
