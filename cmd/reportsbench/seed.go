package main

import (
	"context"
	"fmt"
	"iter"
	"strconv"
	"time"

	"github.com/gpumarket/gpumarket/cmd/internal/scratchdb"
	"github.com/gpumarket/gpumarket/services/carbon"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/usagestore"
)

// seedChunk is how many usage rows one COPY writes, so that progress shows.
const seedChunk = 1_000_000

// benchModel is the model every rig of the benchmark serves.
const benchModel = "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B"

// ttftMs is every usage row's time to first token.
var ttftMs = 40.0

// seeded is what seed wrote: the customers (the i-th named "Customer i") and the rigs.
type seeded struct {
	customers []string
	offerings []catalog.LoadedOffering
	prices    catalog.PriceBook
}

// seed writes, through the owners' bulk loads, the accounts, rigs and price book, o.events usage rows spread
// evenly over the accounts and the days to end, and the rollups that sum them. Row i belongs to account
// i % accounts, at a time that walks through the period; each account uses two rigs. It returns the customers.
func seed(ctx context.Context, d *scratchdb.Database, o options, end time.Time) ([]string, error) {
	start := end.AddDate(0, 0, -o.days)
	var s seeded
	step := func(what string, load func() error) error {
		began := time.Now()
		if err := load(); err != nil {
			return fmt.Errorf("seed %s: %w", what, err)
		}
		progress("seeded %s in %s", what, time.Since(began).Round(time.Millisecond))
		return nil
	}
	steps := []struct {
		what string
		load func() error
	}{
		{"customers", func() (err error) {
			s.customers, err = d.LoadAccounts(ctx, "Customer", o.accounts, start)
			return err
		}},
		{"prices", func() error {
			since, created := start.AddDate(-1, 0, 0), start.AddDate(-1, 0, 0)
			_, err := catalog.CopyPrices(ctx, d.Pool, []catalog.LoadedPrice{
				{Tier: catalog.TierRealtime, Input: 600000, Output: 1200000, EffectiveFrom: since, CreatedAt: created},
				{Tier: catalog.TierStandard, Input: 150000, Output: 300000, EffectiveFrom: since, CreatedAt: created},
				{Tier: catalog.TierBatch, Input: 70000, Output: 130000, EffectiveFrom: since, CreatedAt: created},
				{Tier: catalog.TierRealtime, Input: 660000, Output: 1320000, EffectiveFrom: start.AddDate(0, 0, o.days/2), CreatedAt: created},
			})
			if err == nil {
				s.prices, err = catalog.ReadPriceBook(ctx, d.Pool)
			}
			return err
		}},
		// Twenty providers with two rigs each, in five regions, at home or in a data centre.
		{"rigs", func() error {
			providers, err := d.LoadAccounts(ctx, "Provider", 20, start)
			if err != nil {
				return err
			}
			tiers := []catalog.Tier{catalog.TierRealtime, catalog.TierStandard, catalog.TierBatch}
			regions := []string{"no", "fr", "de", "pl", "us"}
			for p, provider := range providers {
				for k := range 2 {
					idx := p*2 + k
					rig := catalog.LoadedOffering{ID: scratchdb.NewID(), ProviderAccountID: provider, GPU: "rtx-4090", GPUCount: 4,
						Region: regions[idx%5], Model: benchModel, AskInput: 60000, AskOutput: 120000, Tier: tiers[idx%3],
						Status: catalog.StatusActive, SeedKey: fmt.Sprintf("bench-%d", idx), Site: carbon.SiteHome,
						CreatedAt: start, UpdatedAt: start}
					if idx%3 == 0 {
						rig.GPU, rig.GPUCount = "h100-pcie", 1
					}
					if idx%3 == 0 || idx%4 == 1 {
						rig.Site = carbon.SiteDatacentre
					}
					if idx%7 == 0 {
						pue := 1.15
						rig.StatedPUE = &pue
					}
					s.offerings = append(s.offerings, rig)
				}
			}
			_, err = catalog.CopyOfferings(ctx, d.Pool, s.offerings)
			return err
		}},
	}
	for _, st := range steps {
		if err := step(st.what, st.load); err != nil {
			return nil, err
		}
	}
	// Each month of the rows gets its partition first, as the meter makes it (docs/usage-storage.md).
	var months []time.Time
	for m := start; !m.After(end); m = m.AddDate(0, 0, 1) {
		months = append(months, m)
	}
	if err := usagestore.New(usagestore.Config{Pool: d.Pool, AttachMonth: metering.AttachMonth}).MakeMonths(ctx, append(months, end)); err != nil {
		return nil, fmt.Errorf("seed the usage months: %w", err)
	}
	w := usageRows{seeded: &s, accounts: int64(o.accounts), perAccount: int64((o.events + o.accounts - 1) / o.accounts),
		start: start, span: int64(end.Sub(start).Seconds())}
	for from := 0; from < o.events; from += seedChunk {
		to := min(from+seedChunk, o.events)
		if err := step(fmt.Sprintf("usage rows %d to %d of %d", from, to, o.events), func() error {
			_, err := metering.CopyUsage(ctx, d.Pool, w.rows(int64(from), int64(to)))
			return err
		}); err != nil {
			return nil, err
		}
	}
	// The rollups the meter would have kept for those rows.
	return s.customers, step("rollups", func() error {
		_, err := metering.RollUpCopiedUsage(ctx, d.Pool)
		return err
	})
}

// usageRows are the benchmark's usage rows.
type usageRows struct {
	*seeded
	accounts, perAccount int64
	start                time.Time
	span                 int64 // seconds
}

// rows are rows from to to-1.
func (w usageRows) rows(from, to int64) iter.Seq[metering.UsageRow] {
	return func(yield func(metering.UsageRow) bool) {
		for i := from; i < to; i++ {
			if !yield(w.row(i)) {
				return
			}
		}
	}
}

// row is row i: of customer i % accounts, at the i / accounts-th of its times, on one of its two rigs.
func (w usageRows) row(i int64) metering.UsageRow {
	c := i % w.accounts
	at := w.start.Add(time.Duration((i/w.accounts)*w.span/w.perAccount) * time.Second)
	inp, outp := 200+i%1800, 20+i%400
	o := &w.offerings[(c*2+(i/w.accounts)%2)%int64(len(w.offerings))]
	pr, _ := w.prices.At(o.Tier, "", at)
	source := "estimated"
	if i%4 == 0 {
		source = "measured"
	}
	return metering.UsageRow{EventID: "evt_" + strconv.FormatInt(i, 10), RequestID: "req_" + strconv.FormatInt(i, 10),
		AccountID: w.customers[c], OfferingID: o.ID, ProviderAccountID: o.ProviderAccountID, Tier: string(o.Tier),
		Model: benchModel, InputTokens: inp, OutputTokens: outp, TTFTMs: &ttftMs, DurationMs: 900,
		EnergyJ: float64((inp+outp)*35) / 100, EnergySource: source, Status: "ok", PriceID: pr.ID,
		InputPrice: int64(pr.Input), OutputPrice: int64(pr.Output), AskInputPrice: 60000, AskOutputPrice: 120000,
		Charge:  money.Pico(inp*int64(pr.Input) + outp*int64(pr.Output)),
		Payable: money.Pico(inp*60000 + outp*120000), OccurredAt: at, MeteredAt: at, StreamSeq: i}
}
