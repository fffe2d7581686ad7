-- +goose Up
-- What admission holds of a customer's credit for a request the meter has not billed yet: the
-- most the meter may bill it (ticket.BillableOf: the route ticket's input bound, and its output
-- bound or the bound on the output the gateway relayed, whichever is lower), at the tier's
-- price. The gateway writes a row with its record of the attempt (gateway_requests), in the same
-- statement; the meter deletes it in the transaction that posts the request's charge, so a
-- snapshot shows every request either held here or charged in the balance, never both and
-- never neither. A row whose request the meter can no longer bill (its ticket is older than
-- usage.MaxTicketAge) expires; Reconcile deletes it. Every gateway replica reads the same rows,
-- and they survive a restart (docs/gateway-integrity.md, "Holds until metered").
CREATE TABLE admission_holds (
    request_id  text PRIMARY KEY,
    account_id  uuid NOT NULL REFERENCES accounts (id),
    api_key_id  text NOT NULL,
    amount_pico bigint NOT NULL CHECK (amount_pico > 0),
    held_at     timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL
);
CREATE INDEX admission_holds_account_idx ON admission_holds (account_id, api_key_id) INCLUDE (amount_pico, expires_at);
CREATE INDEX admission_holds_expiry_idx ON admission_holds (expires_at);

-- +goose Down
DROP TABLE admission_holds;
