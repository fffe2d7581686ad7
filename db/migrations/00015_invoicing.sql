-- +goose Up
-- Invoices, provider statements, credit notes, the numbering of documents, customers' billing
-- details and the finance audit log (see docs/invoicing.md).
--
-- A document (invoice or statement) is a draft until finance approves it. A draft is computed
-- from the hourly rollups and the ledger and may be computed again; an approved one is issued
-- with its number and never changes: triggers refuse any change to an issued document or to
-- its lines, except recording its payment (issued -> paid) or its voiding (issued or
-- paid -> void), with who and when. Credit notes and the audit log are never changed at all.

-- A credit note that puts money back on a customer's prepaid credit is a ledger transaction of
-- its own kind. (The way down fails while such transactions exist: the ledger keeps them.)
ALTER TABLE ledger_transactions
    DROP CONSTRAINT ledger_transactions_kind_check,
    ADD CONSTRAINT ledger_transactions_kind_check
        CHECK (kind IN ('purchase', 'usage', 'refund', 'adjustment', 'payout', 'credit_note'));

-- A customer's details as they appear on its invoices. Copied onto an invoice when it is
-- issued; a draft shows the current ones.
CREATE TABLE billing_details (
    account_id uuid PRIMARY KEY REFERENCES accounts (id),
    legal_name text NOT NULL CHECK (length(legal_name) BETWEEN 1 AND 200),
    address    text NOT NULL CHECK (length(address) BETWEEN 1 AND 500),
    country    text NOT NULL CHECK (country ~ '^[A-Z]{2}$'),
    vat_id     text NOT NULL DEFAULT '' CHECK (vat_id ~ '^[A-Z0-9]{0,20}$'),
    po_number  text NOT NULL DEFAULT '' CHECK (length(po_number) <= 64),
    updated_by uuid REFERENCES users (id),
    updated_at timestamptz NOT NULL
);

-- The last number given in each series and year. A number is taken in the transaction that
-- issues its document and the row stays locked until that commits, so that numbers are
-- gapless: a transaction that fails gives its number back with the rest of its work.
CREATE TABLE document_sequences (
    series      text NOT NULL CHECK (series IN ('invoice', 'statement')),
    year        integer NOT NULL CHECK (year BETWEEN 2000 AND 9999),
    last_number bigint NOT NULL CHECK (last_number >= 1),
    PRIMARY KEY (series, year)
);

-- A period's close: the progress finance pages poll while it runs, and its outcome.
CREATE TABLE invoice_closes (
    period          date PRIMARY KEY CHECK (extract(day FROM period) = 1),
    status          text NOT NULL CHECK (status IN ('running', 'done', 'failed')),
    started_by      uuid REFERENCES users (id), -- NULL when the platform closed it by itself
    started_at      timestamptz NOT NULL,
    finished_at     timestamptz,
    runs            integer NOT NULL CHECK (runs >= 1),
    customers_total integer NOT NULL DEFAULT 0,
    customers_done  integer NOT NULL DEFAULT 0,
    providers_total integer NOT NULL DEFAULT 0,
    providers_done  integer NOT NULL DEFAULT 0,
    invoices        integer NOT NULL DEFAULT 0, -- drafts written by the last run
    statements      integer NOT NULL DEFAULT 0,
    left_issued     integer NOT NULL DEFAULT 0, -- documents already issued, which the run left alone
    problem         text NOT NULL DEFAULT ''
);

