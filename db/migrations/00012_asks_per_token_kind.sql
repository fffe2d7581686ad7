-- +goose Up
-- An offering asks apart for input and for output tokens, as customers pay apart for them, so
-- that each ask can be held to its tier's price for the same kind of token: no request then
-- pays a provider more than its customer paid (see docs/tiers-and-asks.md).
--
-- An existing single ask A is split in the ratio of its tier's input and output prices in
-- force when the migration runs, keeping A at the benchmark's mix of half input and half
-- output: ask_input = round(2A x input / (input + output)), ask_output = 2A - ask_input, each
-- at least one micro-dollar. An offering whose tier has no price keeps A for both. An ask that
-- was within its tier's blended price is then within both prices, and one that was above it
-- is above both.
ALTER TABLE offerings
    ADD COLUMN ask_input_micro_usd_per_mtok  bigint,
    ADD COLUMN ask_output_micro_usd_per_mtok bigint;

WITH split AS (
    SELECT o.id,
        CASE WHEN p.input_micro_usd_per_mtok + p.output_micro_usd_per_mtok > 0
            THEN greatest(1, round(2 * o.ask_micro_usd_per_mtok::numeric * p.input_micro_usd_per_mtok
                / (p.input_micro_usd_per_mtok + p.output_micro_usd_per_mtok)))::bigint
            ELSE o.ask_micro_usd_per_mtok
        END AS ask_input
    FROM offerings o
    LEFT JOIN LATERAL (
        SELECT input_micro_usd_per_mtok, output_micro_usd_per_mtok FROM prices
        WHERE tier = o.tier AND effective_from <= now()
        ORDER BY effective_from DESC LIMIT 1
    ) p ON true
)
UPDATE offerings o
SET ask_input_micro_usd_per_mtok = s.ask_input,
    ask_output_micro_usd_per_mtok = greatest(1, 2 * o.ask_micro_usd_per_mtok - s.ask_input)
FROM split s
WHERE s.id = o.id;

-- The figures a rig's agent reports of its own requests (its usage events), kept beside the
-- gateway's measured_* figures, which alone decide the tier and routing. reported_requests is
-- how many requests the figures were computed over, as measured_requests is.
ALTER TABLE offerings
    ALTER COLUMN ask_input_micro_usd_per_mtok SET NOT NULL,
    ALTER COLUMN ask_output_micro_usd_per_mtok SET NOT NULL,
    ADD CONSTRAINT offerings_ask_input_positive CHECK (ask_input_micro_usd_per_mtok > 0),
    ADD CONSTRAINT offerings_ask_output_positive CHECK (ask_output_micro_usd_per_mtok > 0),
    DROP COLUMN ask_micro_usd_per_mtok,
    ADD COLUMN reported_requests       bigint NOT NULL DEFAULT 0,
    ADD COLUMN reported_ttft_p50_ms    double precision,
    ADD COLUMN reported_ttft_p99_ms    double precision,
    ADD COLUMN reported_tokens_per_sec double precision;

-- +goose Down
-- The single ask comes back as the asks' value at half input and half output, rounded up.
ALTER TABLE offerings ADD COLUMN ask_micro_usd_per_mtok bigint;
UPDATE offerings
SET ask_micro_usd_per_mtok = (ask_input_micro_usd_per_mtok + ask_output_micro_usd_per_mtok + 1) / 2;
ALTER TABLE offerings
    ALTER COLUMN ask_micro_usd_per_mtok SET NOT NULL,
    ADD CONSTRAINT offerings_ask_micro_usd_per_mtok_check CHECK (ask_micro_usd_per_mtok > 0),
    DROP COLUMN reported_tokens_per_sec,
    DROP COLUMN reported_ttft_p99_ms,
    DROP COLUMN reported_ttft_p50_ms,
    DROP COLUMN reported_requests,
    DROP COLUMN ask_output_micro_usd_per_mtok,
    DROP COLUMN ask_input_micro_usd_per_mtok;
