-- +goose Up
-- The hourly rollups keep apart what was sold at different terms, so that an invoice line per
-- price version and a statement line per ask come exactly from them (see docs/invoicing.md,
-- "Rollups"). A row is now one hour, account, offering, tier and model at one price version
-- (price_id, 0 for rows metered before route tickets carried it) and one pair of asks.
--
-- uncharged_requests and uncharged_input_tokens / uncharged_output_tokens count the requests
-- charged nothing (a generation that produced no output token, a failed embedding) and their
-- tokens: with them, a row's charge is exactly (input_tokens - uncharged_input_tokens) at the
-- input price plus (output_tokens - uncharged_output_tokens) at the output price, and its
-- payable the same at the asks.
--
-- The rows are rebuilt from usage_events, which they sum.
ALTER TABLE usage_hourly DROP CONSTRAINT usage_hourly_pkey;
DELETE FROM usage_hourly;
ALTER TABLE usage_hourly
    ADD COLUMN price_id                bigint NOT NULL,
    ADD COLUMN ask_input_price         bigint NOT NULL,
    ADD COLUMN ask_output_price        bigint NOT NULL,
    ADD COLUMN uncharged_requests      bigint NOT NULL,
    ADD COLUMN uncharged_input_tokens  bigint NOT NULL,
    ADD COLUMN uncharged_output_tokens bigint NOT NULL;
INSERT INTO usage_hourly (hour, account_id, offering_id, tier, model, price_id, ask_input_price, ask_output_price,
    provider_account_id, requests, input_tokens, output_tokens, uncharged_requests, uncharged_input_tokens,
    uncharged_output_tokens, charge_pico, payable_pico, energy_j)
SELECT date_trunc('hour', occurred_at, 'UTC'), account_id, offering_id, tier, model, coalesce(price_id, 0),
    ask_input_price, ask_output_price, provider_account_id, count(*), sum(input_tokens), sum(output_tokens),
    count(*) FILTER (WHERE charge_pico = 0), coalesce(sum(input_tokens) FILTER (WHERE charge_pico = 0), 0),
    coalesce(sum(output_tokens) FILTER (WHERE charge_pico = 0), 0), sum(charge_pico), sum(payable_pico), sum(energy_j)
FROM usage_events
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9;
ALTER TABLE usage_hourly
    ADD PRIMARY KEY (hour, account_id, offering_id, tier, model, price_id, ask_input_price, ask_output_price);

-- An account's rollups of a period, read by its invoice and its usage page, without the
-- period's other accounts.
CREATE INDEX usage_hourly_account_idx ON usage_hourly (account_id, hour);

-- The ledger's transactions of a period, by the time they occurred: where a document's
-- balances start reading postings (docs/invoicing.md, "Balances").
CREATE INDEX ledger_transactions_occurred_idx ON ledger_transactions (occurred_at);

-- +goose Down
DROP INDEX ledger_transactions_occurred_idx;
DROP INDEX usage_hourly_account_idx;
ALTER TABLE usage_hourly DROP CONSTRAINT usage_hourly_pkey;
DELETE FROM usage_hourly;
ALTER TABLE usage_hourly
    DROP COLUMN uncharged_output_tokens,
    DROP COLUMN uncharged_input_tokens,
    DROP COLUMN uncharged_requests,
    DROP COLUMN ask_output_price,
    DROP COLUMN ask_input_price,
    DROP COLUMN price_id;
INSERT INTO usage_hourly (hour, account_id, offering_id, tier, model, provider_account_id, requests, input_tokens,
    output_tokens, charge_pico, payable_pico, energy_j)
SELECT date_trunc('hour', occurred_at, 'UTC'), account_id, offering_id, tier, model, provider_account_id,
    count(*), sum(input_tokens), sum(output_tokens), sum(charge_pico), sum(payable_pico), sum(energy_j)
FROM usage_events
GROUP BY 1, 2, 3, 4, 5, 6;
ALTER TABLE usage_hourly ADD PRIMARY KEY (hour, account_id, offering_id, tier, model);