-- A customer's invoice for a calendar month (UTC). Amounts of lines and totals are cents;
-- the balances are exact picodollars of the ledger, signed as the postings are.
CREATE TABLE invoices (
    id                   uuid PRIMARY KEY,
    account_id           uuid NOT NULL REFERENCES accounts (id),
    period               date NOT NULL CHECK (extract(day FROM period) = 1),
    status               text NOT NULL CHECK (status IN ('draft', 'issued', 'paid', 'void')),
    number               text UNIQUE,
    number_year          integer,
    number_seq           bigint,
    replaces_invoice_id  uuid REFERENCES invoices (id),
    currency             text NOT NULL DEFAULT 'usd' CHECK (currency = 'usd'),
    total_cents          bigint NOT NULL,
    amount_due_cents     bigint NOT NULL CHECK (amount_due_cents >= 0),
    opening_balance_pico numeric(38, 0) NOT NULL,
    purchases_pico       numeric(38, 0) NOT NULL,
    refunds_pico         numeric(38, 0) NOT NULL,
    adjustments_pico     numeric(38, 0) NOT NULL,
    credit_notes_pico    numeric(38, 0) NOT NULL,
    usage_charged_pico   numeric(38, 0) NOT NULL,
    closing_balance_pico numeric(38, 0) NOT NULL,
    -- NULL on a draft that shows the customer's current PO number; set on a regenerated draft,
    -- which keeps the one of the invoice it replaces, and on every issued invoice.
    po_number            text CHECK (length(po_number) <= 64),
    buyer_legal_name     text,
    buyer_address        text,
    buyer_country        text,
    buyer_vat_id         text,
    seller_name          text,
    seller_address       text,
    seller_country       text,
    seller_vat_id        text,
    flags                text[] NOT NULL DEFAULT '{}',
    computed_at          timestamptz NOT NULL,
    created_at           timestamptz NOT NULL,
    issued_at            timestamptz,
    issued_by            uuid REFERENCES users (id),
    paid_at              timestamptz,
    paid_by              uuid REFERENCES users (id),
    payment_reference    text CHECK (length(payment_reference) <= 200),
    voided_at            timestamptz,
    voided_by            uuid REFERENCES users (id),
    void_reason          text CHECK (void_reason IN ('not_delivered', 'wrong_details', 'other')),
    void_note            text CHECK (length(void_note) <= 500),
    UNIQUE (number_year, number_seq),
    CHECK ((status = 'draft') = (number IS NULL)),
    CHECK ((status = 'draft') = (issued_at IS NULL)),
    CHECK (status = 'draft' OR (po_number IS NOT NULL AND buyer_legal_name IS NOT NULL AND seller_name IS NOT NULL)),
    CHECK (status <> 'paid' OR paid_at IS NOT NULL),
    CHECK ((status = 'void') = (voided_at IS NOT NULL AND void_reason IS NOT NULL)),
    CHECK (closing_balance_pico = opening_balance_pico + purchases_pico + refunds_pico + adjustments_pico
        + credit_notes_pico + usage_charged_pico)
);
-- One invoice per account and period, whatever runs the close and however often: a voided
-- one steps aside for the invoice that replaces it.
CREATE UNIQUE INDEX invoices_one_per_period ON invoices (account_id, period) WHERE status <> 'void';
CREATE INDEX invoices_period_idx ON invoices (period, status);

-- A credit note cancels an issued invoice that is voided. It is numbered after its invoice
-- (<number>-CN01) and never changes.
CREATE TABLE credit_notes (
    id                     uuid PRIMARY KEY,
    invoice_id             uuid NOT NULL REFERENCES invoices (id),
    seq                    integer NOT NULL CHECK (seq BETWEEN 1 AND 99),
    number                 text NOT NULL UNIQUE,
    account_id             uuid NOT NULL REFERENCES accounts (id),
    period                 date NOT NULL,
    reason                 text NOT NULL CHECK (reason IN ('not_delivered', 'wrong_details', 'other')),
    note                   text NOT NULL DEFAULT '' CHECK (length(note) <= 500),
    amount_cents           bigint NOT NULL, -- the voided invoice's total, which the note cancels
    credited_pico          numeric(38, 0) NOT NULL CHECK (credited_pico >= 0), -- put back on the prepaid credit
    ledger_transaction_id  uuid REFERENCES ledger_transactions (id),
    regenerated_invoice_id uuid NOT NULL REFERENCES invoices (id),
    po_number              text NOT NULL,
    buyer_legal_name       text NOT NULL,
    buyer_address          text NOT NULL,
    buyer_country          text NOT NULL,
    buyer_vat_id           text NOT NULL,
    seller_name            text NOT NULL,
    seller_address         text NOT NULL,
    seller_country         text NOT NULL,
    seller_vat_id          text NOT NULL,
    issued_at              timestamptz NOT NULL,
    issued_by              uuid NOT NULL REFERENCES users (id),
    UNIQUE (invoice_id, seq),
    CHECK ((credited_pico = 0) = (ledger_transaction_id IS NULL))
);
CREATE INDEX credit_notes_account_idx ON credit_notes (account_id, period);

