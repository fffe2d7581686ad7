-- +goose Up
-- The benchmark a provider attached to its listing: loadgen's JSON result of a run against the
-- offering, kept as it was uploaded, and the figures the catalog shows of it. One per offering:
-- attaching another replaces it, and the provider can remove it. It is the provider's own claim,
-- shown as such beside what the platform measured; it places and routes nothing
-- (docs/provider-benchmarks.md). Owned by package benchmarks.
CREATE TABLE provider_benchmarks (
    offering_id         uuid PRIMARY KEY REFERENCES offerings (id),
    provider_account_id uuid NOT NULL REFERENCES accounts (id),
    attached_by         uuid NOT NULL REFERENCES users (id),
    attached_at         timestamptz NOT NULL,
    started_at          timestamptz NOT NULL, -- when the run started, by the clock of the machine that ran it
    method              text NOT NULL CHECK (length(method) <= 100),
    model               text NOT NULL,
    base_url            text NOT NULL CHECK (length(base_url) <= 2000), -- the API the run called
    through_gateway     boolean NOT NULL, -- base_url is the platform's gateway
    rate                double precision NOT NULL CHECK (rate >= 0), -- Poisson arrivals per second; 0: all at once
    requests            integer NOT NULL CHECK (requests > 0),
    completed           integer NOT NULL CHECK (completed > 0 AND completed <= requests),
    ttft_p50_ms         double precision NOT NULL CHECK (ttft_p50_ms > 0),
    ttft_p99_ms         double precision NOT NULL CHECK (ttft_p99_ms >= ttft_p50_ms),
    total_tps           double precision NOT NULL CHECK (total_tps > 0),
    result              text NOT NULL CHECK (octet_length(result) <= 65536)
);
CREATE INDEX provider_benchmarks_provider_idx ON provider_benchmarks (provider_account_id);

-- +goose Down
DROP TABLE provider_benchmarks;
