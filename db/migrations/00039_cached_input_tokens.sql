-- +goose Up
-- Cached input tokens, kept apart wherever tokens are counted (docs/metering-integrity.md,
-- "Cached input tokens"). On a usage row: cached_input_tokens are the billed input tokens
-- billed at the cached price, a part of input_tokens; reported_cached_input_tokens what the rig
-- reported; cached_input_price the price book's cached price and ask_cached_input_price the
-- provider's input ask scaled by the cached price's ratio to the input price, as the row was
-- billed (NULL in rows metered before). In the hourly rollups: the cached input tokens summed,
-- and those of requests charged nothing, as input tokens are. On the gateway's record: the
-- cached tokens the answer's usage showed the client, NULL when it showed none.
ALTER TABLE usage_events
    ADD COLUMN cached_input_tokens          bigint NOT NULL DEFAULT 0 CHECK (cached_input_tokens >= 0),
    ADD COLUMN reported_cached_input_tokens bigint CHECK (reported_cached_input_tokens >= 0),
    ADD COLUMN cached_input_price           bigint,
    ADD COLUMN ask_cached_input_price       bigint;

ALTER TABLE usage_hourly
    ADD COLUMN cached_input_tokens           bigint NOT NULL DEFAULT 0,
    ADD COLUMN uncharged_cached_input_tokens bigint NOT NULL DEFAULT 0,
    ADD COLUMN ask_cached_input_price        bigint; -- fixed by price_id and ask_input_price; NULL before

-- Invoice and statement lines keep the cached input tokens they bill, and their unit price (on
-- a statement, the provider's cached ask), so that a line's amount is exactly its tokens at its
-- prices: (input - uncharged input - (cached - uncharged cached)) at the input price, plus
-- (cached - uncharged cached) at the cached price, plus the charged output at the output price.
ALTER TABLE invoice_lines
    ADD COLUMN cached_input_price            bigint,
    ADD COLUMN cached_input_tokens           bigint NOT NULL DEFAULT 0,
    ADD COLUMN uncharged_cached_input_tokens bigint NOT NULL DEFAULT 0;
ALTER TABLE statement_lines
    ADD COLUMN ask_cached_input_price        bigint,
    ADD COLUMN cached_input_tokens           bigint NOT NULL DEFAULT 0,
    ADD COLUMN uncharged_cached_input_tokens bigint NOT NULL DEFAULT 0;

ALTER TABLE gateway_requests
    ADD COLUMN cached_input_tokens bigint CHECK (cached_input_tokens >= 0);

-- +goose Down
ALTER TABLE gateway_requests DROP COLUMN cached_input_tokens;
ALTER TABLE statement_lines
    DROP COLUMN uncharged_cached_input_tokens,
    DROP COLUMN cached_input_tokens,
    DROP COLUMN ask_cached_input_price;
ALTER TABLE invoice_lines
    DROP COLUMN uncharged_cached_input_tokens,
    DROP COLUMN cached_input_tokens,
    DROP COLUMN cached_input_price;
ALTER TABLE usage_hourly
    DROP COLUMN ask_cached_input_price,
    DROP COLUMN uncharged_cached_input_tokens,
    DROP COLUMN cached_input_tokens;
ALTER TABLE usage_events
    DROP COLUMN ask_cached_input_price,
    DROP COLUMN cached_input_price,
    DROP COLUMN reported_cached_input_tokens,
    DROP COLUMN cached_input_tokens;
