-- +goose Up
-- A key may ask the gateway to prefer the lowest-carbon offering that keeps the tier's promise
-- for every request that does not say otherwise (docs/planner-and-carbon-routing.md).
ALTER TABLE api_keys ADD COLUMN prefer_carbon boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE api_keys DROP COLUMN prefer_carbon;
