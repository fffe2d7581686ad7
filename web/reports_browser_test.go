package web_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services/carbon"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/reports"
	"github.com/gpumarket/gpumarket/web"
	"github.com/gpumarket/gpumarket/web/webtest"
)

// TestMethodologyInChromium: the public methodology page, with nobody logged in, has the
// anchors every figure links to and states the corrections to the benchmark paper; every
// page's footer links to it.
func TestMethodologyInChromium(t *testing.T) {
	e := setup(t)
	b := newBrowser(t, e.srv.URL)
	if st := b.open("/catalog"); st != http.StatusOK {
		t.Fatalf("GET /catalog: %d", st)
	}
	if st := b.navigate("follow the footer's methodology link", click(testID("footer-methodology"))); st != http.StatusOK || b.path() != "/methodology" {
		t.Fatalf("the footer's link led to %s (%d)", b.path(), st)
	}
	for _, id := range []string{"version", "savings", "baseline", "energy", "gpus", "carbon", "market-based", "scope3",
		"sci", "pue", "grid", "carbon-baseline", "embodied", "corrections", "gpu-h100-pcie", "grid-eu"} {
		if n := b.count("#" + id); n != 1 {
			t.Errorf("#%s: %d elements, want 1", id, n)
		}
	}
	if v := b.text(testID("method-version")); v != carbon.MethodVersion {
		t.Errorf("method version %q, want %q", v, carbon.MethodVersion)
	}
	power := b.text("#correction-h100-power")
	for _, want := range []string{"350 W, not 700 W", "3.1x", "6.2x", "it doubles"} {
		if !strings.Contains(power, want) {
			t.Errorf("the H100 correction %q does not say %q", power, want)
		}
	}
	price := b.text("#correction-4090-price")
	for _, want := range []string{"$0.111–0.149", "$0.111 is the 2x RTX 4090 at 4 requests/s", "$0.149 is the 4x RTX 4090 at 8 requests/s"} {
		if !strings.Contains(price, want) {
			t.Errorf("the price correction %q does not say %q", price, want)
		}
	}
	if h100 := b.text("#gpu-h100-pcie"); !strings.Contains(h100, "350") || !strings.Contains(h100, "PB-11133") {
		t.Errorf("H100 PCIe row %q", h100)
	}
	if !strings.Contains(b.text("#market-based"), "excluded") || !strings.Contains(b.text("#scope3"), "Scope 3, category 1") {
		t.Error("the carbon section does not exclude market-based figures or name Scope 3 category 1")
	}
}

// fixedReports answers every query with the same two reports, and keeps what it was asked:
// the dashboard's rendering under test, with reports made in the test.
type fixedReports struct {
	savings  reports.Savings
	carbon   reports.Carbon
	accounts []string
	queries  []reports.Query
}

func (f *fixedReports) Savings(_ context.Context, account string, q reports.Query) (reports.Savings, error) {
	f.accounts, f.queries = append(f.accounts, account), append(f.queries, q)
	return f.savings, nil
}

func (f *fixedReports) Carbon(_ context.Context, account string, q reports.Query) (reports.Carbon, error) {
	f.accounts, f.queries = append(f.accounts, account), append(f.queries, q)
	return f.carbon, nil
}

var _ web.ReportSource = (*fixedReports)(nil)

// sampleReports are three days of a customer on the standard and batch tiers.
func sampleReports(t *testing.T) (reports.Savings, reports.Carbon) {
	t.Helper()
	day := func(d int) time.Time { return time.Date(2026, 3, d, 0, 0, 0, 0, time.UTC) }
	usd := func(s string) money.BigPico {
		p, err := money.ParseUSD(s)
		if err != nil {
			t.Fatal(err)
		}
		return money.BigPicoOf(p)
	}
	v := carbon.MethodVersion
	sav := reports.Savings{AccountID: "acct", From: day(1), To: day(4), Group: reports.GroupDay, MethodVersion: v,
		Rows: []reports.SavingsRow{
			{Period: day(1), Tier: "standard", Requests: 40, InputTokens: 120_000, OutputTokens: 80_000,
				Spend: usd("0.042"), Baseline: usd("0.252"), Savings: usd("0.21"), SavingsPct: "83.3", MethodVersion: v},
			{Period: day(1), Tier: "batch", Requests: 10, InputTokens: 500_000, OutputTokens: 1_000,
				Spend: usd("0.025075"), Baseline: usd("0.5015"), Savings: usd("0.476425"), SavingsPct: "95.0", MethodVersion: v},
			{Period: day(3), Tier: "standard", Requests: 7, InputTokens: 21_000, OutputTokens: 14_000,
				Spend: usd("0.00735"), Baseline: usd("0.0441"), Savings: usd("0.03675"), SavingsPct: "83.3", MethodVersion: v},
		},
		Totals: reports.SavingsTotals{Requests: 57, InputTokens: 641_000, OutputTokens: 95_000,
			Spend: usd("0.074425"), Baseline: usd("0.7976"), Savings: usd("0.723175"), SavingsPct: "90.7"},
	}
	car := reports.Carbon{AccountID: "acct", From: day(1), To: day(4), Group: reports.GroupDay, MethodVersion: v,
		Rows: []reports.CarbonRow{
			{Period: day(1), Tier: "standard", Region: "eu", Requests: 40, Tokens: 200_000, EnergyKWh: 0.04, EstimatedKWh: 0.04,
				GramsPerKWh: 242, PUE: 1, GCO2e: 9.68, BaselineKWh: 0.00646, BaselineGCO2e: 1.5633, MethodVersion: v},
			{Period: day(1), Tier: "batch", Region: "no", Requests: 10, Tokens: 501_000, EnergyKWh: 0.1, MeasuredKWh: 0.1,
				GramsPerKWh: 30, PUE: 1, GCO2e: 3, BaselineKWh: 0.0162, BaselineGCO2e: 0.486, MethodVersion: v},
			{Period: day(3), Tier: "standard", Region: "eu", Requests: 7, Tokens: 35_000, EnergyKWh: 0.007, EstimatedKWh: 0.007,
				GramsPerKWh: 242, PUE: 1, GCO2e: 1.694, BaselineKWh: 0.00113, BaselineGCO2e: 0.2735, MethodVersion: v},
		},
		Totals: reports.CarbonTotals{Requests: 57, Tokens: 736_000, EnergyKWh: 0.147, MeasuredKWh: 0.1, EstimatedKWh: 0.047,
			GCO2e: 14.374, BaselineKWh: 0.02379, BaselineGCO2e: 2.3228},
	}
	return sav, car
}

