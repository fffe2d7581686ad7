package reports_test

import (
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/fixtures"
)

// One month's line of standard usage whose hours straddle two realtime changes: the tier's
// default moving on the 15th, then the model's own realtime row from the 18th. Each hour's
// tokens take the realtime price in force at it: $1.80 before the 15th (the default at $0.60
// and $1.20), $3.00 from the 18th (the model's own row at $1.00 and $2.00), and the line's
// spend is rounded once, as the invoice's line is.
func TestSavingsOfAMonthLineAcrossRealtimeChanges(t *testing.T) {
	w := newWorld(t)
	w.price("realtime", day(time.January, 15, 0), 800_000, 1_600_000)
	fixtures.Price(t, w.pool, "realtime", day(time.January, 18, 0), 1_000_000, 2_000_000, fixtures.ForModel(model))
	provider, customer := w.account("rigs"), w.account("customer")
	r := w.rig(provider, "rtx-4090", 4, "de", "home", nil)
	w.use(request{customer: customer, rig: r, tier: catalog.TierStandard, at: day(time.January, 10, 9), in: 1_000_000, out: 1_000_000, energyJ: 10})
	w.use(request{customer: customer, rig: r, tier: catalog.TierStandard, at: day(time.January, 20, 9), in: 1_000_000, out: 1_000_000, energyJ: 10})
	w.use(request{customer: customer, rig: r, tier: catalog.TierStandard, at: day(time.January, 20, 11), in: 5_000, out: 0, energyJ: 1})

	s, err := w.reports.Savings(w.ctx(), customer, query(t, "2026-01-01", "2026-01-31", "month"))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Rows) != 1 {
		t.Fatalf("rows = %+v, want one", s.Rows)
	}
	row := s.Rows[0]
	if row.Tier != "standard" || row.Requests != 3 || row.Spend != usd(t, "0.90") || row.Baseline != usd(t, "4.80") ||
		row.SavingsPct != "81.3" || row.InvoiceSpendUSD != "0.90" {
		t.Errorf("row = %+v, want standard, 3 requests, $0.90 against $4.80 (81.3%%)", row)
	}
	if inv := s.Totals.Invoiced; inv == nil || inv.SpendCents != 90 || inv.BaselineCents != 480 || inv.SavedCents != 390 {
		t.Errorf("invoiced = %+v, want 90 against 480 cents", s.Totals.Invoiced)
	}
}
