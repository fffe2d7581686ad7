package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// verify checks that the workload was metered exactly once: every event stored once and none
// refused or flagged, the charges and payables the workload adds up to, a ledger that balances
// and moved exactly those amounts, and rollups and API key spend that sum to the rows.
func verify(ctx context.Context, pool *pgxpool.Pool, rounds ...workload) error {
	var charge, payable, n int64
	for _, w := range rounds {
		c, p := w.expected()
		charge, payable, n = charge+c, payable+p, n+int64(w.Events)
	}
	w := rounds[0]
	var rows, eventIDs, requestIDs, rejected, flagged, storedCharge, storedPayable int64
	if err := pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT event_id), count(DISTINCT request_id),
		coalesce(sum(charge_pico), 0)::bigint, coalesce(sum(payable_pico), 0)::bigint,
		(SELECT coalesce(sum(rejected), 0)::bigint FROM usage_rejection_counts), count(*) FILTER (WHERE flag IS NOT NULL)
		FROM usage_events`).Scan(&rows, &eventIDs, &requestIDs, &storedCharge, &storedPayable, &rejected, &flagged); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if rows != n || eventIDs != n || requestIDs != n || rejected != 0 || flagged != 0 {
		return fmt.Errorf("verify: %d usage rows (%d event ids, %d request ids), %d rejections and %d flagged; want %d, %d, %d, 0 and 0",
			rows, eventIDs, requestIDs, rejected, flagged, n, n, n)
	}
	if storedCharge != charge || storedPayable != payable {
		return fmt.Errorf("verify: the usage rows charge %d and owe providers %d picodollars; the workload makes %d and %d",
			storedCharge, storedPayable, charge, payable)
	}

	// Balances are read from the postings, not the cached balances, and the cached balances
	// are checked against them.
	var customers, providers, revenue, total, stale int64
	if err := pool.QueryRow(ctx, `
		WITH sums AS (
			SELECT a.id, a.kind, a.balance, coalesce(sum(p.amount), 0) AS posted
			FROM ledger_accounts a LEFT JOIN ledger_postings p ON p.ledger_account_id = a.id
			GROUP BY a.id)
		SELECT coalesce(sum(posted) FILTER (WHERE kind = 'customer_credit'), 0)::bigint,
			coalesce(sum(posted) FILTER (WHERE kind = 'provider_payable'), 0)::bigint,
			coalesce(sum(posted) FILTER (WHERE kind = 'platform_revenue'), 0)::bigint,
			coalesce(sum(posted), 0)::bigint,
			count(*) FILTER (WHERE balance <> posted)
		FROM sums`).Scan(&customers, &providers, &revenue, &total, &stale); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if customers != -charge || providers != payable || revenue != charge-payable || total != 0 || stale != 0 {
		return fmt.Errorf("verify: the ledger moved %d from customers, %d to providers, %d to revenue (total %d, %d stale balances); want %d, %d, %d, 0 and 0",
			customers, providers, revenue, total, stale, -charge, payable, charge-payable)
	}

	var requests, rolledCharge, rolledPayable int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(requests), 0)::bigint, coalesce(sum(charge_pico), 0)::bigint,
		coalesce(sum(payable_pico), 0)::bigint FROM usage_hourly`).Scan(&requests, &rolledCharge, &rolledPayable); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if requests != n || rolledCharge != charge || rolledPayable != payable {
		return fmt.Errorf("verify: the rollups count %d requests, %d charged, %d payable; want %d, %d, %d",
			requests, rolledCharge, rolledPayable, n, charge, payable)
	}

	var keyRequests, keyCharge, keys int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(requests), 0)::bigint, coalesce(sum(charge_pico), 0)::bigint,
		count(DISTINCT api_key_id) FROM api_key_spend`).Scan(&keyRequests, &keyCharge, &keys); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if keyRequests != n || keyCharge != charge || keys != int64(len(w.Customers)) {
		return fmt.Errorf("verify: the API keys' monthly spend counts %d requests and %d charged over %d keys; want %d, %d, %d",
			keyRequests, keyCharge, keys, n, charge, len(w.Customers))
	}
	return nil
}
