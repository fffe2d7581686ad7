-- +goose Up
-- What the savings and carbon reports read (docs/methodology.md).
--
-- A rig is at a home or in a data centre, and its provider may state its power usage
-- effectiveness (PUE); without one the report uses the site's default (1.0 at home, 1.3 in a
-- data centre). Enterprise cards are listed from data centres.
ALTER TABLE offerings
    ADD COLUMN site text NOT NULL DEFAULT 'home' CHECK (site IN ('home', 'datacentre')),
    ADD COLUMN pue  double precision CHECK (pue >= 1.0 AND pue <= 3.0);
UPDATE offerings SET site = 'datacentre'
WHERE gpu IN ('l40s', 'a100-pcie-80gb', 'a100-sxm-80gb', 'h100-pcie', 'h100-sxm', 'h200-sxm');

-- The hourly rollups keep the energy the rigs measured apart from the energy they estimated,
-- and the time their requests kept the rig busy, so that reports and the provider's view
-- read rollups, never usage rows.
ALTER TABLE usage_hourly
    ADD COLUMN energy_measured_j double precision NOT NULL DEFAULT 0,
    ADD COLUMN busy_ms           double precision NOT NULL DEFAULT 0;
UPDATE usage_hourly h SET energy_measured_j = s.measured, busy_ms = s.busy
FROM (
    SELECT date_trunc('hour', occurred_at, 'UTC') AS hour, account_id, offering_id, tier, model,
        coalesce(price_id, 0) AS price_id, ask_input_price, ask_output_price,
        coalesce(sum(energy_j) FILTER (WHERE energy_source = 'measured'), 0) AS measured,
        sum(duration_ms) AS busy
    FROM usage_events
    GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
) s
WHERE h.hour = s.hour AND h.account_id = s.account_id AND h.offering_id = s.offering_id AND h.tier = s.tier
    AND h.model = s.model AND h.price_id = s.price_id AND h.ask_input_price = s.ask_input_price
    AND h.ask_output_price = s.ask_output_price;

-- +goose Down
ALTER TABLE usage_hourly DROP COLUMN busy_ms, DROP COLUMN energy_measured_j;
ALTER TABLE offerings DROP COLUMN pue, DROP COLUMN site;
