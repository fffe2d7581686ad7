package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/money"
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
	stored, err := metering.SumStored(ctx, pool)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if stored.UsageRows != n || stored.EventIDs != n || stored.RequestIDs != n || stored.Rejected != 0 || stored.Flagged != 0 {
		return fmt.Errorf("verify: %d usage rows (%d event ids, %d request ids), %d rejections and %d flagged; want %d, %d, %d, 0 and 0",
			stored.UsageRows, stored.EventIDs, stored.RequestIDs, stored.Rejected, stored.Flagged, n, n, n)
	}
	if !stored.Charge.Equal(money.Pico(charge)) || !stored.Payable.Equal(money.Pico(payable)) {
		return fmt.Errorf("verify: the usage rows charge %s and owe providers %s; the workload makes %s and %s",
			stored.Charge, stored.Payable, money.Pico(charge), money.Pico(payable))
	}

	// Balances are read from the postings, not the cached balances, and the cached balances
	// are checked against them.
	posted, err := ledger.SumPosted(ctx, pool)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	customers, providers := posted.ByKind[ledger.AccountCustomerCredit], posted.ByKind[ledger.AccountProviderPayable]
	revenue := posted.ByKind[ledger.AccountPlatformRevenue]
	if !customers.Equal(money.Pico(-charge)) || !providers.Equal(money.Pico(payable)) || !revenue.Equal(money.Pico(charge-payable)) ||
		posted.Total.Sign() != 0 || posted.StaleBalances != 0 {
		return fmt.Errorf("verify: the ledger moved %s from customers, %s to providers, %s to revenue (total %s, %d stale balances); want %s, %s, %s, 0 and 0",
			customers.Neg(), providers, revenue, posted.Total, posted.StaleBalances, money.Pico(charge), money.Pico(payable), money.Pico(charge-payable))
	}

	rolled, err := metering.SumHourly(ctx, pool)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if rolled.Requests != n || !rolled.Charge.Equal(money.Pico(charge)) || !rolled.Payable.Equal(money.Pico(payable)) {
		return fmt.Errorf("verify: the rollups count %d requests, %s charged, %s payable; want %d, %s, %s",
			rolled.Requests, rolled.Charge, rolled.Payable, n, money.Pico(charge), money.Pico(payable))
	}

	spent, err := metering.SumKeySpend(ctx, pool)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if spent.Requests != n || !spent.Charge.Equal(money.Pico(charge)) || spent.Keys != int64(len(w.Customers)) {
		return fmt.Errorf("verify: the API keys' monthly spend counts %d requests and %s charged over %d keys; want %d, %s, %d",
			spent.Requests, spent.Charge, spent.Keys, n, money.Pico(charge), len(w.Customers))
	}
	return nil
}