-- What a credit note took back from each provider's payable: the provider's share of the
-- credited usage.
CREATE TABLE credit_note_clawbacks (
    credit_note_id      uuid NOT NULL REFERENCES credit_notes (id),
    provider_account_id uuid NOT NULL REFERENCES accounts (id),
    amount_pico         numeric(38, 0) NOT NULL CHECK (amount_pico > 0),
    PRIMARY KEY (credit_note_id, provider_account_id)
);

-- An invoice's lines: usage of its period per tier, model and price version; usage of an
-- earlier period metered after that period's invoice was issued; and credits given by credit
-- notes for the period. The document's total is the sum of amount_cents.
CREATE TABLE invoice_lines (
    invoice_id              uuid NOT NULL REFERENCES invoices (id),
    line_no                 integer NOT NULL CHECK (line_no >= 1),
    kind                    text NOT NULL CHECK (kind IN ('usage', 'late_usage', 'credit')),
    usage_period            date,
    tier                    text NOT NULL DEFAULT '',
    model                   text NOT NULL DEFAULT '',
    price_id                bigint NOT NULL DEFAULT 0,
    input_price             bigint, -- micro-dollars per million tokens; NULL where the price version is unknown
    output_price            bigint,
    requests                bigint NOT NULL DEFAULT 0,
    input_tokens            bigint NOT NULL DEFAULT 0,
    output_tokens           bigint NOT NULL DEFAULT 0,
    uncharged_requests      bigint NOT NULL DEFAULT 0,
    uncharged_input_tokens  bigint NOT NULL DEFAULT 0,
    uncharged_output_tokens bigint NOT NULL DEFAULT 0,
    charge_pico             numeric(38, 0) NOT NULL,
    payable_pico            numeric(38, 0) NOT NULL,
    amount_cents            bigint NOT NULL,
    description             text NOT NULL,
    credit_note_id          uuid REFERENCES credit_notes (id),
    PRIMARY KEY (invoice_id, line_no),
    CHECK ((kind = 'credit') = (credit_note_id IS NOT NULL)),
    CHECK ((kind = 'credit') = (usage_period IS NULL))
);

-- What each provider is owed of an invoice's usage, per period of the usage: the share a
-- credit note takes back when the service was not delivered.
CREATE TABLE invoice_provider_shares (
    invoice_id          uuid NOT NULL REFERENCES invoices (id),
    usage_period        date NOT NULL,
    provider_account_id uuid NOT NULL REFERENCES accounts (id),
    charge_pico         numeric(38, 0) NOT NULL,
    payable_pico        numeric(38, 0) NOT NULL,
    PRIMARY KEY (invoice_id, usage_period, provider_account_id)
);

-- The period's movements of the customer's credit other than usage, as the invoice shows them:
-- credits bought, refunds, adjustments and credit notes, each its ledger transaction.
CREATE TABLE invoice_ledger_entries (
    invoice_id     uuid NOT NULL REFERENCES invoices (id),
    transaction_id uuid NOT NULL REFERENCES ledger_transactions (id),
    kind           text NOT NULL,
    memo           text NOT NULL,
    occurred_at    timestamptz NOT NULL,
    amount_pico    numeric(38, 0) NOT NULL,
    PRIMARY KEY (invoice_id, transaction_id)
);

