-- +goose Up
-- The price of a cached input token: a prompt token the engine did not compute again because
-- it still held its key-value cache from an earlier request with the same prefix (vLLM's and
-- SGLang's usage.prompt_tokens_details.cached_tokens). Each row of the price book carries it
-- beside the input price, per million tokens. Rows already there, and new rows that do not
-- give it, take a quarter of their input price, rounded down; it is never above the input
-- price, so that caching never makes a token cost more (docs/metering-integrity.md, "Cached
-- input tokens").
ALTER TABLE prices ADD COLUMN IF NOT EXISTS cached_input_micro_usd_per_mtok bigint;
UPDATE prices SET cached_input_micro_usd_per_mtok = input_micro_usd_per_mtok / 4
WHERE cached_input_micro_usd_per_mtok IS NULL;
ALTER TABLE prices
    ALTER COLUMN cached_input_micro_usd_per_mtok SET NOT NULL,
    ADD CONSTRAINT prices_cached_input_within_input CHECK (
        cached_input_micro_usd_per_mtok >= 0 AND cached_input_micro_usd_per_mtok <= input_micro_usd_per_mtok);

-- A column default cannot read another column, so a trigger gives a new row that names no
-- cached price a quarter of its input price.
-- +goose StatementBegin
CREATE FUNCTION prices_default_cached_input() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.cached_input_micro_usd_per_mtok IS NULL THEN
        NEW.cached_input_micro_usd_per_mtok := NEW.input_micro_usd_per_mtok / 4;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER prices_default_cached_input BEFORE INSERT ON prices
    FOR EACH ROW EXECUTE FUNCTION prices_default_cached_input();

-- +goose Down
DROP TRIGGER prices_default_cached_input ON prices;
DROP FUNCTION prices_default_cached_input();
ALTER TABLE prices DROP CONSTRAINT prices_cached_input_within_input;
ALTER TABLE prices DROP COLUMN cached_input_micro_usd_per_mtok;
