-- +goose Up
-- What an invoice states of its period's usage per tier: the spend beside the baseline (the
-- same tokens at the realtime price in force), and the energy and carbon beside the
-- baseline's (docs/methodology.md). The close writes the rows with the draft and rewrites
-- them with it; once the invoice is issued they never change, as its lines never do.
CREATE TABLE invoice_summaries (
    invoice_id      uuid NOT NULL REFERENCES invoices (id),
    tier            text NOT NULL,
    spend_pico      numeric(38, 0) NOT NULL,
    spend_cents     bigint NOT NULL,
    baseline_pico   numeric(38, 0) NOT NULL,
    energy_kwh      double precision NOT NULL,
    measured_kwh    double precision NOT NULL,
    g_co2e          double precision NOT NULL,
    baseline_g_co2e double precision NOT NULL,
    method_version  text NOT NULL,
    PRIMARY KEY (invoice_id, tier)
);
CREATE TRIGGER invoice_summaries_guard BEFORE INSERT OR UPDATE OR DELETE ON invoice_summaries
    FOR EACH ROW EXECUTE FUNCTION invoice_part_guard();

-- The savings and carbon reports read an account's rollups of a period through
-- usage_hourly_account_idx (account, hour). The index now carries the columns they sum, so
-- that they are answered from the index alone (an index-only scan over the account's entries,
-- which lie together) instead of one visit of the table per rollup row, which lie scattered
-- among every other account's: the difference between a few pages and a page per row
-- (docs/methodology.md, "Speed"). Its key is unchanged, so the invoices' reads of an account's
-- rollups use it as before.
DROP INDEX usage_hourly_account_idx;
CREATE INDEX usage_hourly_account_idx ON usage_hourly (account_id, hour)
    INCLUDE (offering_id, tier, model, price_id, requests, input_tokens, output_tokens, uncharged_input_tokens,
        uncharged_output_tokens, charge_pico, energy_j, energy_measured_j, busy_ms);

-- +goose Down
DROP INDEX usage_hourly_account_idx;
CREATE INDEX usage_hourly_account_idx ON usage_hourly (account_id, hour);
DROP TABLE invoice_summaries;
