-- +goose Up
-- An administrator's resolution of a discrepancy (a request the gateway's reconciliation or the
-- meter flagged, on the discrepancies page): who marked it resolved, when, and a short note of
-- what was found. A flagged request without a row here is open. Owned by package requestlog,
-- which lists the discrepancies; the audit log keeps the same facts with the action.
CREATE TABLE discrepancy_resolutions (
    request_id  text PRIMARY KEY,
    note        text NOT NULL CHECK (length(note) BETWEEN 1 AND 500),
    resolved_by uuid NOT NULL REFERENCES users (id),
    resolved_at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE discrepancy_resolutions;
