-- +goose Up
-- Prices per model (docs/tiers-and-asks.md, "The price book"): a row of the price book may name a
-- model, and then prices that model's requests in its tier; a row without one (model NULL) is the
-- tier's default, for every model without a row of its own. Rows are still never edited, and a
-- change is still a new row with a later effective_from, now one per tier and model: two rows of
-- the same tier and model (or two defaults of a tier) never take effect at the same instant.
-- Owned by package catalog, as the table is.
ALTER TABLE prices ADD COLUMN model text CHECK (model <> '');
ALTER TABLE prices DROP CONSTRAINT prices_tier_effective_from_key;
ALTER TABLE prices ADD CONSTRAINT prices_tier_model_effective_from_key
    UNIQUE NULLS NOT DISTINCT (tier, model, effective_from);

-- +goose Down
ALTER TABLE prices DROP CONSTRAINT prices_tier_model_effective_from_key;
DELETE FROM prices WHERE model IS NOT NULL;
ALTER TABLE prices ADD CONSTRAINT prices_tier_effective_from_key UNIQUE (tier, effective_from);
ALTER TABLE prices DROP COLUMN model;
