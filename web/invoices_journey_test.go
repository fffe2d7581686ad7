package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/gpumarket/gpumarket/services/demo"
)

// A customer finds its invoice: on a platform where last month's traffic was metered and
// finance closed the month and approved the customer's invoice, the customer logs in, opens
// Invoices from the navigation, sees the invoice with its number and total as the invoicing
// service holds them, and follows its link to the invoice's page.
func TestJourneyCustomerFindsItsInvoice(t *testing.T) {
	e := setup(t)
	m := e.closeLastMonth(t)
	draft := e.invoiceOf(t, m, "developer@example.com")
	e.approveInvoices(t, m, draft.ID)
	inv := e.invoiceOf(t, m, "developer@example.com")
	if inv.Number == "" || inv.Total <= 0 {
		t.Fatalf("the approved invoice: %q for %s", inv.Number, inv.Total)
	}

	b := newBrowser(t, e.srv.URL)
	if st := b.open("/login"); st != http.StatusOK {
		t.Fatalf("GET /login: status %d", st)
	}
	b.do("fill the login form", fill("#email", "developer@example.com"), fill("#password", demo.Password))
	if st := b.navigate("log in", click(testID("login-submit"))); st != http.StatusOK {
		t.Fatalf("after logging in: status %d", st)
	}
	if got := b.text(testID("nav-invoices")); got != "Invoices" {
		t.Fatalf("the navigation's invoices link = %q", got)
	}
	if st := b.navigate("click Invoices in the navigation", click(testID("nav-invoices"))); st != http.StatusOK {
		t.Fatalf("the Invoices page: status %d", st)
	}
	if p := b.path(); p != "/invoices" {
		t.Fatalf("the Invoices link went to %s", p)
	}
	row := `[data-testid="invoice"][data-id="` + inv.ID + `"]`
	if n := b.count(`[data-testid="invoices"] tbody tr`); n != 1 {
		t.Fatalf("the Invoices page lists %d documents, want 1", n)
	}
	if got := b.text(row + " " + testID("document-link")); got != inv.Number {
		t.Errorf("the invoice's number = %q, want %s", got, inv.Number)
	}
	if got := b.text(row + " " + testID("document-total")); got != cents(inv.Total) {
		t.Errorf("the invoice's total = %q, want %s", got, cents(inv.Total))
	}
	if got := b.text(row + " " + testID("document-period")); got != m.period.Label() {
		t.Errorf("the invoice's period = %q, want %s", got, m.period.Label())
	}
	if got := b.text(row + " " + testID("document-status")); got != "issued" {
		t.Errorf("the invoice's status = %q", got)
	}
	href := browserRun(b, "read the invoice's link", chromedp.Evaluate[string](
		`document.querySelector('`+row+` [data-testid="document-link"]').getAttribute('href')`))
	if href != "/invoices/"+inv.ID {
		t.Fatalf("the invoice's link = %q, want /invoices/%s", href, inv.ID)
	}

	// The invoice's page is the documents' own; the link leads there.
	st := b.navigate("open the invoice", click(row+" "+testID("document-link")))
	if p := b.path(); p != "/invoices/"+inv.ID {
		t.Fatalf("the invoice's link went to %s", p)
	}
	if st != http.StatusOK {
		t.Fatalf("the invoice's page answered %d", st)
	}
	page := b.text("body")
	if !strings.Contains(page, inv.Number) || !strings.Contains(page, inv.Total.String()) {
		t.Errorf("the invoice's page does not show its number %s and total %s", inv.Number, inv.Total)
	}
}
