-- +goose Up
-- Finance's resolution of a request the meter flagged with an excess: the rig reported more
-- tokens than were billed (usage_events.reported_* above input_tokens or output_tokens). Until
-- it is resolved, the request's earnings are held out of its provider's statements; released,
-- they are paid on the statement of the month of the release; clawed back, they are taken from
-- the provider's payable and credited to the customer by the ledger transaction named here
-- (docs/invoicing.md, "Flags and held earnings"). Owned by package invoicing. A resolution is
-- final: it is never changed or deleted.
CREATE TABLE flag_resolutions (
    request_id            text PRIMARY KEY,
    account_id            uuid NOT NULL REFERENCES accounts (id),
    provider_account_id   uuid NOT NULL REFERENCES accounts (id),
    occurred_at           timestamptz NOT NULL, -- the request's, which finds its usage row and its month
    held_pico             numeric(38, 0) NOT NULL CHECK (held_pico >= 0), -- the request's earnings
    resolution            text NOT NULL CHECK (resolution IN ('released', 'clawed_back')),
    note                  text NOT NULL DEFAULT '' CHECK (length(note) <= 500),
    resolved_by           uuid NOT NULL REFERENCES users (id),
    resolved_at           timestamptz NOT NULL,
    transaction_id        uuid REFERENCES ledger_transactions (id),
    CHECK ((resolution = 'clawed_back') = (transaction_id IS NOT NULL))
);
CREATE INDEX flag_resolutions_provider_idx ON flag_resolutions (provider_account_id, resolved_at);

-- +goose StatementBegin
CREATE FUNCTION flag_resolutions_final() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the resolution of flagged request % is final', OLD.request_id USING ERRCODE = 'restrict_violation';
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER flag_resolutions_final BEFORE UPDATE OR DELETE ON flag_resolutions
    FOR EACH ROW EXECUTE FUNCTION flag_resolutions_final();

-- A statement holds the earnings of its period's flagged requests until finance resolves them,
-- and pays those released since its previous month on a line of their own: held_cents is the
-- signed sum of those lines (released less held), part of its net.
ALTER TABLE statements ADD COLUMN held_cents bigint NOT NULL DEFAULT 0,
    DROP CONSTRAINT statements_check5, -- the unnamed net check of 00015 (statements_check6 is payout + carried = net)
    ADD CONSTRAINT statements_net_check
        CHECK (net_cents = carried_in_cents + earnings_cents + late_earnings_cents + clawbacks_cents + held_cents);
ALTER TABLE statement_lines DROP CONSTRAINT statement_lines_kind_check,
    ADD CONSTRAINT statement_lines_kind_check CHECK (kind IN ('usage', 'late_usage', 'clawback', 'held', 'released'));

-- What each of a document's flags is about and how much, in words, in the order of flags
-- ("1 request billed below what its rig reported: $0.42 held"), fixed with the document.
ALTER TABLE invoices ADD COLUMN flag_notes text[] NOT NULL DEFAULT '{}';
ALTER TABLE statements ADD COLUMN flag_notes text[] NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE statements DROP COLUMN flag_notes;
ALTER TABLE invoices DROP COLUMN flag_notes;
ALTER TABLE statement_lines DROP CONSTRAINT statement_lines_kind_check,
    ADD CONSTRAINT statement_lines_kind_check CHECK (kind IN ('usage', 'late_usage', 'clawback'));
ALTER TABLE statements DROP CONSTRAINT statements_net_check,
    ADD CONSTRAINT statements_check5
        CHECK (net_cents = carried_in_cents + earnings_cents + late_earnings_cents + clawbacks_cents),
    DROP COLUMN held_cents;
DROP TABLE flag_resolutions;
DROP FUNCTION flag_resolutions_final();
