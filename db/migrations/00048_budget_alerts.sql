-- +goose Up
-- Alerts on spending (docs/budgets.md). A key's limit alerts at the thresholds of its row here,
-- or at 50, 80 and 100 % without one; an account's "balance below" alert exists only as a row
-- here (kind credit_low, subject '', below_pico set).
CREATE TABLE alert_rules (
    account_id  uuid NOT NULL REFERENCES accounts (id),
    kind        text NOT NULL CHECK (kind IN ('key', 'credit_low')),
    subject     text NOT NULL,
    thresholds  smallint[] NOT NULL DEFAULT '{50,80,100}',
    below_pico  numeric(38, 0) CHECK (below_pico > 0),
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (account_id, kind, subject),
    CHECK ((kind = 'credit_low') = (below_pico IS NOT NULL))
);

-- One row per alert that fired: a rule ("key:<id>", "member:<user id>", "account",
-- "credit_low"), the start of the period it fired in, and its threshold (a percentage, or for
-- credit_low the amount in picodollars). Written in the transaction that queues its e-mail and
-- its webhook event, so an alert fires once per period and threshold, across restarts.
CREATE TABLE alert_firings (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    account_id    uuid NOT NULL REFERENCES accounts (id),
    rule          text NOT NULL,
    period_start  timestamptz NOT NULL,
    threshold     numeric(38, 0) NOT NULL,
    spend_pico    numeric(38, 0) NOT NULL,
    fired_at      timestamptz NOT NULL,
    UNIQUE (account_id, rule, period_start, threshold)
);

-- Who gets an alert's e-mail, when not its default: the key's creator for a key, the person for
-- a member limit, and the account's people for the account's budget and its balance.
-- subscribed = false takes a default recipient off; true adds a person.
CREATE TABLE alert_subscriptions (
    account_id  uuid NOT NULL REFERENCES accounts (id),
    user_id     uuid NOT NULL REFERENCES users (id),
    kind        text NOT NULL CHECK (kind IN ('budget', 'credit_low')),
    subscribed  boolean NOT NULL,
    PRIMARY KEY (account_id, user_id, kind)
);

-- +goose Down
DROP TABLE alert_subscriptions;
DROP TABLE alert_firings;
DROP TABLE alert_rules;
