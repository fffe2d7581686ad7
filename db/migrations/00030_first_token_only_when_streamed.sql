-- +goose Up
-- A request answered whole has no time to first token: its first byte comes with its last. The
-- usage row keeps none (NULL) for it, nor for a request that produced no output, where the meter
-- stored 0 (docs/tiers-and-asks.md, "Time to first token"). Rows already stored for requests the
-- gateway recorded as not streamed lose the generation time they kept in its place.
ALTER TABLE usage_events ALTER COLUMN ttft_ms DROP NOT NULL;
UPDATE usage_events SET ttft_ms = NULL WHERE ttft_ms = 0;
UPDATE usage_events u SET ttft_ms = NULL
FROM gateway_requests g
WHERE g.request_id = u.request_id AND NOT g.streamed AND u.ttft_ms IS NOT NULL;
UPDATE gateway_requests SET ttft_ms = NULL WHERE NOT streamed AND ttft_ms IS NOT NULL;

-- +goose Down
UPDATE usage_events SET ttft_ms = 0 WHERE ttft_ms IS NULL;
ALTER TABLE usage_events ALTER COLUMN ttft_ms SET NOT NULL;
