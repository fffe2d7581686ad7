-- +goose Up
-- The usage rows' foreign keys cost half of the meter's insert: PostgreSQL checks each one
-- per row with a trigger and a query. They bought nothing the meter does not already know:
-- it reads the event's account, offering and provider in the same transaction as the insert
-- and refuses an event that names one it does not find. What the keys also guarded, a row
-- left pointing at nothing, is now ruled out where it could start: accounts and offerings
-- are closed or paused, never deleted, and their ids never change.
ALTER TABLE usage_events
    DROP CONSTRAINT usage_events_account_id_fkey,
    DROP CONSTRAINT usage_events_offering_id_fkey,
    DROP CONSTRAINT usage_events_provider_account_id_fkey;

-- +goose StatementBegin
CREATE FUNCTION refuse_history_loss() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% rows are never deleted and their ids never change: usage and ledger history name them', TG_TABLE_NAME
        USING ERRCODE = 'restrict_violation';
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER accounts_kept BEFORE DELETE OR UPDATE OF id ON accounts
    FOR EACH ROW EXECUTE FUNCTION refuse_history_loss();
CREATE TRIGGER offerings_kept BEFORE DELETE OR UPDATE OF id ON offerings
    FOR EACH ROW EXECUTE FUNCTION refuse_history_loss();
CREATE TRIGGER accounts_not_truncated BEFORE TRUNCATE ON accounts
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_history_loss();
CREATE TRIGGER offerings_not_truncated BEFORE TRUNCATE ON offerings
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_history_loss();

-- +goose Down
DROP TRIGGER offerings_not_truncated ON offerings;
DROP TRIGGER accounts_not_truncated ON accounts;
DROP TRIGGER offerings_kept ON offerings;
DROP TRIGGER accounts_kept ON accounts;
DROP FUNCTION refuse_history_loss();
ALTER TABLE usage_events
    ADD CONSTRAINT usage_events_account_id_fkey FOREIGN KEY (account_id) REFERENCES accounts (id),
    ADD CONSTRAINT usage_events_offering_id_fkey FOREIGN KEY (offering_id) REFERENCES offerings (id),
    ADD CONSTRAINT usage_events_provider_account_id_fkey FOREIGN KEY (provider_account_id) REFERENCES accounts (id);
