-- +goose Up
-- The reliability record (docs/reliability.md) counts every offering's attempts of the last day
-- from the gateway's record, every 30 seconds, in one query over the day's rows: this index finds
-- them without reading the older ones. Owned by package billing, as the table is.
CREATE INDEX gateway_requests_at_idx ON gateway_requests (at);

-- +goose Down
DROP INDEX gateway_requests_at_idx;
