-- +goose Up
-- Spending limits with a period (docs/budgets.md). A key's limit resets each day, week (from
-- Monday) or month, at 00:00 UTC; the limits set before periods existed stay monthly.
ALTER TABLE api_keys RENAME COLUMN monthly_limit_pico TO limit_pico;
ALTER TABLE api_keys ADD COLUMN limit_period text NOT NULL DEFAULT 'month'
    CHECK (limit_period IN ('day', 'week', 'month'));

-- What each API key has been charged per day (UTC), kept by the meter in the same transaction
-- as the usage rows it sums, beside api_key_spend's months. Admission reads a day's spend in one
-- row and a week's in at most seven; a month stays one row of api_key_spend.
CREATE TABLE api_key_spend_days (
    api_key_id  text NOT NULL,
    day         date NOT NULL,
    requests    bigint NOT NULL,
    charge_pico numeric(38, 0) NOT NULL CHECK (charge_pico >= 0),
    PRIMARY KEY (api_key_id, day)
);

-- The days of this month and the last, so that a week across the turn of the month is whole.
INSERT INTO api_key_spend_days (api_key_id, day, requests, charge_pico)
SELECT api_key_id, (occurred_at AT TIME ZONE 'UTC')::date, count(*), sum(charge_pico)
FROM usage_events
WHERE api_key_id <> '' AND occurred_at >= date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' - interval '1 month'
GROUP BY 1, 2;

-- A limit on what the keys a person created in an account may spend together per period,
-- keyed on the account and the person only.
CREATE TABLE member_limits (
    account_id        uuid NOT NULL REFERENCES accounts (id),
    user_id           uuid NOT NULL REFERENCES users (id),
    limit_pico        numeric(38, 0) NOT NULL CHECK (limit_pico > 0),
    period            text NOT NULL CHECK (period IN ('day', 'week', 'month')),
    alert_thresholds  smallint[] NOT NULL DEFAULT '{50,80,100}',
    updated_at        timestamptz NOT NULL,
    PRIMARY KEY (account_id, user_id)
);

-- An account's monthly budget: a hard stop on what all its keys spend in a calendar month.
CREATE TABLE account_budgets (
    account_id        uuid PRIMARY KEY REFERENCES accounts (id),
    limit_pico        numeric(38, 0) NOT NULL CHECK (limit_pico > 0),
    alert_thresholds  smallint[] NOT NULL DEFAULT '{50,80,100}',
    updated_at        timestamptz NOT NULL
);

-- +goose Down
DROP TABLE account_budgets;
DROP TABLE member_limits;
DROP TABLE api_key_spend_days;
ALTER TABLE api_keys DROP COLUMN limit_period;
ALTER TABLE api_keys RENAME COLUMN limit_pico TO monthly_limit_pico;
