package main

import (
	"context"
	"fmt"
	"time"

	"github.com/gpumarket/gpumarket/cmd/internal/scratchdb"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/usagestore"
)

// seedChunk is how many usage rows one INSERT writes, so that progress shows.
const seedChunk = 1_000_000

// seed writes the accounts, rigs and price book, o.events usage rows spread evenly over the
// accounts and the days to end, and the rollups that sum them. Row i belongs to account
// i % accounts, at a time that walks through the period; each account uses two rigs.
func seed(ctx context.Context, d *scratchdb.Database, o options, end time.Time) error {
	start := end.AddDate(0, 0, -o.days)
	span := end.Sub(start).Seconds()
	exec := func(what, sql string, args ...any) error {
		began := time.Now()
		if _, err := d.Pool.Exec(ctx, sql, args...); err != nil {
			return fmt.Errorf("seed %s: %w", what, err)
		}
		progress("seeded %s in %s", what, time.Since(began).Round(time.Millisecond))
		return nil
	}
	steps := []struct {
		what string
		sql  string
		args []any
	}{
		{"numbering tables", `
			CREATE TABLE bench_customers (idx int PRIMARY KEY, id uuid NOT NULL);
			CREATE TABLE bench_offerings (idx int PRIMARY KEY, id uuid NOT NULL, provider uuid NOT NULL, tier text NOT NULL)`, nil},
		{"customers", `
			WITH a AS (INSERT INTO accounts (name, created_at)
				SELECT 'Customer ' || i, $2 FROM generate_series(0, $1 - 1) i RETURNING id, name)
			INSERT INTO bench_customers SELECT substr(name, 10)::int, id FROM a`, []any{o.accounts, start}},
		{"prices", `
			INSERT INTO prices (tier, input_micro_usd_per_mtok, output_micro_usd_per_mtok, effective_from, created_at)
			VALUES ('realtime', 600000, 1200000, $1, $1), ('standard', 150000, 300000, $1, $1), ('batch', 70000, 130000, $1, $1),
				('realtime', 660000, 1320000, $2, $1)`, []any{start.AddDate(-1, 0, 0), start.AddDate(0, 0, o.days/2)}},
		// Twenty providers with two rigs each, in five regions, at home or in a data centre.
		{"rigs", `
			WITH p AS (INSERT INTO accounts (name, created_at) SELECT 'Provider ' || i, $1 FROM generate_series(0, 19) i RETURNING id, name),
			o AS (
				SELECT (substr(p.name, 10)::int) * 2 + k AS idx, p.id AS provider FROM p, generate_series(0, 1) k),
			ins AS (
				INSERT INTO offerings (provider_account_id, gpu, gpu_count, region, model, ask_input_micro_usd_per_mtok,
					ask_output_micro_usd_per_mtok, seed_key, tier, status, site, pue, created_at, updated_at)
				SELECT provider, CASE WHEN idx % 3 = 0 THEN 'h100-pcie' ELSE 'rtx-4090' END, CASE WHEN idx % 3 = 0 THEN 1 ELSE 4 END,
					(ARRAY['no', 'fr', 'de', 'pl', 'us'])[1 + idx % 5], 'deepseek-ai/DeepSeek-R1-Distill-Qwen-14B', 60000, 120000,
					'bench-' || idx, (ARRAY['realtime', 'standard', 'batch'])[1 + idx % 3], 'active',
					CASE WHEN idx % 3 = 0 OR idx % 4 = 1 THEN 'datacentre' ELSE 'home' END,
					CASE WHEN idx % 7 = 0 THEN 1.15 END, $1, $1
				FROM o RETURNING id, seed_key, provider_account_id, tier)
			INSERT INTO bench_offerings SELECT substr(seed_key, 7)::int, id, provider_account_id, tier FROM ins`, []any{start}},
	}
	for _, s := range steps {
		if err := exec(s.what, s.sql, s.args...); err != nil {
			return err
		}
	}
	// Each month of the rows gets its partition first, as the meter makes it (docs/usage-storage.md).
	var months []time.Time
	for m := start; !m.After(end); m = m.AddDate(0, 0, 1) {
		months = append(months, m)
	}
	if err := usagestore.New(usagestore.Config{Pool: d.Pool, AttachMonth: metering.AttachMonth}).MakeMonths(ctx, append(months, end)); err != nil {
		return fmt.Errorf("seed the usage months: %w", err)
	}
	perAccount := (o.events + o.accounts - 1) / o.accounts
	for from := 0; from < o.events; from += seedChunk {
		to := min(from+seedChunk, o.events)
		if err := exec(fmt.Sprintf("usage rows %d to %d of %d", from, to, o.events), `
			INSERT INTO usage_events (event_id, request_id, account_id, offering_id, provider_account_id, tier, model,
				input_tokens, output_tokens, ttft_ms, duration_ms, energy_j, energy_source, status, price_id, input_price,
				output_price, ask_input_price, ask_output_price, charge_pico, payable_pico, occurred_at, metered_at, stream_seq)
			SELECT 'evt_' || i, 'req_' || i, c.id, o.id, o.provider, o.tier, 'deepseek-ai/DeepSeek-R1-Distill-Qwen-14B',
				r.inp, r.outp, 40, 900, (r.inp + r.outp) * 0.35, CASE WHEN i % 4 = 0 THEN 'measured' ELSE 'estimated' END, 'ok',
				pr.id, pr.input_micro_usd_per_mtok, pr.output_micro_usd_per_mtok, 60000, 120000,
				r.inp * pr.input_micro_usd_per_mtok + r.outp * pr.output_micro_usd_per_mtok, r.inp * 60000 + r.outp * 120000,
				r.at, r.at, i
			FROM generate_series($1::bigint, $2::bigint - 1) i
			JOIN bench_customers c ON c.idx = i % $3
			CROSS JOIN LATERAL (SELECT $5::timestamptz + make_interval(secs => ((i / $3) * $6 / $4)::double precision) AS at,
				(200 + i % 1800)::bigint AS inp, (20 + i % 400)::bigint AS outp) r
			JOIN bench_offerings o ON o.idx = (c.idx * 2 + (i / $3) % 2) % 40
			JOIN LATERAL (SELECT id, input_micro_usd_per_mtok, output_micro_usd_per_mtok FROM prices
				WHERE tier = o.tier AND effective_from <= r.at ORDER BY effective_from DESC LIMIT 1) pr ON true`,
			from, to, o.accounts, perAccount, start, span); err != nil {
			return err
		}
	}
	// The rollups the meter would have kept for those rows.
	return exec("rollups", `
		INSERT INTO usage_hourly (hour, account_id, offering_id, tier, model, price_id, ask_input_price, ask_output_price,
			provider_account_id, requests, input_tokens, output_tokens, uncharged_requests, uncharged_input_tokens,
			uncharged_output_tokens, charge_pico, payable_pico, energy_j, energy_measured_j, busy_ms)
		SELECT date_trunc('hour', occurred_at, 'UTC'), account_id, offering_id, tier, model, price_id, ask_input_price,
			ask_output_price, provider_account_id, count(*), sum(input_tokens), sum(output_tokens), 0, 0, 0,
			sum(charge_pico), sum(payable_pico), sum(energy_j), coalesce(sum(energy_j) FILTER (WHERE energy_source = 'measured'), 0),
			sum(duration_ms)
		FROM usage_events
		GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9`)
}
