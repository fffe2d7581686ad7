package web_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/documents/pdftext"
)

// A finance user's month end, in Chromium, on a platform with the demo's past traffic: log
// in, close last month from the invoice queue, follow the close until it is done, open the
// month's queue, open a customer's draft, approve it (its number appears), and download its
// PDF with the session's cookie: a PDF whose text holds the number and the invoice's total.
func TestJourneyFinanceClosesApprovesAndDownloads(t *testing.T) {
	w := newFinanceWorld(t)
	b := newBrowser(t, w.srv.URL)

	if st := b.open("/login"); st != http.StatusOK {
		t.Fatalf("GET /login: %d", st)
	}
	b.do("fill the login form", fill("#email", "finance@example.com"), fill("#password", demo.Password))
	if st := b.navigate("log in", click(testID("login-submit"))); st != http.StatusOK {
		t.Fatalf("after logging in: %d", st)
	}
	if st := b.navigate("click Invoices in the menu", click(testID("nav-finance-invoices"))); st != http.StatusOK || b.path() != "/finance/invoices" {
		t.Fatalf("the Invoices link: %d at %s", st, b.path())
	}
	if n := b.count(testID("queue-row")); n != 0 {
		t.Fatalf("%d invoices before any close", n)
	}
	if st := b.navigate("click Close a month", click(testID("close-link"))); st != http.StatusOK {
		t.Fatalf("the close page: %d", st)
	}
	if v := browserRun(b, "read the month", chromedp.Evaluate[string](`document.querySelector('#period').value`)); v != w.last.String() {
		t.Fatalf("the close form suggests %q, want last month %s", v, w.last)
	}
	if st := b.navigate("close last month", click(testID("close-submit"))); st != http.StatusOK {
		t.Fatalf("after closing: %d", st)
	}
	if p := b.path(); p != "/finance/close?period="+w.last.String() {
		t.Fatalf("after closing the browser is at %s", p)
	}
	// The page reloads itself while the close runs; it is done within seconds.
	if s := waitForJS(b, "the close to be done", 20*time.Second,
		`(document.querySelector('[data-testid="close-progress"]') || {dataset: {}}).dataset.status || ""`, "done"); s != "done" {
		t.Fatalf("the close is %q, want done", s)
	}
	want := countRows(t, w.env, `SELECT count(*) FROM invoices WHERE period = $1`, w.last.Start())
	if got := b.text(testID("close-invoice-count")); got != strconv.Itoa(want) || want == 0 {
		t.Errorf("the close says %s invoice drafts, the database holds %d", got, want)
	}

	if st := b.navigate("review the month's invoices", click(testID("close-invoices"))); st != http.StatusOK {
		t.Fatalf("the month's queue: %d", st)
	}
	if n := b.count(testID("queue-row")); n != want {
		t.Fatalf("the month's queue shows %d drafts, want %d", n, want)
	}
	draft := w.invoiceOf(t, w.acme, w.last)
	row := `[data-testid="queue-row"][data-id="` + draft.ID + `"]`
	if st := b.navigate("open Acme's draft", click(row+` [data-testid="row-link"]`)); st != http.StatusOK {
		t.Fatalf("Acme's draft: %d", st)
	}
	if n := b.text(testID("doc-number")); n != "DRAFT" {
		t.Fatalf("a draft's page shows the number %q", n)
	}
	if st := b.navigate("approve it", click(testID("approve"))); st != http.StatusOK {
		t.Fatalf("approving: %d", st)
	}
	if c := b.text(testID("confirm-consequence")); !strings.Contains(c, "can then only be voided with a credit note") {
		t.Errorf("approving asks to confirm with %q", c)
	}
	if st := b.navigate("confirm the approval", click(testID("confirm"))); st != http.StatusOK {
		t.Fatalf("after approving: %d", st)
	}
	if f := b.text(testID("flash")); !strings.Contains(f, "Approved") {
		t.Errorf("flash after approving: %q", f)
	}
	number := b.text(testID("doc-number"))
	issued := w.invoiceOf(t, w.acme, w.last)
	if !invoiceNumber.MatchString(number) || number != issued.Number || b.text(testID("doc-status")) != "issued" {
		t.Fatalf("after approving the page shows %q, the invoice is %s %s", number, issued.Number, issued.Status)
	}

	href := browserRun(b, "read the PDF link", chromedp.Evaluate[string](`document.querySelector('[data-testid="doc-pdf"]').href`))
	cookies := browserRun(b, "read the session's cookies", func(ctx context.Context, tg *chromedp.Target) ([]*network.Cookie, error) {
		res, err := cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{URLs: []string{w.srv.URL}})
		return res.Cookies, err
	})
	req, err := http.NewRequest(http.MethodGet, href, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cookies {
		req.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := readBody(res)
	if err != nil || res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/pdf" ||
		!strings.HasPrefix(string(body), "%PDF-") {
		t.Fatalf("GET %s with the session: %d %s, %d bytes (%v)", href, res.StatusCode, res.Header.Get("Content-Type"), len(body), err)
	}
	runs, err := pdftext.Runs(body)
	if err != nil {
		t.Fatal(err)
	}
	texts := pdftext.Texts(runs)
	total := "$" + groupedDollars(issued.Total)
	if !texts[number] || !texts[total] {
		t.Errorf("the PDF's text lacks the number %s or the total %s", number, total)
	}
}
