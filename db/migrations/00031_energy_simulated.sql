-- +goose Up
-- A rig without a GPU (the demo's) reports energy from a simulated power sensor, as its own
-- source, "simulated" (docs/methodology.md, "Energy"). The hourly rollups keep it apart from
-- the measured energy, as they keep the measured apart from the estimated, so that no report
-- counts a simulated figure as a measurement. Until now no usage row could carry that source,
-- so every rollup starts at zero.
ALTER TABLE usage_hourly ADD COLUMN energy_simulated_j double precision NOT NULL DEFAULT 0;

-- The invoice's summary states it beside the measured energy.
ALTER TABLE invoice_summaries ADD COLUMN simulated_kwh double precision NOT NULL DEFAULT 0;

-- The reports sum it from the account's index alone, as they sum the rest (00022).
DROP INDEX usage_hourly_account_idx;
CREATE INDEX usage_hourly_account_idx ON usage_hourly (account_id, hour)
    INCLUDE (offering_id, tier, model, price_id, requests, input_tokens, output_tokens, uncharged_input_tokens,
        uncharged_output_tokens, charge_pico, energy_j, energy_measured_j, energy_simulated_j, busy_ms);

-- +goose Down
DROP INDEX usage_hourly_account_idx;
CREATE INDEX usage_hourly_account_idx ON usage_hourly (account_id, hour)
    INCLUDE (offering_id, tier, model, price_id, requests, input_tokens, output_tokens, uncharged_input_tokens,
        uncharged_output_tokens, charge_pico, energy_j, energy_measured_j, busy_ms);
ALTER TABLE invoice_summaries DROP COLUMN simulated_kwh;
ALTER TABLE usage_hourly DROP COLUMN energy_simulated_j;
