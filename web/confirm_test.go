package web_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/gpumarket/gpumarket/services/invoicing"
)

// askedToConfirm posts a form of an action that moves money or cannot be undone, and checks
// that it answered the confirmation page and did nothing else; it returns the page.
func askedToConfirm(t *testing.T, client *http.Client, pageURL string, form url.Values) *goquery.Document {
	t.Helper()
	res, err := client.PostForm(pageURL, form)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(res.Body)
		t.Fatalf("POST %s: status %d, want 200 and the confirmation page: %.300s", pageURL, res.StatusCode, body)
	}
	doc, err := goquery.NewDocumentFromReader(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Find(testID("confirm-form")).Length() != 1 {
		t.Fatalf("POST %s did not ask to confirm: %q", pageURL, text(doc.Find("main")))
	}
	return doc
}

// confirmation posts the confirmation page's form as its button would.
func confirmation(t *testing.T, client *http.Client, base string, doc *goquery.Document) *http.Response {
	t.Helper()
	return postForm(t, client, base+doc.Find(testID("confirm-form")).AttrOr("action", ""), formOf(doc))
}

// consequences is the confirmation page's statement of what the action does.
func consequences(doc *goquery.Document) string { return text(doc.Find(testID("confirm-consequence"))) }

// Approving the selected statement drafts, with both providers' Stripe accounts connected:
// the queue's button says it pays; the first POST answers a page that lists each statement
// with its provider and payout and their total, and sends nothing (no payout, no ledger
// movement, both still drafts); a POST that says confirm=yes without the page's token, or
// with another page's, sends nothing either. The confirmed POST pays each once; posting the
// same confirmation again pays nothing more.
func TestApprovingStatementsConfirmsTheTransfersFirst(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	m := e.closeLastMonth(t)
	for _, p := range []struct{ email, country string }{{"provider@example.com", "NO"}, {"northwind@example.com", "US"}} {
		u, err := e.accounts.UserByEmail(ctx, p.email)
		if err != nil {
			t.Fatal(err)
		}
		a, _, err := e.payouts.Connect(ctx, payoutsConnect(e, u, p.country))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.payouts.Observe(ctx, stateComplete(a.StripeAccountID), time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	fjord, northwind := e.statementOf(t, m, "provider@example.com"), e.statementOf(t, m, "northwind@example.com")
	if fjord.Payout <= 0 || northwind.Payout <= 0 {
		t.Fatalf("the demo's statements pay %s and %s: both should pay out", fjord.Payout, northwind.Payout)
	}
	total := fjord.Payout + northwind.Payout
	fin, csrf := loginBrowser(t, e, "finance@example.com")

	doc := getPage(t, fin, e.srv.URL+"/finance/statements/"+northwind.ID)
	if b, want := text(doc.Find(testID("approve"))), "Approve and pay "+cents(northwind.Payout)+" to Northwind Compute through Stripe…"; b != want {
		t.Errorf("the statement's approve button reads %q, want %q", b, want)
	}
	doc = getPage(t, fin, e.srv.URL+"/finance/statements?period="+m.period.String())
	if b := text(doc.Find(testID("approve-selected"))); b != "Approve the selected drafts and pay them through Stripe…" {
		t.Errorf("the queue's button reads %q", b)
	}

	nothingPaid := func(when string) {
		t.Helper()
		if n := countRows(t, e, `SELECT count(*) FROM payouts`); n != 0 {
			t.Fatalf("%s: %d payouts made, want none", when, n)
		}
		if n := countRows(t, e, `SELECT count(*) FROM ledger_transactions WHERE kind = 'payout'`); n != 0 {
			t.Fatalf("%s: %d payouts posted to the ledger, want none", when, n)
		}
		if n := countRows(t, e, `SELECT count(*) FROM statements WHERE id = ANY($1) AND status = 'draft'`,
			[]string{fjord.ID, northwind.ID}); n != 2 {
			t.Fatalf("%s: %d of the two statements still drafts", when, n)
		}
	}
	approveURL := e.srv.URL + "/finance/statements/approve?period=" + m.period.String()
	form := url.Values{"_csrf": {csrf}, "id": {fjord.ID, northwind.ID}}
	doc = askedToConfirm(t, fin, approveURL, form)
	nothingPaid("after the first POST")
	items := map[string][2]string{}
	doc.Find(testID("confirm-item")).Each(func(_ int, s *goquery.Selection) {
		items[s.AttrOr("data-id", "")] = [2]string{text(s.Find(testID("confirm-party"))), text(s.Find(testID("confirm-amount")))}
	})
	if len(items) != 2 || items[fjord.ID] != [2]string{"Fjord GPU Co-op", cents(fjord.Payout)} ||
		items[northwind.ID] != [2]string{"Northwind Compute", cents(northwind.Payout)} {
		t.Errorf("the confirmation lists %v, want Fjord GPU Co-op %s and Northwind Compute %s", items, cents(fjord.Payout), cents(northwind.Payout))
	}
	if got := text(doc.Find(testID("confirm-total"))); got != cents(total) {
		t.Errorf("the confirmation's total %q, want %s", got, cents(total))
	}
	if c := consequences(doc); !strings.Contains(c, "Stripe transfer") || !strings.Contains(c, cents(total)+" in all, in 2 transfers") {
		t.Errorf("the confirmation says %q, want the transfers and %s", c, cents(total))
	}
	if b, want := text(doc.Find(testID("confirm"))), "Approve 2 statements and pay "+cents(total)+" through Stripe"; b != want {
		t.Errorf("the confirm button reads %q, want %q", b, want)
	}

	// confirm=yes is not enough: the token of the page shown must come with it.
	for _, token := range []string{"", "forged", doc.Find(`input[name="confirm_token"]`).AttrOr("value", "") + "x"} {
		res, err := fin.PostForm(approveURL, url.Values{"_csrf": {csrf}, "id": {fjord.ID, northwind.ID}, "confirm": {"yes"},
			"confirm_token": {token}})
		if err != nil {
			t.Fatal(err)
		}
		stale, _ := goqueryFrom(res)
		if res.StatusCode != http.StatusConflict || stale.Find(testID("confirm-stale")).Length() != 1 {
			t.Fatalf("confirm=yes with token %q: status %d, want 409 and the confirmation again", token, res.StatusCode)
		}
		nothingPaid("after confirm=yes with token " + token)
	}
	// A confirmation of one statement does not approve two.
	one := askedToConfirm(t, fin, approveURL, url.Values{"_csrf": {csrf}, "id": {fjord.ID}})
	res, err := fin.PostForm(approveURL, url.Values{"_csrf": {csrf}, "id": {fjord.ID, northwind.ID}, "confirm": {"yes"},
		"confirm_token": {one.Find(`input[name="confirm_token"]`).AttrOr("value", "")}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusConflict {
		t.Fatalf("one statement's confirmation posted with two: status %d, want 409", res.StatusCode)
	}
	nothingPaid("after one statement's confirmation posted with two")

	res = confirmation(t, fin, e.srv.URL, doc)
	wantStatus(t, res, http.StatusOK)
	if n := countRows(t, e, `SELECT count(*) FROM ledger_transactions WHERE kind = 'payout'`); n != 2 {
		t.Fatalf("%d payouts posted after the confirmation, want 2", n)
	}
	var paid int64
	if err := e.pool.QueryRow(ctx, `SELECT coalesce(sum(amount_cents), 0)::bigint FROM payouts WHERE status = 'paid'`).Scan(&paid); err != nil {
		t.Fatal(err)
	}
	if paid != int64(total) {
		t.Fatalf("paid %d cents, want the %d confirmed", paid, total)
	}

	res, err = fin.PostForm(e.srv.URL+doc.Find(testID("confirm-form")).AttrOr("action", ""), formOf(doc))
	if err != nil {
		t.Fatal(err)
	}
	again, _ := goqueryFrom(res)
	if res.StatusCode != http.StatusConflict || again.Find(testID("confirm-form")).Length() != 0 {
		t.Fatalf("the same confirmation again: status %d, a confirm form %d, want 409 and none", res.StatusCode,
			again.Find(testID("confirm-form")).Length())
	}
	if n := countRows(t, e, `SELECT count(*) FROM ledger_transactions WHERE kind = 'payout'`); n != 2 {
		t.Fatalf("%d payouts posted after confirming twice, want 2", n)
	}
	if n := countRows(t, e, `SELECT count(*) FROM payouts`); n != 2 {
		t.Fatalf("%d payouts after confirming twice, want 2", n)
	}
	if st := e.statementOf(t, m, "northwind@example.com"); st.Status != invoicing.StatusPaid {
		t.Fatalf("Northwind's statement is %s after its payout", st.Status)
	}
}

// formOf is the confirmation form's fields.
func formOf(doc *goquery.Document) url.Values {
	values := url.Values{}
	doc.Find(testID("confirm-form") + " input").Each(func(_ int, s *goquery.Selection) {
		values.Add(s.AttrOr("name", ""), s.AttrOr("value", ""))
	})
	return values
}

// One statement's approval names its transfer on the statement's page, on its confirmation
// (which a GET shows too) and nowhere moves money before it is confirmed; the confirmed POST
// pays it once, and the same confirmation again is refused on the statement's page. Marking a
// statement paid by hand says no Stripe transfer will be sent, and records nothing until
// confirmed.
func TestApprovingOneStatementNamesItsTransfer(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	m := e.closeLastMonth(t)
	u, err := e.accounts.UserByEmail(ctx, "northwind@example.com")
	if err != nil {
		t.Fatal(err)
	}
	a, _, err := e.payouts.Connect(ctx, payoutsConnect(e, u, "US"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.payouts.Observe(ctx, stateComplete(a.StripeAccountID), time.Now()); err != nil {
		t.Fatal(err)
	}
	northwind := e.statementOf(t, m, "northwind@example.com")
	fin, csrf := loginBrowser(t, e, "finance@example.com")
	path := "/finance/statements/" + northwind.ID
	want := "Approve and pay " + cents(northwind.Payout) + " to Northwind Compute through Stripe"

	shown := getPage(t, fin, e.srv.URL+path+"/approve")
	if b := text(shown.Find(testID("confirm"))); b != want {
		t.Errorf("GET of the approval: button %q, want %q", b, want)
	}
	ask := askedToConfirm(t, fin, e.srv.URL+path+"/approve", url.Values{"_csrf": {csrf}})
	if b := text(ask.Find(testID("confirm"))); b != want {
		t.Errorf("the confirmation's button %q, want %q", b, want)
	}
	if c := consequences(ask); !strings.Contains(c, "Stripe transfer") || !strings.Contains(c, cents(northwind.Payout)+" in all, in 1 transfer") {
		t.Errorf("the confirmation says %q", c)
	}
	if n := countRows(t, e, `SELECT count(*) FROM payouts`); n != 0 {
		t.Fatalf("%d payouts after the first POST, want none", n)
	}
	if st := e.statementOf(t, m, "northwind@example.com"); st.Status != invoicing.StatusDraft {
		t.Fatalf("after the first POST the statement is %s", st.Status)
	}
	res := confirmation(t, fin, e.srv.URL, ask)
	wantStatus(t, res, http.StatusSeeOther)
	again := confirmation(t, fin, e.srv.URL, ask)
	if again.StatusCode != http.StatusConflict {
		t.Fatalf("the same confirmation again: status %d, want 409", again.StatusCode)
	}
	var n int
	var paid int64
	if err := e.pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(amount_cents), 0)::bigint FROM payouts WHERE status = 'paid'`).Scan(&n, &paid); err != nil {
		t.Fatal(err)
	}
	if n != 1 || paid != int64(northwind.Payout) {
		t.Fatalf("%d payouts of %d cents in all, want one of %d", n, paid, northwind.Payout)
	}

	// Fjord has no Stripe account: approved, its payout fails; finance pays it by hand.
	fjord := e.statementOf(t, m, "provider@example.com")
	if _, err := e.invoicing.ApproveStatements(ctx, m.finance.ID, []string{fjord.ID}); err != nil {
		t.Fatal(err)
	}
	ask = askedToConfirm(t, fin, e.srv.URL+"/finance/statements/"+fjord.ID+"/paid", url.Values{"_csrf": {csrf}, "reference": {"wire 88"}})
	if c := consequences(ask); !strings.Contains(c, "Fjord GPU Co-op was paid the "+cents(fjord.Payout)+" payout") ||
		!strings.Contains(c, "No Stripe transfer is sent for it") {
		t.Errorf("marking the statement paid says %q", c)
	}
	if st := e.statementOf(t, m, "provider@example.com"); st.Status != invoicing.StatusIssued {
		t.Fatalf("after the first POST Fjord's statement is %s, want issued", st.Status)
	}
	wantStatus(t, confirmation(t, fin, e.srv.URL, ask), http.StatusSeeOther)
	if st := e.statementOf(t, m, "provider@example.com"); st.Status != invoicing.StatusPaid || st.PaymentReference != "wire 88" {
		t.Fatalf("after the confirmation Fjord's statement is %s with %q", st.Status, st.PaymentReference)
	}
}

// A hand adjustment of a customer's credit moves money at once: the first POST shows what it
// moves (the amount, the customer, the balance before and after) and posts nothing; the
// confirmed POST posts it once; the same confirmation posted again no longer matches the
// balance it showed and posts nothing more.
func TestAdjustingABalanceConfirmsFirst(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	dev, err := e.accounts.UserByEmail(ctx, "developer@example.com")
	if err != nil {
		t.Fatal(err)
	}
	adjustments := func() int {
		return countRows(t, e, `SELECT count(*) FROM ledger_transactions WHERE kind = 'adjustment'`)
	}
	before := adjustments()
	fin, csrf := loginBrowser(t, e, "finance@example.com")
	ask := askedToConfirm(t, fin, e.srv.URL+"/finance/adjustments", url.Values{"_csrf": {csrf},
		"account_id": {dev.AccountID}, "amount_usd": {"12.50"}, "reason": {"goodwill after an outage"}})
	if b := text(ask.Find(testID("confirm"))); b != "Grant $12.50" {
		t.Errorf("the confirmation's button %q, want Grant $12.50", b)
	}
	if c := consequences(ask); !strings.Contains(c, "Grants $12.50 of credit to Acme Labs") ||
		!strings.Contains(c, "goodwill after an outage") || !strings.Contains(c, "the balance goes from $") {
		t.Errorf("the confirmation says %q", c)
	}
	if n := adjustments(); n != before {
		t.Fatalf("%d adjustments after the first POST, want %d", n, before)
	}
	wantStatus(t, confirmation(t, fin, e.srv.URL, ask), http.StatusSeeOther)
	if n := adjustments(); n != before+1 {
		t.Fatalf("%d adjustments after the confirmation, want %d", n, before+1)
	}
	again := confirmation(t, fin, e.srv.URL, ask)
	if again.StatusCode != http.StatusConflict {
		t.Errorf("the same confirmation again: status %d, want 409", again.StatusCode)
	}
	if n := adjustments(); n != before+1 {
		t.Fatalf("%d adjustments after the confirmation was posted twice, want %d", n, before+1)
	}
}
