package reports_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/carbon"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/reports"
)

func day(m time.Month, d, h int) time.Time { return time.Date(2026, m, d, h, 0, 0, 0, time.UTC) }

func usd(t *testing.T, s string) money.BigPico {
	t.Helper()
	p, err := money.ParseUSD(s)
	if err != nil {
		t.Fatal(err)
	}
	return money.BigPicoOf(p)
}

func query(t *testing.T, from, to, group string) reports.Query {
	t.Helper()
	q, err := reports.ParseQuery(from, to, group, day(time.June, 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// Savings against the realtime price in force at each hour, from requests the meter priced:
// a million input and a million output tokens on standard before the realtime price moves
// ($0.45 paid, $1.80 at realtime), the same after it ($2.40 at realtime), the same on batch
// ($0.20 paid), a request with no output (charged nothing, in no baseline), and a realtime
// request that is its own baseline.
func TestSavingsAgainstRealtimeInForce(t *testing.T) {
	w := newWorld(t)
	w.price("realtime", day(time.January, 15, 0), 800_000, 1_600_000)
	provider, customer := w.account("rigs"), w.account("customer")
	r := w.rig(provider, "rtx-4090", 4, "de", "home", nil)
	w.use(request{customer: customer, rig: r, tier: catalog.TierStandard, at: day(time.January, 10, 9), in: 1_000_000, out: 1_000_000, energyJ: 10})
	w.use(request{customer: customer, rig: r, tier: catalog.TierStandard, at: day(time.January, 20, 9), in: 1_000_000, out: 1_000_000, energyJ: 10})
	w.use(request{customer: customer, rig: r, tier: catalog.TierBatch, at: day(time.January, 20, 10), in: 1_000_000, out: 1_000_000, energyJ: 10})
	w.use(request{customer: customer, rig: r, tier: catalog.TierStandard, at: day(time.January, 20, 11), in: 5_000, out: 0, energyJ: 1})
	w.use(request{customer: customer, rig: r, tier: catalog.TierRealtime, at: day(time.January, 21, 11), in: 1_000, out: 2_000, energyJ: 1})

	s, err := w.reports.Savings(w.ctx(), customer, query(t, "2026-01-01", "2026-01-31", "day"))
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		period              time.Time
		tier                string
		spend, baseline, pc string
	}
	wants := []want{
		{day(time.January, 10, 0), "standard", "0.45", "1.80", "75.0"},
		{day(time.January, 20, 0), "standard", "0.45", "2.40", "81.3"},
		{day(time.January, 20, 0), "batch", "0.20", "2.40", "91.7"},
		{day(time.January, 21, 0), "realtime", "0.004", "0.004", "0.0"},
	}
	if len(s.Rows) != len(wants) {
		t.Fatalf("rows = %+v, want %d", s.Rows, len(wants))
	}
	for i, wt := range wants {
		row := s.Rows[i]
		if !row.Period.Equal(wt.period) || row.Tier != wt.tier || row.Spend != usd(t, wt.spend) || row.Baseline != usd(t, wt.baseline) ||
			row.Savings != usd(t, wt.baseline).Add(usd(t, wt.spend).Neg()) || row.SavingsPct != wt.pc || row.MethodVersion != carbon.MethodVersion {
			t.Errorf("row %d = %s %s spend %s baseline %s savings %s (%s%%) %q, want %s %s %s %s %s%%", i, row.Period, row.Tier,
				row.Spend, row.Baseline, row.Savings, row.SavingsPct, row.MethodVersion, wt.period, wt.tier, wt.spend, wt.baseline, wt.pc)
		}
	}
	if s.Rows[1].Requests != 2 || s.Rows[1].InputTokens != 1_005_000 {
		t.Errorf("the uncharged request is not counted: %+v", s.Rows[1])
	}
	// The totals, and the spend against the account's usage rows.
	var charged money.BigPico
	w.scan(`SELECT sum(charge_pico) FROM usage_events WHERE account_id = $1`, []any{customer}, &charged)
	tot := s.Totals
	if tot.Spend != charged || tot.Spend != usd(t, "1.104") || tot.Baseline != usd(t, "6.604") ||
		tot.Savings != tot.Baseline.Add(tot.Spend.Neg()) || tot.SavingsPct != "83.3" || tot.Requests != 5 {
		t.Errorf("totals = %+v, usage rows charged %s", tot, charged)
	}
	// The benchmark's H100 at $0.185 per million chargeable tokens: 6.003 million of them.
	if ref := s.Reference; ref == nil || ref.Cost != usd(t, "1.110555") || ref.USDPerMT != "0.185" ||
		ref.Source != "benchmark paper's assumption, AIBC 2025" {
		t.Errorf("reference = %+v", s.Reference)
	}
}

func TestRealtimeOnlyCustomerSavesNothing(t *testing.T) {
	w := newWorld(t)
	w.price("realtime", day(time.January, 15, 0), 800_000, 1_600_000)
	provider, customer := w.account("rigs"), w.account("customer")
	r := w.rig(provider, "h100-pcie", 1, "us", "datacentre", nil)
	for i, at := range []time.Time{day(time.January, 3, 1), day(time.January, 14, 23), day(time.January, 15, 0), day(time.February, 2, 5)} {
		w.use(request{customer: customer, rig: r, tier: catalog.TierRealtime, at: at, in: int64(1000 + 77*i), out: int64(333 + i), energyJ: 5})
	}
	s, err := w.reports.Savings(w.ctx(), customer, query(t, "2026-01-01", "2026-02-28", "month"))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Rows) != 2 || s.Totals.Spend.Sign() == 0 || s.Totals.Savings.Sign() != 0 || s.Totals.SavingsPct != "0.0" {
		t.Fatalf("realtime-only savings = %+v", s)
	}
	for _, row := range s.Rows {
		if row.Savings.Sign() != 0 || row.Spend != row.Baseline {
			t.Errorf("row %+v saves", row)
		}
	}
}

// Another account's usage never shows, on the same rigs in the same hours.
func TestReportsAreScopedToTheAccount(t *testing.T) {
	w := newWorld(t)
	provider, a, b := w.account("rigs"), w.account("a"), w.account("b")
	r := w.rig(provider, "rtx-4090", 4, "de", "home", nil)
	w.use(request{customer: a, rig: r, tier: catalog.TierStandard, at: day(time.March, 3, 3), in: 1000, out: 1000, energyJ: 100})
	w.use(request{customer: b, rig: r, tier: catalog.TierStandard, at: day(time.March, 3, 3), in: 9000, out: 9000, energyJ: 900})
	q := query(t, "2026-03-01", "2026-03-31", "month")
	s, err := w.reports.Savings(w.ctx(), a, q)
	if err != nil {
		t.Fatal(err)
	}
	c, err := w.reports.Carbon(w.ctx(), a, q)
	if err != nil {
		t.Fatal(err)
	}
	if s.Totals.Requests != 1 || s.Totals.InputTokens != 1000 || s.Totals.Spend != usd(t, "0.00045") {
		t.Errorf("a's savings show b's usage: %+v", s.Totals)
	}
	if c.Totals.Requests != 1 || c.Totals.Tokens != 2000 || math.Abs(c.Totals.EnergyKWh-100/3.6e6) > 1e-15 {
		t.Errorf("a's carbon shows b's usage: %+v", c.Totals)
	}
	none, err := w.reports.Savings(w.ctx(), w.account("c"), q)
	if err != nil || len(none.Rows) != 0 || none.Totals.Spend.Sign() != 0 || none.Totals.SavingsPct != "" {
		t.Errorf("an account without usage = %+v, %v", none, err)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// Carbon from rigs in different regions and sites: energy x the region's grid x the rig's PUE
// (stated, or the site's default), measured and estimated apart, beside the same tokens on the
// H100 PCIe reference at the same grid and a data centre's PUE.
func TestCarbonByRegionSiteAndPUE(t *testing.T) {
	w := newWorld(t)
	provider, customer := w.account("rigs"), w.account("customer")
	stated := 1.12
	home := w.rig(provider, "rtx-4090", 4, "de", "home", nil)            // 381 g/kWh, PUE 1.0
	dc := w.rig(provider, "rtx-4090", 2, "de", "datacentre", nil)        // 381 g/kWh, PUE 1.3
	h100 := w.rig(provider, "h100-pcie", 1, "fr", "datacentre", &stated) // 56 g/kWh, PUE 1.12
	elsewhere := w.rig(provider, "rtx-4090", 4, "eu-west", "home", nil)  // not listed: world, 481 g/kWh
	w.use(request{customer: customer, rig: home, tier: catalog.TierStandard, at: day(time.April, 2, 1), in: 600_000, out: 400_000, energyJ: 3.6e6, measured: true})
	w.use(request{customer: customer, rig: home, tier: catalog.TierStandard, at: day(time.April, 2, 2), in: 1000, out: 1000, energyJ: 1.8e6})
	w.use(request{customer: customer, rig: dc, tier: catalog.TierStandard, at: day(time.April, 2, 3), in: 1000, out: 1000, energyJ: 3.6e6})
	w.use(request{customer: customer, rig: h100, tier: catalog.TierRealtime, at: day(time.April, 2, 4), in: 1000, out: 1000, energyJ: 7.2e6, measured: true, duration: 3_600_000})
	w.use(request{customer: customer, rig: elsewhere, tier: catalog.TierBatch, at: day(time.April, 3, 4), in: 1000, out: 1000, energyJ: 3.6e6})

	c, err := w.reports.Carbon(w.ctx(), customer, query(t, "2026-04-01", "2026-04-30", "month"))
	if err != nil {
		t.Fatal(err)
	}
	jpt := carbon.ReferenceFor(model).JoulesPerToken() // 350 W / 3011.13 tokens/s
	type want struct {
		tier, region             string
		tokens                   int64
		kwh, measured, grid, pue float64
		g                        float64
	}
	wants := []want{
		// 1 kWh measured + 0.5 kWh estimated at home (PUE 1), 1 kWh in a data centre (1.3).
		{"realtime", "fr", 2000, 2, 2, 56, 1.12, 2 * 56 * 1.12},
		{"standard", "de", 1_004_000, 2.5, 1, 381, (1.5*1.0 + 1*1.3) / 2.5, 1.5*381 + 1*381*1.3},
		{"batch", "eu-west", 2000, 1, 0, 481, 1, 481},
	}
	if len(c.Rows) != len(wants) {
		t.Fatalf("rows = %+v", c.Rows)
	}
	var sumG float64
	for i, wt := range wants {
		r := c.Rows[i]
		baseKWh := float64(wt.tokens) * jpt / 3.6e6
		if r.Tier != wt.tier || r.Region != wt.region || r.Tokens != wt.tokens || !near(r.EnergyKWh, wt.kwh) ||
			!near(r.MeasuredKWh, wt.measured) || !near(r.EstimatedKWh, wt.kwh-wt.measured) || r.GramsPerKWh != wt.grid ||
			!near(r.PUE, wt.pue) || !near(r.GCO2e, wt.g) || !near(r.BaselineKWh, baseKWh) ||
			!near(r.BaselineGCO2e, baseKWh*wt.grid*1.3) || r.MethodVersion != carbon.MethodVersion {
			t.Errorf("row %d = %+v, want %+v (baseline %.9f kWh)", i, r, wt, baseKWh)
		}
		sumG += wt.g
	}
	if c.Rows[2].GridSource == "" || c.Rows[2].GridYear != 2023 {
		t.Errorf("the fallback grid is not named: %+v", c.Rows[2])
	}
	tot := c.Totals
	if !near(tot.GCO2e, sumG) || !near(tot.EnergyKWh, 5.5) || !near(tot.MeasuredKWh, 3) || !near(tot.EstimatedKWh, 2.5) || tot.Requests != 5 {
		t.Errorf("totals = %+v, want %.6f g over 5.5 kWh, 3 measured", tot, sumG)
	}
	// The embodied line: an hour of the H100 (318 kg over 4 years) and 800 ms on each of the
	// others' boards (60 kg over 4 years).
	life := 4 * 365.25 * 24 * 3600 * 1000.0
	emb := 318e3*3_600_000/life + 60e3*800*(4+4+2+4)/life
	if c.Embodied == nil || !near(c.Embodied.GCO2e, emb) || len(c.Embodied.Assumptions) < 3 || !near(tot.EmbodiedGCO2e, emb) {
		t.Errorf("embodied = %+v, want %.6f g", c.Embodied, emb)
	}
	if !near(tot.SCIPerRequest, (sumG+emb)/5) || !near(tot.SCIPerMillionTokens, (sumG+emb)/1_008_000*1e6) {
		t.Errorf("SCI = %v per request, %v per million tokens", tot.SCIPerRequest, tot.SCIPerMillionTokens)
	}
}

// A month's spend as the report rounds it equals its closed invoice's usage lines, cent for
// cent: three lines (standard before and after a price change, batch) of a little over half a
// cent each are 3 cents on the invoice, though their exact sum is 1.8 cents.
func TestMonthSpendEqualsTheInvoice(t *testing.T) {
	w := newWorld(t)
	w.price("standard", day(time.February, 15, 0), 200_000, 500_000)
	provider, customer := w.account("rigs"), w.account("customer")
	finance := w.user(w.account("finance"), "finance@example.test", "finance")
	r := w.rig(provider, "rtx-4090", 4, "de", "home", nil)
	w.use(request{customer: customer, rig: r, tier: catalog.TierStandard, at: day(time.February, 3, 1), in: 40_000, out: 1, energyJ: 1})
	w.use(request{customer: customer, rig: r, tier: catalog.TierStandard, at: day(time.February, 20, 1), in: 30_000, out: 1, energyJ: 1})
	w.use(request{customer: customer, rig: r, tier: catalog.TierBatch, at: day(time.February, 21, 1), in: 90_000, out: 1, energyJ: 1})
	w.at(day(time.March, 5, 0))
	inv := w.invoicing()
	if _, err := inv.Close(w.ctx(), invoicing.CloseInput{Period: invoicing.MonthPeriod(2026, time.February), By: finance}); err != nil {
		t.Fatal(err)
	}
	var id string
	w.scan(`SELECT id::text FROM invoices WHERE account_id = $1`, []any{customer}, &id)
	if res, err := inv.ApproveInvoices(w.ctx(), finance, []string{id}); err != nil || res[0].Err != nil {
		t.Fatalf("approve: %v %+v", err, res)
	}
	invoice, err := inv.Invoice(w.ctx(), id)
	if err != nil || invoice.Status != invoicing.StatusIssued {
		t.Fatalf("invoice %+v: %v", invoice.Status, err)
	}
	byTier := map[string]invoicing.Cents{}
	var usage invoicing.Cents
	for _, l := range invoice.Lines {
		if l.Kind == invoicing.LineUsage {
			byTier[l.Tier] += l.Amount
			usage += l.Amount
		}
	}
	s, err := w.reports.Savings(w.ctx(), customer, query(t, "2026-02-01", "2026-02-28", "month"))
	if err != nil {
		t.Fatal(err)
	}
	if usage != 3 || s.Totals.InvoiceSpendUSD != usage.Decimal() || s.Totals.Spend.Decimal(2) != "0.02" {
		t.Errorf("invoice usage %s, report's invoice spend %s (exact %s)", usage, s.Totals.InvoiceSpendUSD, s.Totals.Spend)
	}
	for _, row := range s.Rows {
		if row.InvoiceSpendUSD != byTier[row.Tier].Decimal() {
			t.Errorf("%s: report %s, invoice %s", row.Tier, row.InvoiceSpendUSD, byTier[row.Tier])
		}
	}
	if len(s.Rows) != 2 || s.Rows[0].InvoiceSpendUSD != "0.02" {
		t.Errorf("rows = %+v", s.Rows)
	}

	// The invoice keeps its period's savings and carbon per tier, as the report computes them,
	// and its document shows them with two charts; once issued they never change.
	c, err := w.reports.Carbon(w.ctx(), customer, query(t, "2026-02-01", "2026-02-28", "month"))
	if err != nil {
		t.Fatal(err)
	}
	if len(invoice.Summary) != 2 {
		t.Fatalf("summary = %+v", invoice.Summary)
	}
	for i, sum := range invoice.Summary {
		row, crow := s.Rows[i], c.Rows[i]
		if sum.Tier != row.Tier || sum.Spend != row.Spend || sum.Baseline != row.Baseline || sum.SpendCents != int64(byTier[sum.Tier]) ||
			!near(sum.GCO2e, crow.GCO2e) || !near(sum.BaselineGCO2e, crow.BaselineGCO2e) || !near(sum.EnergyKWh, crow.EnergyKWh) ||
			sum.MethodVersion != carbon.MethodVersion {
			t.Errorf("summary %+v, report %+v %+v", sum, row, crow)
		}
	}
	doc, err := invoicing.InvoiceDocument(invoice)
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Charts) != 2 || doc.Charts[0].Unit != "USD" || doc.Charts[1].Unit != "gCO2e" || len(doc.Charts[0].Labels) != 2 ||
		doc.Charts[0].Series[0].Values[0] != 0.02 || len(doc.Summary) == 0 || doc.Summary[0].Value != "$0.03" {
		t.Errorf("document summary %+v, charts %+v", doc.Summary, doc.Charts)
	}
	// The saving and its percent are the same on the invoice and in the month's report: one
	// function computes them from the invoice's cents.
	got := s.Totals.Invoiced
	if got == nil || *got != (reports.Invoiced{SpendCents: 3, BaselineCents: 9, SavedCents: 6, SavedPct: "66.7"}) {
		t.Fatalf("the report's invoiced figures: %+v, want 3 cents spent against 9, 6 saved (66.7%%)", got)
	}
	if s.Totals.SavingsPct == got.SavedPct {
		t.Errorf("the exact saving's percent %s: the test no longer tells the exact figures from the invoice's", s.Totals.SavingsPct)
	}
	if len(doc.Summary) < 3 || doc.Summary[1].Value != "$0.09" || doc.Summary[2].Value != "$0.06 (66.7%)" {
		t.Errorf("the invoice's summary %+v, the report's %+v", doc.Summary, got)
	}
	if _, err := w.pool.Exec(w.ctx(), `UPDATE invoice_summaries SET g_co2e = 0 WHERE invoice_id = $1`, id); err == nil {
		t.Error("an issued invoice's summary changed")
	}
}

func TestParseQuery(t *testing.T) {
	now := time.Date(2026, 3, 10, 15, 4, 0, 0, time.UTC)
	q, err := reports.ParseQuery("", "", "", now)
	if err != nil || q.Group != reports.GroupDay || !q.From.Equal(day(time.February, 9, 0)) || !q.To.Equal(day(time.March, 11, 0)) {
		t.Errorf("defaults = %+v, %v: want the 30 days to today by day", q, err)
	}
	q, err = reports.ParseQuery("2026-01-15", "2026-02-03", "month", now)
	if err != nil || !q.From.Equal(day(time.January, 1, 0)) || !q.To.Equal(day(time.March, 1, 0)) {
		t.Errorf("month = %+v, %v: want whole months", q, err)
	}
	for _, c := range []struct{ from, to, group, field string }{
		{"2026-13-01", "", "", "from"},
		{"", "yesterday", "", "to"},
		{"", "", "week", "group"},
		{"2026-03-05", "2026-03-01", "", "to"},
		{"2020-01-01", "2026-01-01", "", "to"},
	} {
		_, err := reports.ParseQuery(c.from, c.to, c.group, now)
		var e *services.Error
		if !errors.As(err, &e) || e.Code != services.CodeInvalid || e.Fields[c.field] == "" {
			t.Errorf("ParseQuery(%q, %q, %q) = %v, want a problem with %s", c.from, c.to, c.group, err, c.field)
		}
	}
}
