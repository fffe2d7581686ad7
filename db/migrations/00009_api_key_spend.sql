-- +goose Up
-- What each API key has been charged per calendar month (UTC), kept by the meter in the same
-- transaction as the usage rows it sums. Admission holds a key to its monthly limit by
-- reading one row here instead of summing the month's usage rows, which grew with the key's
-- traffic; and the usage table loses an index its every insert paid for.
CREATE TABLE api_key_spend (
    api_key_id  text NOT NULL,
    month       timestamptz NOT NULL CHECK (month = date_trunc('month', month AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'),
    requests    bigint NOT NULL,
    charge_pico numeric(38, 0) NOT NULL CHECK (charge_pico >= 0),
    PRIMARY KEY (api_key_id, month)
);

INSERT INTO api_key_spend (api_key_id, month, requests, charge_pico)
SELECT api_key_id, date_trunc('month', occurred_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', count(*), sum(charge_pico)
FROM usage_events
WHERE api_key_id <> ''
GROUP BY 1, 2;

DROP INDEX usage_events_api_key_idx;

-- +goose Down
CREATE INDEX usage_events_api_key_idx ON usage_events (api_key_id, occurred_at) INCLUDE (charge_pico);
DROP TABLE api_key_spend;
