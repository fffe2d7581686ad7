package main

import (
	"context"
	"fmt"
	"time"

	"github.com/gpumarket/gpumarket/cmd/internal/scratchdb"
	"github.com/gpumarket/gpumarket/services/invoicing"
)

// seed writes the benchmark's month: accounts, offerings and the price book, the rollups of
// its requests, and the ledger postings the meter would have posted for them. The customers,
// providers and offerings are numbered in tables of the scratch database's own, which the
// statements that write the rollups and postings join.
func seed(ctx context.Context, d *scratchdb.Database, o options, p invoicing.Period) error {
	rows := o.events / (o.accounts * eventsPerRow) // rollup rows per account
	hours := int(p.End().Sub(p.Start()).Hours())
	change := time.Date(p.Start().Year(), p.Start().Month(), 16, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		what string
		sql  string
		args []any
	}{
		{"numbering tables", `
			CREATE TABLE bench_customers (idx int PRIMARY KEY, id uuid NOT NULL);
			CREATE TABLE bench_providers (idx int PRIMARY KEY, id uuid NOT NULL);
			CREATE TABLE bench_offerings (idx int PRIMARY KEY, id uuid NOT NULL, provider uuid NOT NULL, tier text NOT NULL,
				model text NOT NULL, ask_in bigint NOT NULL, ask_out bigint NOT NULL)`, nil},
		{"customers", `
			WITH a AS (INSERT INTO accounts (name, created_at)
				SELECT 'Customer ' || i, $2 FROM generate_series(0, $1 - 1) i RETURNING id, name)
			INSERT INTO bench_customers SELECT substr(name, 10)::int, id FROM a`, []any{o.accounts, p.Start()}},
		{"providers", `
			WITH a AS (INSERT INTO accounts (name, created_at)
				SELECT 'Provider ' || i, $2 FROM generate_series(0, $1 - 1) i RETURNING id, name)
			INSERT INTO bench_providers SELECT substr(name, 10)::int, id FROM a`, []any{o.providers, p.Start()}},
		// The price book: each tier's price from long before, and a change on the 16th.
		{"prices", `
			INSERT INTO prices (tier, input_micro_usd_per_mtok, output_micro_usd_per_mtok, effective_from, created_at)
			VALUES ('realtime', 300000, 600000, $1, $1), ('standard', 150000, 300000, $1, $1), ('batch', 80000, 160000, $1, $1),
				('realtime', 330000, 660000, $2, $1), ('standard', 165000, 330000, $2, $1), ('batch', 88000, 176000, $2, $1)`,
			[]any{p.Start().AddDate(-1, 0, 0), change}},
		// Two offerings per provider, asking below their tier's prices.
		{"offerings", `
			WITH o AS (
				SELECT p.idx * 2 + k AS idx, p.id AS provider, (ARRAY['realtime', 'standard', 'batch'])[1 + (p.idx * 2 + k) % 3] AS tier,
					'bench/model-' || ((p.idx * 2 + k) % 4) AS model, 20000 + ((p.idx * 2 + k) % 20) * 1000 AS ask_in
				FROM bench_providers p, generate_series(0, 1) k),
			ins AS (
				INSERT INTO offerings (provider_account_id, gpu, gpu_count, region, model, ask_input_micro_usd_per_mtok,
					ask_output_micro_usd_per_mtok, seed_key, tier, status, created_at, updated_at)
				SELECT provider, 'rtx-4090', 4, 'eu', model, ask_in, 2 * ask_in, 'bench-' || idx, tier, 'active', $1, $1
				FROM o RETURNING id, seed_key)
			INSERT INTO bench_offerings
			SELECT o.idx, ins.id, o.provider, o.tier, o.model, o.ask_in, 2 * o.ask_in
			FROM o JOIN ins ON ins.seed_key = 'bench-' || o.idx`, []any{p.Start()}},
		// Each account's rows: one an hour for rows hours spread over the month, each of ten
		// requests at one of three offerings, one request without output.
		{"rollups", `
			INSERT INTO usage_hourly (hour, account_id, offering_id, tier, model, price_id, ask_input_price, ask_output_price,
				provider_account_id, requests, input_tokens, output_tokens, uncharged_requests, uncharged_input_tokens,
				uncharged_output_tokens, charge_pico, payable_pico, energy_j)
			SELECT r.hour, c.id, o.id, o.tier, o.model, pr.id, o.ask_in, o.ask_out, o.provider,
				$4, $4 * r.inp, ($4 - 1) * r.outp, 1, r.inp, 0,
				($4 - 1) * (r.inp * pr.input_micro_usd_per_mtok + r.outp * pr.output_micro_usd_per_mtok),
				($4 - 1) * (r.inp * o.ask_in + r.outp * o.ask_out), $4 * 40.0
			FROM bench_customers c
			CROSS JOIN generate_series(0, $1 - 1) k
			CROSS JOIN LATERAL (SELECT $5::timestamptz + make_interval(hours => (c.idx + k * 11) % $2) AS hour,
				(200 + (c.idx * 37 + k * 11) % 1800)::bigint AS inp, (20 + (c.idx * 13 + k * 7) % 400)::bigint AS outp) r
			JOIN bench_offerings o ON o.idx = (c.idx * 3 + k % 3) % $3
			JOIN LATERAL (SELECT id, input_micro_usd_per_mtok, output_micro_usd_per_mtok FROM prices
				WHERE tier = o.tier AND effective_from <= r.hour ORDER BY effective_from DESC LIMIT 1) pr ON true`,
			[]any{rows, hours, 2 * o.providers, eventsPerRow, p.Start()}},
		{"ledger accounts", `
			INSERT INTO ledger_accounts (kind, owner_account_id, created_at)
			SELECT 'customer_credit', id, $1::timestamptz FROM bench_customers
			UNION ALL SELECT 'provider_payable', id, $1::timestamptz FROM bench_providers
			UNION ALL VALUES ('platform_revenue', NULL::uuid, $1::timestamptz), ('stripe_clearing', NULL, $1::timestamptz)`, []any{p.Start()}},
		// A purchase per customer at the month's start: $1, or 5 cents for every fourth, who
		// ends the month overdrawn.
		{"purchases", `
			WITH t AS (
				INSERT INTO ledger_transactions (kind, idempotency_key, memo, occurred_at, created_at)
				SELECT 'purchase', 'bench-purchase:' || c.id, 'Credits bought with Stripe', $1, $1 FROM bench_customers c
				RETURNING id, idempotency_key),
			amounts AS (
				SELECT t.id, la.id AS customer, CASE WHEN c.idx % 4 = 0 THEN 50000000000 ELSE 1000000000000 END AS amount
				FROM t JOIN bench_customers c ON t.idempotency_key = 'bench-purchase:' || c.id
				JOIN ledger_accounts la ON la.kind = 'customer_credit' AND la.owner_account_id = c.id)
			INSERT INTO ledger_postings (transaction_id, ledger_account_id, amount)
			SELECT id, customer, amount FROM amounts
			UNION ALL
			SELECT id, (SELECT id FROM ledger_accounts WHERE kind = 'stripe_clearing'), -amount FROM amounts`,
			[]any{p.Start().Add(time.Hour)}},
		// A usage transaction per customer, as the meter posts one per customer per batch.
		{"usage postings", `
			WITH t AS (
				INSERT INTO ledger_transactions (kind, idempotency_key, memo, occurred_at, created_at)
				SELECT 'usage', 'bench-usage:' || id, 'Usage', $1, $1 FROM bench_customers
				RETURNING id, substr(idempotency_key, 13)::uuid AS customer),
			sums AS (
				SELECT account_id, provider_account_id, sum(charge_pico) AS charge, sum(payable_pico) AS payable
				FROM usage_hourly GROUP BY 1, 2)
			INSERT INTO ledger_postings (transaction_id, ledger_account_id, amount)
			SELECT t.id, la.id, -sum(s.charge) FROM t JOIN sums s ON s.account_id = t.customer
				JOIN ledger_accounts la ON la.kind = 'customer_credit' AND la.owner_account_id = t.customer GROUP BY 1, 2
			UNION ALL
			SELECT t.id, la.id, s.payable FROM t JOIN sums s ON s.account_id = t.customer
				JOIN ledger_accounts la ON la.kind = 'provider_payable' AND la.owner_account_id = s.provider_account_id
			UNION ALL
			SELECT t.id, (SELECT id FROM ledger_accounts WHERE kind = 'platform_revenue'), sum(s.charge - s.payable)
				FROM t JOIN sums s ON s.account_id = t.customer GROUP BY 1`, []any{p.End().Add(-time.Hour)}},
	}
	for _, s := range steps {
		start := time.Now()
		if _, err := d.Pool.Exec(ctx, s.sql, s.args...); err != nil {
			return fmt.Errorf("seed %s: %w", s.what, err)
		}
		progress("seeded %s in %s", s.what, time.Since(start).Round(time.Millisecond))
	}
	return nil
}
