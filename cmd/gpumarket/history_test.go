package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services/credits/stripemock/stripemocktest"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/documents/pdftext"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/reports"
	"github.com/gpumarket/gpumarket/web/webtest"
)

// TestDemoHistoryShowsOnTheUsagePages seeds the demo and its history as `gpumarket dev` does,
// and reads the previous month through the JSON beside the usage pages: the developer's usage
// has a total for every day of it, which add up to what the meter stored, and the demo
// provider's earnings show its rigs' traffic.
func TestDemoHistoryShowsOnTheUsagePages(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 60 days of demo traffic")
	}
	pool, dbURL := dbtest.NewWithURL(t)
	cfg := Config{DatabaseURL: dbURL, Addr: "127.0.0.1:0", DataDir: t.TempDir(), NATSPort: 0,
		Payments: PaymentsTest, StripeMockBin: stripemocktest.Bin(t),
		SessionKey: []byte(strings.Repeat("k", 32)), StripeWebhookSecrets: []string{"whsec_test_history"},
		Roles: Roles{Web: true, Gateway: true, Meter: true}, TicketKey: []byte(strings.Repeat("t", 32)),
		RigKey: []byte(strings.Repeat("r", 32))}
	cfg.Invoicing.Seller, cfg.Invoicing.MinimumPayout = demoSeller, demoMinimumPayout // as `gpumarket dev` sets them
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := Open(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Seed(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := p.SeedHistory(ctx)
	if err != nil || res.Days < 60 {
		t.Fatalf("history: %+v, %v", res, err)
	}
	go func() { _ = p.Run(ctx) }()

	now := time.Now().UTC()
	first := time.Date(now.Year(), now.Month()-1, 1, 0, 0, 0, 0, time.UTC)
	last := first.AddDate(0, 1, -1)
	period := fmt.Sprintf("from=%s&to=%s", first.Format(time.DateOnly), last.Format(time.DateOnly))

	var usage struct {
		Totals struct {
			Days []struct {
				Day      string `json:"day"`
				Requests int64  `json:"requests"`
			} `json:"days"`
			Total struct {
				Requests int64  `json:"requests"`
				CostUSD  string `json:"cost_usd"`
			} `json:"total"`
		} `json:"totals"`
		Requests []json.RawMessage `json:"requests"`
	}
	api := &apiClient{t: t, base: p.URL()}
	api.do(api.login("developer@example.com"), http.MethodGet, "/api/usage?"+period, nil, &usage, http.StatusOK)
	days := map[string]int64{}
	var sum int64
	for _, d := range usage.Totals.Days {
		days[d.Day] += d.Requests
		sum += d.Requests
	}
	for d := first; !d.After(last); d = d.AddDate(0, 0, 1) {
		if days[d.Format(time.DateOnly)] == 0 {
			t.Errorf("no usage total for %s", d.Format(time.DateOnly))
		}
	}
	var stored int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM usage_events u JOIN users us ON us.account_id = u.account_id
		WHERE us.email = 'developer@example.com' AND u.occurred_at >= $1 AND u.occurred_at < $2`,
		first, last.AddDate(0, 0, 1)).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if sum != stored || usage.Totals.Total.Requests != stored || len(usage.Requests) == 0 ||
		usage.Totals.Total.CostUSD == "" || usage.Totals.Total.CostUSD == "0.00" {
		t.Errorf("the month's totals: %d requests by day, %d in all at %s; the meter stored %d",
			sum, usage.Totals.Total.Requests, usage.Totals.Total.CostUSD, stored)
	}

	var earnings struct {
		Days  []json.RawMessage `json:"days"`
		Total struct {
			Requests  int64  `json:"requests"`
			EarnedUSD string `json:"earned_usd"`
		} `json:"total"`
	}
	api.do(api.login("provider@example.com"), http.MethodGet, "/api/provider/earnings?"+period, nil, &earnings, http.StatusOK)
	if len(earnings.Days) == 0 || earnings.Total.Requests == 0 || earnings.Total.EarnedUSD == "0.00" {
		t.Errorf("the demo provider's earnings of the month: %+v", earnings)
	}

	t.Run("the developer's reports show the month in charts whose tables are the JSON's figures", func(t *testing.T) {
		dev := api.login("developer@example.com")
		q := period + "&group=day"
		var sav reports.Savings
		var car reports.Carbon
		api.do(dev, http.MethodGet, "/api/reports/savings?"+q, nil, &sav, http.StatusOK)
		api.do(dev, http.MethodGet, "/api/reports/carbon?"+q, nil, &car, http.StatusOK)
		// The month's figures are the usage page's: the same requests and the same exact spend.
		cost, err := money.ParseUSD(usage.Totals.Total.CostUSD)
		if err != nil {
			t.Fatal(err)
		}
		if sav.Totals.Requests != usage.Totals.Total.Requests || !sav.Totals.Spend.Equal(cost) {
			t.Errorf("the report: %d requests for %s; the usage page: %d for $%s", sav.Totals.Requests, sav.Totals.Spend,
				usage.Totals.Total.Requests, usage.Totals.Total.CostUSD)
		}
		// The demo's rigs have no GPU: the data centres' sensor is simulated, the home rigs estimate.
		if car.Totals.MeasuredKWh != 0 || car.Totals.SimulatedKWh <= 0 || car.Totals.EstimatedKWh <= 0 || car.Totals.GCO2e <= 0 ||
			car.Totals.BaselineGCO2e <= 0 {
			t.Errorf("the month's carbon: %+v; want simulated and estimated energy, none measured, grams and the baseline's", car.Totals)
		}

		tab := newJourneyTab(t, ctx, p.URL())
		tab.open("/login", http.StatusOK)
		tab.do("fill the login form", journeyFill("#email", "developer@example.com"), journeyFill("#password", demo.Password))
		if res := tab.navigate("log in", journeyClick(byTestID("login-submit"))); res == nil || res.StatusCode != http.StatusOK {
			t.Fatalf("after logging in: %+v", res)
		}
		tab.open("/reports?"+q, http.StatusOK)
		want := webtest.ReportTables(sav, car)
		for _, chart := range []string{"spend", "tokens", "energy", "carbon"} {
			if n := tab.count("#chart-" + chart + " .chart-picture > svg path"); n < 2 {
				t.Errorf("%s: %d paths drawn, want the axes and a line or bars per series", chart, n)
			}
			var got [][]string
			tab.step("read the table of "+chart, func(ctx context.Context) (err error) {
				got, err = chromedp.Run(ctx, chromedp.Evaluate[[][]string](webtest.ReportTableScript(chart)))
				return err
			})
			if len(got) == 0 || !slices.EqualFunc(got, want[chart], slices.Equal[[]string]) {
				t.Errorf("%s: the page's table %q, the JSON's figures %q", chart, got, want[chart])
			}
			if href := tab.attr("#chart-"+chart+" "+byTestID("chart-method"), "href"); !strings.HasPrefix(href, "/methodology#") {
				t.Errorf("%s links its method to %q", chart, href)
			}
		}
		if v := tab.text(byTestID("report-method-version")); v != sav.MethodVersion || v == "" {
			t.Errorf("the method version shown %q, the JSON's %q", v, sav.MethodVersion)
		}
		tab.open("/methodology", http.StatusOK)
	})

	t.Run("finance closes the month, approves an invoice and a statement; the provider sees its transfer", func(t *testing.T) {
		if err := p.connectDemoProviders(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.connectDemoProviders(ctx); err != nil { // as a second `make run` does
			t.Fatal(err)
		}
		month := first.Format("2006-01")
		finance := api.login("finance@example.com")
		api.do(finance, http.MethodPost, "/api/finance/close", map[string]string{"period": month}, nil, http.StatusOK)
		var queue struct {
			Invoices []struct {
				ID          string `json:"id"`
				AccountName string `json:"account_name"`
				TotalCents  int64  `json:"total_cents"`
			} `json:"invoices"`
		}
		api.do(finance, http.MethodGet, "/api/finance/invoices?status=draft&period="+month, nil, &queue, http.StatusOK)
		drafts := map[string]string{}
		for _, inv := range queue.Invoices {
			drafts[inv.AccountName] = inv.ID
		}
		if drafts["Acme Labs"] == "" || drafts["Brightline Studio"] == "" {
			t.Fatalf("the month's drafts: %+v; want one for each demo customer that used the platform", queue.Invoices)
		}
		var approved struct {
			Number     string `json:"number"`
			TotalCents int64  `json:"total_cents"`
			Lines      []struct {
				ExactPico json.Number `json:"exact_pico"`
				Cents     int64       `json:"amount_cents"`
				Kind      string      `json:"kind"`
			} `json:"lines"`
		}
		api.do(finance, http.MethodPost, "/api/finance/invoices/"+drafts["Acme Labs"]+"/approve", nil, &approved, http.StatusOK)
		var lines int64
		for _, l := range approved.Lines {
			lines += l.Cents
		}
		if !strings.HasPrefix(approved.Number, "GPM-") || lines != approved.TotalCents {
			t.Fatalf("approved: number %q, total %d cents, lines %d", approved.Number, approved.TotalCents, lines)
		}
		// The usage page's month, exact, is the invoice's to the cent: every line is rounded once.
		cents := usageCents(t, usage.Totals.Total.CostUSD)
		if d := cents - approved.TotalCents; d < -int64(len(approved.Lines)) || d > int64(len(approved.Lines)) {
			t.Errorf("the invoice's total %d cents, the usage page's month $%s", approved.TotalCents, usage.Totals.Total.CostUSD)
		}
		// The savings report's month is the invoice's, cent for cent: its spend as the invoice
		// rounds it equals the invoice's usage lines.
		var monthly reports.Savings
		api.do(api.login("developer@example.com"), http.MethodGet, "/api/reports/savings?"+period+"&group=month", nil, &monthly, http.StatusOK)
		var usageLines int64
		for _, l := range approved.Lines {
			if l.Kind == "usage" {
				usageLines += l.Cents
			}
		}
		if len(monthly.Rows) == 0 || usageCents(t, monthly.Totals.InvoiceSpendUSD) != usageLines {
			t.Errorf("the report's month spends $%s as its invoice rounds it; the invoice's usage lines %d cents",
				monthly.Totals.InvoiceSpendUSD, usageLines)
		}
		if monthly.Totals.Baseline.Cmp(monthly.Totals.Spend) <= 0 {
			t.Errorf("the demo customer's month: spend %s, baseline %s; the standard and batch tiers save", monthly.Totals.Spend, monthly.Totals.Baseline)
		}
		req, _ := http.NewRequest(http.MethodGet, p.URL()+"/api/invoices/"+drafts["Acme Labs"]+".pdf", nil)
		req.Header.Set("Authorization", "Bearer "+finance)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		pdf, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !bytes.HasPrefix(pdf, []byte("%PDF-")) {
			t.Fatalf("the invoice's PDF: %d, %d bytes", res.StatusCode, len(pdf))
		}
		runs, err := pdftext.Runs(pdf)
		if err != nil {
			t.Fatal(err)
		}
		texts := pdftext.Texts(runs)
		if total := invoicing.Cents(approved.TotalCents).String(); !texts[approved.Number] || !texts[total] {
			t.Errorf("the PDF does not hold the number %s and the total %s", approved.Number, total)
		}

		var statements struct {
			Statements []struct {
				ID           string `json:"id"`
				ProviderName string `json:"provider_name"`
				PayoutCents  int64  `json:"payout_cents"`
			} `json:"statements"`
		}
		api.do(finance, http.MethodGet, "/api/finance/statements?status=draft&period="+month, nil, &statements, http.StatusOK)
		var fjord string
		for _, st := range statements.Statements {
			if st.ProviderName == "Fjord GPU Co-op" && st.PayoutCents > 0 {
				fjord = st.ID
			}
		}
		if fjord == "" {
			t.Fatalf("no statement of the demo provider that pays out: %+v", statements.Statements)
		}
		api.do(finance, http.MethodPost, "/api/finance/statements/"+fjord+"/approve", nil, nil, http.StatusOK)
		var mine struct {
			Statements []struct {
				ID           string `json:"id"`
				Status       string `json:"status"`
				PayoutStatus string `json:"payout_status"`
				Payout       struct {
					StripeTransferID string `json:"stripe_transfer_id"`
				} `json:"payout"`
			} `json:"statements"`
		}
		api.do(api.login("provider@example.com"), http.MethodGet, "/api/provider/statements", nil, &mine, http.StatusOK)
		paid := false
		for _, st := range mine.Statements {
			paid = paid || st.ID == fjord && st.Status == "paid" && st.PayoutStatus == "paid" && strings.HasPrefix(st.Payout.StripeTransferID, "tr_")
		}
		if !paid {
			t.Fatalf("the provider's statements after approval: %+v", mine.Statements)
		}
	})
}

// usageCents is a decimal of dollars, as the usage page writes it, in whole cents rounded half up.
func usageCents(t *testing.T, usd string) int64 {
	t.Helper()
	whole, frac, _ := strings.Cut(usd, ".")
	frac += "000"
	var cents int64
	if _, err := fmt.Sscanf(whole+frac[:2], "%d", &cents); err != nil {
		t.Fatalf("%q: %v", usd, err)
	}
	if frac[2] >= '5' {
		cents++
	}
	return cents
}