// TestReportsDashboardInChromium renders the dashboard of reports made in the test and reads
// each chart back as the customer's browser shows it.
func TestReportsDashboardInChromium(t *testing.T) {
	sav, car := sampleReports(t)
	src := &fixedReports{savings: sav, carbon: car}
	e := setupWith(t, func(c *web.Config, _ *pgxpool.Pool) { c.Reports = src })
	b := newBrowser(t, e.srv.URL)
	b.open("/login?next=/credits")
	b.do("fill the login form", fill("#email", "developer@example.com"), fill("#password", demo.Password))
	if st := b.navigate("log in", click(testID("login-submit"))); st != http.StatusOK {
		t.Fatalf("after logging in: %d", st)
	}
	if st := b.navigate("open the reports from the navigation", click(testID("nav-reports"))); st != http.StatusOK {
		t.Fatalf("GET /reports: %d", st)
	}
	checkReportsDashboard(t, b, "/reports?from=2026-03-01&to=2026-03-03&group=day", sav, car)
	// The period asked for is the one the reports were asked for, for the developer's account.
	last := src.queries[len(src.queries)-1]
	if !last.From.Equal(sav.From) || !last.To.Equal(sav.To) || last.Group != reports.GroupDay {
		t.Errorf("the reports were asked for %+v, want [%s, %s) by day", last, sav.From, sav.To)
	}
	if src.accounts[0] == "" || slices.ContainsFunc(src.accounts, func(a string) bool { return a != src.accounts[0] }) {
		t.Errorf("reports asked for accounts %q: want the developer's own, every time", src.accounts)
	}
}

// checkReportsDashboard opens the dashboard at path in a logged-in browser and checks what
// the customer sees against the reports the page was made from: each chart is an SVG with
// drawn paths, each chart's table holds the reports' numbers period by period (and tier by
// tier for tokens), every figure links to its method, and the method version is shown.
func checkReportsDashboard(t *testing.T, b *browser, path string, sav reports.Savings, car reports.Carbon) {
	t.Helper()
	if st := b.open(path); st != http.StatusOK {
		t.Fatalf("GET %s: %d", path, st)
	}
	if v := b.text(testID("report-method-version")); v != sav.MethodVersion {
		t.Errorf("method version shown %q, want %q", v, sav.MethodVersion)
	}
	want := webtest.ReportTables(sav, car)
	for _, id := range []string{"spend", "tokens", "energy", "carbon"} {
		sel := "#chart-" + id
		// One picture for a laptop's screen; the one drawn for a phone's (.chart-narrow) is beside it.
		if n := b.count(sel + " .chart-picture:not(.chart-narrow) > svg"); n != 1 {
			t.Errorf("%s: %d inline SVGs, want 1", id, n)
			continue
		}
		// Drawn: a path with a length, in a colour (the CSP lets no inline style through).
		drawn := browserRun(b, "count drawn paths of "+id, chromedp.Evaluate[int](fmt.Sprintf(
			`[...document.querySelectorAll(%q)].filter(p => (p.getAttribute("d") || "").trim() !== "" && p.getTotalLength() > 0 &&
				(getComputedStyle(p).stroke.startsWith("rgb(") || !["none", "rgb(0, 0, 0)"].includes(getComputedStyle(p).fill))).length`,
			sel+" svg path")))
		if drawn < 2 {
			t.Errorf("%s: %d drawn paths, want the axes and a line or bars per series", id, drawn)
		}
		got := browserRun(b, "read the table of "+id, chromedp.Evaluate[[][]string](webtest.ReportTableScript(id)))
		if !slices.EqualFunc(got, want[id], slices.Equal[[]string]) {
			t.Errorf("%s table = %q, want %q", id, got, want[id])
		}
		if href := browserRun(b, "read the method link of "+id, chromedp.Evaluate[string](fmt.Sprintf(
			`document.querySelector(%q).getAttribute("href")`, sel+` [data-testid="chart-method"]`))); !strings.HasPrefix(href, "/methodology#") {
			t.Errorf("%s links its method to %q", id, href)
		}
	}
	links := browserRun(b, "read the figures' method links", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('[data-testid="report-totals"] a')].map(a => a.getAttribute("href"))`))
	if len(links) == 0 || slices.ContainsFunc(links, func(h string) bool { return !strings.HasPrefix(h, "/methodology#") }) {
		t.Errorf("figure links %q: want each to a section of /methodology", links)
	}
	for _, csv := range []string{"report-savings-csv", "report-carbon-csv"} {
		href := browserRun(b, "read "+csv, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).getAttribute("href")`, testID(csv))))
		if !strings.Contains(href, "from="+sav.From.Format("2006-01-02")) || !strings.Contains(href, "group="+string(sav.Group)) {
			t.Errorf("%s = %q, want the same period", csv, href)
		}
	}
}
