package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/money"
)

// overPrecise finds, in the page's visible text, every dollar amount written with more than
// two decimals, leaving out the cells marked as unit prices or per-request costs
// (data-precise: also a flag, which names a flagged request's own cost) and the unit prices a statement line's description names ("asks $0.074914
// input, $0.149828 output"), which carry the decimals they need.
const overPrecise = `(() => {
	const body = document.body.cloneNode(true);
	body.querySelectorAll("[data-precise], script, style").forEach(e => e.remove());
	document.documentElement.appendChild(body);
	const text = body.innerText;
	body.remove();
	return text.match(/[^\n]{0,40}[-−]?\$[-−]?[0-9,]+\.[0-9]{3,}(?![0-9]| input| output)/g) || [];
})()`

// No page a demo user opens shows a balance, a total, an earning or a document amount with
// more than two decimals, or a minus sign other than "-$": the developer's credits,
// usage, invoices and reports, the provider's earnings, statements and payouts, and
// finance's balances and review pages, on a platform with a month of demo traffic closed.
func TestNoPageShowsAnAmountPastTheCentInChromium(t *testing.T) {
	e := setup(t)
	m := e.closeLastMonth(t)
	inv := e.invoiceOf(t, m, "developer@example.com")
	e.approveInvoices(t, m, inv.ID)
	st := e.statementOf(t, m, "provider@example.com")
	if _, err := e.invoicing.ApproveStatements(t.Context(), m.finance.ID, []string{st.ID}); err != nil {
		t.Fatal(err)
	}
	month := m.period.Start().Format("2006-01-02")
	last := m.period.Start().AddDate(0, 1, -1).Format("2006-01-02")

	for _, role := range []struct {
		email string
		pages []string
	}{
		{"developer@example.com", []string{"/credits", "/usage", "/keys", "/batches", "/invoices", "/invoices/" + inv.ID,
			"/reports?from=" + month + "&to=" + last + "&group=month", "/reports?from=" + month + "&to=" + last + "&group=day"}},
		{"provider@example.com", []string{"/provider/earnings", "/provider/statements", "/statements/" + st.ID,
			"/provider/payouts", "/provider/performance"}},
		{"finance@example.com", []string{"/finance/balances", "/finance/invoices", "/finance/invoices/" + inv.ID,
			"/finance/statements", "/finance/statements/" + st.ID, "/finance/payouts"}},
	} {
		b := newBrowser(t, e.srv.URL)
		b.open("/login")
		b.do("fill the login form", fill("#email", role.email), fill("#password", demo.Password))
		if s := b.navigate("log in as "+role.email, click(testID("login-submit"))); s != http.StatusOK {
			t.Fatalf("log in as %s: %d", role.email, s)
		}
		if role.email == "developer@example.com" {
			checkInvoiceFoots(t, b, "/invoices/"+inv.ID, "/reports?from="+month+"&to="+last+"&group=month")
		}
		for _, path := range role.pages {
			if s := b.open(path); s != http.StatusOK {
				t.Errorf("%s: GET %s: %d", role.email, path, s)
				continue
			}
			if found := browserRun(b, "read the amounts of "+path, chromedp.Evaluate[[]string](overPrecise)); len(found) > 0 {
				t.Errorf("%s shows %s amounts past the cent: %q", path, role.email, found)
			}
			if bad := browserRun(b, "read the signs of "+path, chromedp.Evaluate[[]string](
				`document.body.innerText.match(/[^\n]{0,30}(\$[-−]|−\$)[0-9]/g) || []`)); len(bad) > 0 {
				t.Errorf("%s as %s writes a minus sign other than before the dollar sign: %q", path, role.email, bad)
			}
			if n := browserRun(b, "count the amounts of "+path, chromedp.Evaluate[int](
				`(document.body.innerText.match(/\$[0-9]/g) || []).length`)); n == 0 && path != "/keys" && path != "/batches" &&
				path != "/provider/payouts" && path != "/finance/payouts" {
				t.Errorf("%s as %s shows no amount at all", path, role.email)
			}
		}
	}
}

// checkInvoiceFoots reads the invoice's page as the customer sees it: its lines add up to its
// total, its opening balance and the movements printed under it to its closing balance, cent
// for cent, and the month's report shows the same spend, baseline and saving, percent included.
func checkInvoiceFoots(t *testing.T, b *browser, invoicePath, reportPath string) {
	t.Helper()
	if s := b.open(invoicePath); s != http.StatusOK {
		t.Fatalf("GET %s: %d", invoicePath, s)
	}
	lines := browserRun(b, "read the invoice's lines", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('[data-testid="line-amount"]')].map(e => e.innerText.trim())`))
	totals := browserRun(b, "read the invoice's totals", chromedp.Evaluate[[][]string](
		`[...document.querySelectorAll('[data-testid="document-total"]')].map(r => [r.cells[0].innerText.trim(), r.cells[1].innerText.trim()])`))
	summary := browserRun(b, "read the invoice's summary", chromedp.Evaluate[map[string]string](
		`Object.fromEntries([...document.querySelectorAll('[data-testid="document-summary"] dl > div')].map(d => [d.querySelector("dt").innerText.trim(), d.querySelector("dd").innerText.trim()]))`))
	cents := func(s string) int64 {
		t.Helper()
		p, err := money.ParseUSD(strings.ReplaceAll(s, ",", ""))
		if err != nil || p%money.PicoPerCent != 0 {
			t.Fatalf("%s prints %q, not an amount in cents", invoicePath, s)
		}
		return int64(p / money.PicoPerCent)
	}
	var sum, total, moved, closing int64
	for _, l := range lines {
		sum += cents(l)
	}
	inBalance, sawClosing := false, false
	for _, r := range totals {
		switch {
		case r[0] == "Total":
			total = cents(r[1])
		case r[0] == "Opening balance":
			inBalance, moved = true, cents(r[1])
		case r[0] == "Closing balance":
			inBalance, closing, sawClosing = false, cents(r[1]), true
		case inBalance:
			moved += cents(r[1])
		}
	}
	if len(lines) == 0 || sum != total {
		t.Errorf("%s: the lines %q add up to %d cents, the total is %d", invoicePath, lines, sum, total)
	}
	if !sawClosing || moved != closing {
		t.Errorf("%s: the opening balance and the movements add up to %d cents, the closing balance is %d: %q", invoicePath, moved, closing, totals)
	}
	if s := b.open(reportPath); s != http.StatusOK {
		t.Fatalf("GET %s: %d", reportPath, s)
	}
	for id, label := range map[string]string{"spend": "Usage", "baseline": "The same tokens at the realtime price", "savings": "Saved"} {
		got := b.text(testID("report-total-"+id) + " dd")
		if want := summary[label]; want == "" || got != want {
			t.Errorf("the month's report shows %s %q, the invoice %q", id, got, want)
		}
	}
}
