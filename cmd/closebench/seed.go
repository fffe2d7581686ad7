package main

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/gpumarket/gpumarket/cmd/internal/scratchdb"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/money"
)

// month is the benchmark's month as seed writes it: its customers and providers (their ids, the i-th named
// "Customer i" or "Provider i"), their offerings and the price book.
type month struct {
	period    invoicing.Period
	customers []string
	providers []string
	offerings []catalog.LoadedOffering
	prices    catalog.PriceBook
	rows      int // rollup rows per customer
	hours     int // in the month
}

// seed writes the benchmark's month through the owners' bulk loads: accounts, offerings and the price book, the
// rollups of its requests, and the ledger postings the meter would have posted for them.
func seed(ctx context.Context, d *scratchdb.Database, o options, p invoicing.Period) error {
	m := month{period: p, rows: o.events / (o.accounts * eventsPerRow), hours: int(p.End().Sub(p.Start()).Hours())}
	change := time.Date(p.Start().Year(), p.Start().Month(), 16, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		what string
		load func() error
	}{
		{"customers", func() (err error) {
			m.customers, err = d.LoadAccounts(ctx, "Customer", o.accounts, p.Start())
			return err
		}},
		{"providers", func() (err error) {
			m.providers, err = d.LoadAccounts(ctx, "Provider", o.providers, p.Start())
			return err
		}},
		// The price book: each tier's price from long before, and a change on the 16th.
		{"prices", func() error {
			since, created := p.Start().AddDate(-1, 0, 0), p.Start().AddDate(-1, 0, 0)
			_, err := catalog.CopyPrices(ctx, d.Pool, []catalog.LoadedPrice{
				{Tier: catalog.TierRealtime, Input: 300000, Output: 600000, EffectiveFrom: since, CreatedAt: created},
				{Tier: catalog.TierStandard, Input: 150000, Output: 300000, EffectiveFrom: since, CreatedAt: created},
				{Tier: catalog.TierBatch, Input: 80000, Output: 160000, EffectiveFrom: since, CreatedAt: created},
				{Tier: catalog.TierRealtime, Input: 330000, Output: 660000, EffectiveFrom: change, CreatedAt: created},
				{Tier: catalog.TierStandard, Input: 165000, Output: 330000, EffectiveFrom: change, CreatedAt: created},
				{Tier: catalog.TierBatch, Input: 88000, Output: 176000, EffectiveFrom: change, CreatedAt: created},
			})
			if err == nil {
				m.prices, err = catalog.ReadPriceBook(ctx, d.Pool)
			}
			return err
		}},
		// Two offerings per provider, asking below their tier's prices.
		{"offerings", func() error {
			tiers := []catalog.Tier{catalog.TierRealtime, catalog.TierStandard, catalog.TierBatch}
			for i, provider := range m.providers {
				for k := range 2 {
					idx := i*2 + k
					ask := money.MicroUSD(20000 + (idx%20)*1000)
					m.offerings = append(m.offerings, catalog.LoadedOffering{ID: scratchdb.NewID(), ProviderAccountID: provider,
						GPU: "rtx-4090", GPUCount: 4, Region: "eu", Model: fmt.Sprintf("bench/model-%d", idx%4),
						AskInput: ask, AskOutput: 2 * ask, Tier: tiers[idx%3], Status: catalog.StatusActive,
						SeedKey: fmt.Sprintf("bench-%d", idx), CreatedAt: p.Start(), UpdatedAt: p.Start()})
				}
			}
			_, err := catalog.CopyOfferings(ctx, d.Pool, m.offerings)
			return err
		}},
		{"rollups", func() error {
			_, err := metering.CopyHourly(ctx, d.Pool, m.rollups())
			return err
		}},
		{"ledger", func() error { return m.loadLedger(ctx, d) }},
	}
	for _, s := range steps {
		start := time.Now()
		if err := s.load(); err != nil {
			return fmt.Errorf("seed %s: %w", s.what, err)
		}
		progress("seeded %s in %s", s.what, time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// rollups are each customer's rows: one an hour for m.rows hours spread over the month, each of ten requests at
// one of three offerings, one request without output.
func (m *month) rollups() iter.Seq[metering.HourlyRow] {
	return func(yield func(metering.HourlyRow) bool) {
		for c := range m.customers {
			for k := range m.rows {
				if !yield(m.rollup(c, k)) {
					return
				}
			}
		}
	}
}

// rollup is customer c's k-th row.
func (m *month) rollup(c, k int) metering.HourlyRow {
	hour := m.period.Start().Add(time.Duration((c+k*11)%m.hours) * time.Hour)
	inp, outp := int64(200+(c*37+k*11)%1800), int64(20+(c*13+k*7)%400)
	o := &m.offerings[(c*3+k%3)%len(m.offerings)]
	pr, _ := m.prices.At(o.Tier, "", hour)
	const n = eventsPerRow
	return metering.HourlyRow{Hour: hour, AccountID: m.customers[c], OfferingID: o.ID, ProviderAccountID: o.ProviderAccountID,
		Tier: string(o.Tier), Model: o.Model, PriceID: pr.ID, AskInputPrice: int64(o.AskInput), AskOutputPrice: int64(o.AskOutput),
		Requests: n, InputTokens: n * inp, OutputTokens: (n - 1) * outp,
		UnchargedRequests: 1, UnchargedInputTokens: inp, UnchargedOutputTokens: 0,
		Charge:  money.Pico((n - 1) * (inp*int64(pr.Input) + outp*int64(pr.Output))),
		Payable: money.Pico((n - 1) * (inp*int64(o.AskInput) + outp*int64(o.AskOutput))),
		EnergyJ: n * 40.0}
}

// loadLedger writes the ledger: an account per customer and per provider and the platform's two; a purchase per
// customer at the month's start, of $1, or 5 cents for every fourth, who ends the month overdrawn; and a usage
// transaction per customer at the month's end, as the meter posts one per customer per batch, as if the month
// were one batch: the customer's credit down by its charges, each provider's payable up by its asks, the
// platform's revenue the margin.
func (m *month) loadLedger(ctx context.Context, d *scratchdb.Database) error {
	start := m.period.Start()
	var accts []ledger.LoadedAccount
	open := func(kind ledger.AccountKind, owner string) ledger.LedgerAccountID {
		id := ledger.LedgerAccountID(scratchdb.NewID())
		accts = append(accts, ledger.LoadedAccount{ID: id, Kind: kind, OwnerAccountID: owner, CreatedAt: start})
		return id
	}
	credit := map[string]ledger.LedgerAccountID{}
	for _, c := range m.customers {
		credit[c] = open(ledger.AccountCustomerCredit, c)
	}
	payable := map[string]ledger.LedgerAccountID{}
	for _, p := range m.providers {
		payable[p] = open(ledger.AccountProviderPayable, p)
	}
	revenue, clearing := open(ledger.AccountPlatformRevenue, ""), open(ledger.AccountStripeClearing, "")
	if _, err := ledger.CopyAccounts(ctx, d.Pool, accts); err != nil {
		return err
	}

	// What each customer owes and each provider is owed of it, from the rollups.
	type owed struct {
		charge    money.Pico
		providers map[string]money.Pico
	}
	usage := make([]owed, len(m.customers))
	for c := range m.customers {
		usage[c].providers = map[string]money.Pico{}
		for k := range m.rows {
			r := m.rollup(c, k)
			usage[c].charge += r.Charge
			usage[c].providers[r.ProviderAccountID] += r.Payable
		}
	}
	var txns []ledger.Transaction
	paidAt, usedAt := start.Add(time.Hour), m.period.End().Add(-time.Hour)
	for c, id := range m.customers {
		amount := money.Pico(1_000_000_000_000)
		if c%4 == 0 {
			amount = 50_000_000_000
		}
		txns = append(txns, ledger.Transaction{ID: scratchdb.NewID(), Kind: ledger.TransactionPurchase, IdempotencyKey: "bench-purchase:" + id,
			Memo: "Credits bought with Stripe", OccurredAt: paidAt, CreatedAt: paidAt,
			Postings: []ledger.Posting{{Account: credit[id], Amount: amount}, {Account: clearing, Amount: -amount}}})
	}
	for c, id := range m.customers {
		if len(usage[c].providers) == 0 {
			continue
		}
		postings := []ledger.Posting{{Account: credit[id], Amount: -usage[c].charge}}
		margin := usage[c].charge
		for _, p := range m.providers {
			if owed, ok := usage[c].providers[p]; ok {
				postings = append(postings, ledger.Posting{Account: payable[p], Amount: owed})
				margin -= owed
			}
		}
		postings = append(postings, ledger.Posting{Account: revenue, Amount: margin})
		txns = append(txns, ledger.Transaction{ID: scratchdb.NewID(), Kind: ledger.TransactionUsage, IdempotencyKey: "bench-usage:" + id,
			Memo: "Usage", OccurredAt: usedAt, CreatedAt: usedAt, Postings: postings})
	}
	_, err := ledger.CopyTransactions(ctx, d.Pool, txns)
	return err
}
