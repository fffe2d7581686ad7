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

-- +goose Down
DROP TABLE invoice_summaries;
