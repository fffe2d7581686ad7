-- +goose Up
-- What the meter billed the requests of each batch's lines, summed as it stores their usage rows:
-- a batch's cost (GET /v1/batches/{id}) without reading its lines' rows, one per line and
-- spread over monthly partitions (docs/batches.md, "Cost"). Every attempt of a line counts, as
-- every one is on /usage with the batch's id. The account is part of the key: a batch's cost is
-- only ever its owner's requests.
CREATE TABLE usage_by_batch (
    batch_id    text NOT NULL,
    account_id  uuid NOT NULL REFERENCES accounts (id),
    requests    bigint NOT NULL CHECK (requests >= 0),
    charge_pico numeric(38, 0) NOT NULL CHECK (charge_pico >= 0),
    PRIMARY KEY (batch_id, account_id)
);

-- The batches' usage metered before this migration. A batch line's request id is "req_", the
-- batch id's hex, then the line, attempt and candidate (services.BatchRequestPrefix).
INSERT INTO usage_by_batch (batch_id, account_id, requests, charge_pico)
SELECT 'batch_' || split_part(substr(request_id, 5), '_', 1), account_id, count(*), sum(charge_pico)
FROM usage_events
WHERE request_id ~ '^req_[^_]+_.'
GROUP BY 1, 2;

-- +goose Down
DROP TABLE usage_by_batch;