-- A provider's statement for a calendar month: what its offerings earned, what credit notes
-- took back, and what was carried from earlier statements under the minimum payout.
CREATE TABLE statements (
    id                        uuid PRIMARY KEY,
    provider_account_id       uuid NOT NULL REFERENCES accounts (id),
    period                    date NOT NULL CHECK (extract(day FROM period) = 1),
    status                    text NOT NULL CHECK (status IN ('draft', 'issued', 'paid', 'void')),
    number                    text UNIQUE,
    number_year               integer,
    number_seq                bigint,
    replaces_statement_id     uuid REFERENCES statements (id),
    currency                  text NOT NULL DEFAULT 'usd' CHECK (currency = 'usd'),
    earnings_cents            bigint NOT NULL,
    late_earnings_cents       bigint NOT NULL,
    clawbacks_cents           bigint NOT NULL CHECK (clawbacks_cents <= 0),
    carried_in_cents          bigint NOT NULL,
    carried_from_statement_id uuid REFERENCES statements (id),
    net_cents                 bigint NOT NULL,
    payout_cents              bigint NOT NULL CHECK (payout_cents >= 0),
    carried_out_cents         bigint NOT NULL,
    minimum_payout_cents      bigint NOT NULL CHECK (minimum_payout_cents >= 0),
    opening_payable_pico      numeric(38, 0) NOT NULL,
    usage_posted_pico         numeric(38, 0) NOT NULL,
    credit_notes_posted_pico  numeric(38, 0) NOT NULL,
    payouts_posted_pico       numeric(38, 0) NOT NULL,
    other_posted_pico         numeric(38, 0) NOT NULL,
    closing_payable_pico      numeric(38, 0) NOT NULL,
    payee_legal_name          text,
    payee_address             text,
    payee_country             text,
    payee_vat_id              text,
    payer_name                text,
    payer_address             text,
    payer_country             text,
    payer_vat_id              text,
    flags                     text[] NOT NULL DEFAULT '{}',
    computed_at               timestamptz NOT NULL,
    created_at                timestamptz NOT NULL,
    issued_at                 timestamptz,
    issued_by                 uuid REFERENCES users (id),
    paid_at                   timestamptz,
    paid_by                   uuid REFERENCES users (id),
    payment_reference         text CHECK (length(payment_reference) <= 200),
    voided_at                 timestamptz,
    voided_by                 uuid REFERENCES users (id),
    void_reason               text CHECK (void_reason IN ('wrong_details', 'other')),
    void_note                 text CHECK (length(void_note) <= 500),
    UNIQUE (number_year, number_seq),
    CHECK ((status = 'draft') = (number IS NULL)),
    CHECK ((status = 'draft') = (issued_at IS NULL)),
    CHECK (status = 'draft' OR (payee_legal_name IS NOT NULL AND payer_name IS NOT NULL)),
    CHECK (status <> 'paid' OR paid_at IS NOT NULL),
    CHECK ((status = 'void') = (voided_at IS NOT NULL AND void_reason IS NOT NULL)),
    CHECK (net_cents = carried_in_cents + earnings_cents + late_earnings_cents + clawbacks_cents),
    CHECK (payout_cents + carried_out_cents = net_cents),
    CHECK (closing_payable_pico = opening_payable_pico + usage_posted_pico + credit_notes_posted_pico
        + payouts_posted_pico + other_posted_pico)
);
CREATE UNIQUE INDEX statements_one_per_period ON statements (provider_account_id, period) WHERE status <> 'void';
CREATE INDEX statements_period_idx ON statements (period, status);

-- A statement's lines: earnings per offering and asks, earnings of an earlier period metered
-- after that period's statement was issued, and clawbacks by credit notes.
CREATE TABLE statement_lines (
    statement_id            uuid NOT NULL REFERENCES statements (id),
    line_no                 integer NOT NULL CHECK (line_no >= 1),
    kind                    text NOT NULL CHECK (kind IN ('usage', 'late_usage', 'clawback')),
    usage_period            date,
    offering_id             uuid,
    model                   text NOT NULL DEFAULT '',
    ask_input_price         bigint NOT NULL DEFAULT 0, -- micro-dollars per million tokens
    ask_output_price        bigint NOT NULL DEFAULT 0,
    requests                bigint NOT NULL DEFAULT 0,
    input_tokens            bigint NOT NULL DEFAULT 0,
    output_tokens           bigint NOT NULL DEFAULT 0,
    uncharged_requests      bigint NOT NULL DEFAULT 0,
    uncharged_input_tokens  bigint NOT NULL DEFAULT 0,
    uncharged_output_tokens bigint NOT NULL DEFAULT 0,
    payable_pico            numeric(38, 0) NOT NULL,
    amount_cents            bigint NOT NULL,
    description             text NOT NULL,
    transaction_id          uuid REFERENCES ledger_transactions (id),
    credit_note_id          uuid REFERENCES credit_notes (id),
    PRIMARY KEY (statement_id, line_no),
    CHECK ((kind = 'clawback') = (transaction_id IS NOT NULL)),
    CHECK ((kind = 'clawback') = (usage_period IS NULL))
);

