package developer

import (
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/reports"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// TestReportsViewSumsEachPeriod: the spend chart's table sums a day's tiers exactly, shows a
// day without usage as zero, and the carbon chart sums a day's regions.
func TestReportsViewSumsEachPeriod(t *testing.T) {
	day := func(d int) time.Time { return time.Date(2026, 3, d, 0, 0, 0, 0, time.UTC) }
	q, err := parseReportQuery("2026-03-01", "2026-03-02", "", day(20))
	if err != nil || !q.From.Equal(day(1)) || !q.To.Equal(day(3)) || q.Group != reports.GroupDay {
		t.Fatalf("parseReportQuery = %+v, %v", q, err)
	}
	usd := func(p money.Pico) money.BigPico { return money.BigPicoOf(p) }
	sav := reports.Savings{From: day(1), To: day(3), Group: reports.GroupDay, MethodVersion: "m1", Rows: []reports.SavingsRow{
		{Period: day(1), Tier: "standard", Requests: 2, InputTokens: 10, OutputTokens: 5, Spend: usd(42_000_000_001), Baseline: usd(252_000_000_000)},
		{Period: day(1), Tier: "batch", Requests: 1, InputTokens: 7, OutputTokens: 1, Spend: usd(1), Baseline: usd(3)},
	}}
	car := reports.Carbon{From: day(1), To: day(3), Group: reports.GroupDay, Rows: []reports.CarbonRow{
		{Period: day(2), Tier: "standard", Region: "eu", GCO2e: 9.68, BaselineGCO2e: 1.5},
		{Period: day(2), Tier: "standard", Region: "no", GCO2e: 0.32, BaselineGCO2e: 0.25},
	}}
	p, err := reportsView(q, sav, car)
	if err != nil {
		t.Fatal(err)
	}
	spend := p.Charts[0].Rows
	if len(spend) != 2 || spend[0].Label != "2026-03-01" || spend[0].Values[0] != "$0.04" ||
		spend[0].Values[1] != "$0.25" || spend[0].Values[2] != "$0.21" || spend[1].Values[0] != "$0.00" {
		t.Errorf("spend table = %+v", spend)
	}
	if tokens := p.Charts[1].Rows; tokens[0].Label != "realtime" || tokens[0].Values[1] != "0" || tokens[2].Values[1] != "7" {
		t.Errorf("tokens table = %+v", tokens)
	}
	if c := p.Charts[3].Rows; c[0].Values[0] != "0" || c[1].Values[0] != "10" || c[1].Values[1] != "1.75" {
		t.Errorf("carbon table = %+v", c)
	}
	if p.SavingsCSV != "/reports/savings.csv?from=2026-03-01&group=day&to=2026-03-02" || p.MethodVersion != "m1" {
		t.Errorf("CSV link %q, method %q", p.SavingsCSV, p.MethodVersion)
	}
	// By month the figures are the invoice's, saving and percent included.
	sav.Group, sav.Totals.Savings, sav.Totals.SavingsPct = reports.GroupMonth, usd(210_000_000_002), "83.3"
	sav.Totals.Invoiced = &reports.Invoiced{SpendCents: 3, BaselineCents: 9, SavedCents: 6, SavedPct: "66.7"}
	if p, err = reportsView(q, sav, car); err != nil || p.Totals[0].Value != "$0.03" || p.Totals[1].Value != "$0.09" ||
		p.Totals[2].Value != "$0.06 (66.7%)" {
		t.Errorf("month totals %+v, %v", p.Totals, err)
	}
	if _, err := parseReportQuery("2026-03-05", "2026-03-01", "week", day(20)); core.InvalidFields(err)["to"] == "" || core.InvalidFields(err)["group"] == "" {
		t.Errorf("a bad period: %v", err)
	}
}

func TestTheDashboardOpensOnLastMonth(t *testing.T) {
	for _, c := range []struct{ now, first, last string }{
		{"2026-12-01T20:00:00Z", "2026-11-01", "2026-11-30"},
		{"2026-03-31T23:59:59Z", "2026-02-01", "2026-02-28"},
		{"2027-01-15T00:00:00Z", "2026-12-01", "2026-12-31"},
	} {
		now, _ := time.Parse(time.RFC3339, c.now)
		first, last := core.LastMonth(now)
		if first.Format(core.DateLayout) != c.first || last.Format(core.DateLayout) != c.last {
			t.Errorf("at %s: last month %s to %s, want %s to %s", c.now, first.Format(core.DateLayout), last.Format(core.DateLayout), c.first, c.last)
		}
		links := reportShortcuts(now)
		if len(links) == 0 || links[0].URL != "/reports?from="+c.first+"&group=day&to="+c.last {
			t.Errorf("at %s: the first shortcut %+v", c.now, links)
		}
	}
}

// A report by day prints its spend and baseline rounded once each and its saving as their
// difference: spend $4.676 and baseline $9.254 print $4.68, $9.25 and $4.57, which add up,
// where the exact saving, $4.578, rounds to $4.58. Its totals and each row of its table alike.
func TestADayReportAddsUpAtTheCentsItPrints(t *testing.T) {
	day := time.Date(2026, 11, 4, 0, 0, 0, 0, time.UTC)
	q, err := parseReportQuery("2026-11-04", "2026-11-04", "day", day.AddDate(0, 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	spend, base := money.BigPicoOf(4_676_000_000_000), money.BigPicoOf(9_254_000_000_000)
	sav := reports.Savings{From: day, To: day.AddDate(0, 0, 1), Group: reports.GroupDay, Rows: []reports.SavingsRow{
		{Period: day, Tier: "standard", Requests: 1, Spend: spend, Baseline: base}}}
	sav.Totals.Spend, sav.Totals.Baseline = spend, base
	sav.Totals.Savings, sav.Totals.SavingsPct = base.Add(spend.Neg()), reports.Percent(base.Add(spend.Neg()), base)
	p, err := reportsView(q, sav, reports.Carbon{From: day, To: day.AddDate(0, 0, 1), Group: reports.GroupDay})
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{p.Totals[0].Value, p.Totals[1].Value, p.Totals[2].Value}; got[0] != "$4.68" || got[1] != "$9.25" || got[2] != "$4.57 (49.4%)" {
		t.Errorf("totals %v, want $4.68, $9.25 and $4.57 (49.4%%)", got)
	}
	if row := p.Charts[0].Rows[0].Values; row[0] != "$4.68" || row[1] != "$9.25" || row[2] != "$4.57" {
		t.Errorf("the day's row %v, want $4.68, $9.25 and $4.57", row)
	}
}
