-- +goose Up
-- An auto top-up charge that never gets Stripe's word (docs/auto-topup.md, "A charge with no
-- answer"): tries counts how often a worker sent it; once it was sent MaxChargeTries times without
-- an answer, or neither its answer nor its webhook came within the wait, it becomes 'unanswered':
-- auto top-up stops and the account is alerted once, as for a decline. A payment_intent.succeeded
-- that comes later still credits it.
ALTER TABLE topup_attempts ADD COLUMN tries integer NOT NULL DEFAULT 0;
ALTER TABLE topup_attempts DROP CONSTRAINT topup_attempts_status_check;
ALTER TABLE topup_attempts ADD CONSTRAINT topup_attempts_status_check
    CHECK (status IN ('created', 'pending', 'succeeded', 'failed', 'unanswered'));
CREATE INDEX topup_attempts_waiting ON topup_attempts (created_at) WHERE status IN ('created', 'pending');

-- +goose Down
DROP INDEX topup_attempts_waiting;
UPDATE topup_attempts SET status = 'failed' WHERE status = 'unanswered';
ALTER TABLE topup_attempts DROP CONSTRAINT topup_attempts_status_check;
ALTER TABLE topup_attempts ADD CONSTRAINT topup_attempts_status_check
    CHECK (status IN ('created', 'pending', 'succeeded', 'failed'));
ALTER TABLE topup_attempts DROP COLUMN tries;