-- An issued document never changes, and nor do its parts. Of an issued invoice or statement
-- only its settlement may be recorded, once: its payment (issued -> paid) or its voiding
-- (issued or paid -> void), with who, when and why.
-- +goose StatementBegin
CREATE FUNCTION finance_document_guard() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    settlement text[] := ARRAY['status', 'paid_at', 'paid_by', 'payment_reference',
        'voided_at', 'voided_by', 'void_reason', 'void_note'];
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF OLD.status = 'draft' THEN
            RETURN OLD;
        END IF;
        RAISE EXCEPTION '% % is % and is never deleted', TG_TABLE_NAME, OLD.number, OLD.status
            USING ERRCODE = 'restrict_violation';
    END IF;
    IF OLD.status = 'draft' THEN
        RETURN NEW;
    END IF;
    IF (to_jsonb(NEW) - settlement) IS DISTINCT FROM (to_jsonb(OLD) - settlement) THEN
        RAISE EXCEPTION '% % is % and never changes: only its payment or its voiding is recorded',
            TG_TABLE_NAME, OLD.number, OLD.status USING ERRCODE = 'restrict_violation';
    END IF;
    IF NOT ((OLD.status = 'issued' AND NEW.status IN ('paid', 'void'))
            OR (OLD.status = 'paid' AND NEW.status = 'void')) THEN
        RAISE EXCEPTION '% %: % -> % is not a move an issued document makes', TG_TABLE_NAME, OLD.number,
            OLD.status, NEW.status USING ERRCODE = 'restrict_violation';
    END IF;
    IF OLD.status = 'paid' AND (NEW.paid_at, NEW.paid_by, NEW.payment_reference)
            IS DISTINCT FROM (OLD.paid_at, OLD.paid_by, OLD.payment_reference) THEN
        RAISE EXCEPTION '% %: its payment is recorded and stays', TG_TABLE_NAME, OLD.number
            USING ERRCODE = 'restrict_violation';
    END IF;
    IF NEW.status = 'paid' AND (NEW.voided_at, NEW.voided_by, NEW.void_reason, NEW.void_note)
            IS DISTINCT FROM (OLD.voided_at, OLD.voided_by, OLD.void_reason, OLD.void_note) THEN
        RAISE EXCEPTION '% %: a payment records no voiding', TG_TABLE_NAME, OLD.number
            USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER invoices_guard BEFORE UPDATE OR DELETE ON invoices
    FOR EACH ROW EXECUTE FUNCTION finance_document_guard();
CREATE TRIGGER statements_guard BEFORE UPDATE OR DELETE ON statements
    FOR EACH ROW EXECUTE FUNCTION finance_document_guard();

-- The parts of a document (its lines, shares and ledger entries) change only while it is a
-- draft.
-- +goose StatementBegin
CREATE FUNCTION invoice_part_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' AND (SELECT status FROM invoices WHERE id = OLD.invoice_id) IS DISTINCT FROM 'draft' THEN
        RAISE EXCEPTION '% of an issued invoice never change', TG_TABLE_NAME USING ERRCODE = 'restrict_violation';
    END IF;
    IF TG_OP <> 'DELETE' AND (SELECT status FROM invoices WHERE id = NEW.invoice_id) IS DISTINCT FROM 'draft' THEN
        RAISE EXCEPTION '% of an issued invoice never change', TG_TABLE_NAME USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN coalesce(NEW, OLD);
END
$$;
CREATE FUNCTION statement_part_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' AND (SELECT status FROM statements WHERE id = OLD.statement_id) IS DISTINCT FROM 'draft' THEN
        RAISE EXCEPTION '% of an issued statement never change', TG_TABLE_NAME USING ERRCODE = 'restrict_violation';
    END IF;
    IF TG_OP <> 'DELETE' AND (SELECT status FROM statements WHERE id = NEW.statement_id) IS DISTINCT FROM 'draft' THEN
        RAISE EXCEPTION '% of an issued statement never change', TG_TABLE_NAME USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN coalesce(NEW, OLD);
