-- +goose Up
-- A Checkout Session not paid by its expiry is over (docs/failure-cases.md, "A checkout never
-- paid"): expires_at is when the platform asked Stripe to expire it, and Stripe's
-- checkout.session.expired event marks the purchase 'expired', once. A purchase started before
-- this has no expires_at and waits for that event.
ALTER TABLE credit_purchases ADD COLUMN expires_at timestamptz;
ALTER TABLE credit_purchases DROP CONSTRAINT credit_purchases_status_check;
ALTER TABLE credit_purchases ADD CONSTRAINT credit_purchases_status_check
    CHECK (status IN ('pending', 'awaiting_payment', 'paid', 'failed', 'expired'));

-- +goose Down
UPDATE credit_purchases SET status = 'failed' WHERE status = 'expired';
ALTER TABLE credit_purchases DROP CONSTRAINT credit_purchases_status_check;
ALTER TABLE credit_purchases ADD CONSTRAINT credit_purchases_status_check
    CHECK (status IN ('pending', 'awaiting_payment', 'paid', 'failed'));
ALTER TABLE credit_purchases DROP COLUMN expires_at;