END
$$;
-- +goose StatementEnd
CREATE TRIGGER invoice_lines_guard BEFORE INSERT OR UPDATE OR DELETE ON invoice_lines
    FOR EACH ROW EXECUTE FUNCTION invoice_part_guard();
CREATE TRIGGER invoice_provider_shares_guard BEFORE INSERT OR UPDATE OR DELETE ON invoice_provider_shares
    FOR EACH ROW EXECUTE FUNCTION invoice_part_guard();
CREATE TRIGGER invoice_ledger_entries_guard BEFORE INSERT OR UPDATE OR DELETE ON invoice_ledger_entries
    FOR EACH ROW EXECUTE FUNCTION invoice_part_guard();
CREATE TRIGGER statement_lines_guard BEFORE INSERT OR UPDATE OR DELETE ON statement_lines
    FOR EACH ROW EXECUTE FUNCTION statement_part_guard();

-- Every finance action, with who, when, what and the before and after. Rows are only ever
-- added.
CREATE TABLE audit_log (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at           timestamptz NOT NULL,
    actor_id     uuid REFERENCES users (id), -- NULL: the platform itself (an automatic close)
    action       text NOT NULL CHECK (action ~ '^[a-z][a-z_]{0,39}$'),
    subject_kind text NOT NULL CHECK (length(subject_kind) BETWEEN 1 AND 40),
    subject_id   text NOT NULL CHECK (length(subject_id) <= 200),
    summary      text NOT NULL CHECK (length(summary) <= 1000),
    before       jsonb,
    after        jsonb
);
CREATE INDEX audit_log_at_idx ON audit_log (at DESC, id DESC);
CREATE INDEX audit_log_action_idx ON audit_log (action, at DESC);
CREATE INDEX audit_log_actor_idx ON audit_log (actor_id, at DESC);

-- +goose StatementBegin
CREATE FUNCTION finance_record_kept() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% on % refused: its rows are kept as they were written', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'restrict_violation';
END
$$;
-- +goose StatementEnd
CREATE TRIGGER audit_log_kept BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION finance_record_kept();
CREATE TRIGGER audit_log_not_truncated BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION finance_record_kept();
CREATE TRIGGER credit_notes_kept BEFORE UPDATE OR DELETE ON credit_notes
    FOR EACH ROW EXECUTE FUNCTION finance_record_kept();
CREATE TRIGGER credit_note_clawbacks_kept BEFORE UPDATE OR DELETE ON credit_note_clawbacks
    FOR EACH ROW EXECUTE FUNCTION finance_record_kept();
CREATE TRIGGER invoices_not_truncated BEFORE TRUNCATE ON invoices
    FOR EACH STATEMENT EXECUTE FUNCTION finance_record_kept();
CREATE TRIGGER statements_not_truncated BEFORE TRUNCATE ON statements
    FOR EACH STATEMENT EXECUTE FUNCTION finance_record_kept();
CREATE TRIGGER credit_notes_not_truncated BEFORE TRUNCATE ON credit_notes
    FOR EACH STATEMENT EXECUTE FUNCTION finance_record_kept();

-- +goose Down
DROP TABLE audit_log;
DROP TABLE statement_lines;
DROP TABLE invoice_ledger_entries;
DROP TABLE invoice_provider_shares;
DROP TABLE invoice_lines;
DROP TABLE credit_note_clawbacks;
DROP TABLE credit_notes;
DROP TABLE statements;
DROP TABLE invoices;
DROP TABLE invoice_closes;
DROP TABLE document_sequences;
DROP TABLE billing_details;
DROP FUNCTION finance_record_kept();
DROP FUNCTION statement_part_guard();
DROP FUNCTION invoice_part_guard();
DROP FUNCTION finance_document_guard();
ALTER TABLE ledger_transactions
    DROP CONSTRAINT ledger_transactions_kind_check,
    ADD CONSTRAINT ledger_transactions_kind_check
        CHECK (kind IN ('purchase', 'usage', 'refund', 'adjustment', 'payout'));
