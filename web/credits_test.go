package web_test

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/money"
)

type checkoutJSON struct {
	ID  string `json:"id"`
	URL string `json:"url"`
}

type balanceJSON struct {
	BalancePico int64  `json:"balance_pico"`
	BalanceUSD  string `json:"balance_usd"`
	Negative    bool   `json:"negative"`
}

// historyJSON is a page of /api/credits/history.
type historyJSON struct {
	Entries []struct {
		Kind   string `json:"kind"`
		Memo   string `json:"memo"`
		Amount int64  `json:"amount_pico"`
	} `json:"entries"`
}

// balance returns the caller's balance in dollars, as /api/balance writes it.
func (e *env) balance(t *testing.T, token string) string {
	t.Helper()
	var b balanceJSON
	wantStatus(t, e.call(t, token, http.MethodGet, "/api/balance", nil, &b), http.StatusOK)
	return b.BalanceUSD
}

// postWebhook posts a raw Stripe event with its Stripe-Signature header.
func (e *env) postWebhook(t *testing.T, payload []byte, signature string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/webhooks/stripe", bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Stripe-Signature", signature)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res
}

// checkout starts a purchase through the API and returns it as stored.
func (e *env) checkout(t *testing.T, token, accountID string, amountUSD any) credits.Purchase {
	t.Helper()
	var out checkoutJSON
	wantStatus(t, e.call(t, token, http.MethodPost, "/api/credits/checkout", map[string]any{"amount_usd": amountUSD}, &out), http.StatusCreated)
	p, err := e.credits.Purchase(context.Background(), accountID, out.ID)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// paidEvent is a checkout.session.completed event that says the purchase is paid.
func paidEvent(eventID string, p credits.Purchase) []byte {
	return credits.CheckoutEvent(eventID, "checkout.session.completed", p, "paid", "pi_test_"+p.ID[:8], time.Now())
}

// loginBrowser logs a demo user in through the login form and returns the browser and the
// CSRF token its forms carry.
func loginBrowser(t *testing.T, e *env, email string) (*http.Client, string) {
	t.Helper()
	b := browserClient(t)
	token := csrfFromPage(t, b, e.srv.URL+"/login")
	res := postForm(t, b, e.srv.URL+"/login", url.Values{"email": {email}, "password": {demo.Password}, "_csrf": {token}})
	wantStatus(t, res, http.StatusSeeOther)
	return b, token
}

func TestAPICheckoutAndWebhook(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	dev := e.token(t, "developer@example.com", demo.Password)
	devUser, err := e.accounts.UserByEmail(ctx, "developer@example.com")
	if err != nil {
		t.Fatal(err)
	}

	var out checkoutJSON
	res := e.call(t, dev, http.MethodPost, "/api/credits/checkout", map[string]any{"amount_usd": 20}, &out)
	wantStatus(t, res, http.StatusCreated)
	if out.ID == "" || !strings.HasSuffix(out.URL, "/credits/test-pay/"+out.ID) {
		t.Fatalf("checkout = %+v, want an id and a url to /credits/test-pay/<id>", out)
	}
	p, err := e.credits.Purchase(ctx, devUser.AccountID, out.ID)
	if err != nil {
		t.Fatal(err)
	}
	if p.AmountCents != 2000 || p.Status != credits.PurchasePending || p.StripeSessionID == "" {
		t.Fatalf("purchase %+v, want $20.00 pending with a checkout session", p)
	}

	t.Run("amounts out of bounds or unreadable are refused", func(t *testing.T) {
		before := countRows(t, e, `SELECT count(*) FROM credit_purchases`)
		for _, amount := range []any{4.99, 10000.01, "abc", 0, -20} {
			var out apiErrorJSON
			res := e.call(t, dev, http.MethodPost, "/api/credits/checkout", map[string]any{"amount_usd": amount}, &out)
			if res.StatusCode != http.StatusUnprocessableEntity {
				t.Errorf("amount %v: status %d, want 422", amount, res.StatusCode)
				continue
			}
			wantFields(t, out, "amount_usd")
		}
		if after := countRows(t, e, `SELECT count(*) FROM credit_purchases`); after != before {
			t.Errorf("purchases %d -> %d after refused amounts", before, after)
		}
	})

	if got := e.balance(t, dev); got != "0.00" {
		t.Fatalf("balance before payment = %q, want 0.00", got)
	}

	event := paidEvent("evt_web_paid", p)
	wantStatus(t, e.postWebhook(t, event, credits.SignEvent(event, webhookSecret, time.Now())), http.StatusOK)
	if got := e.balance(t, dev); got != "20.00" {
		t.Fatalf("balance after the paid event = %q, want 20.00", got)
	}

	t.Run("the same event three times more credits once", func(t *testing.T) {
		for range 3 {
			wantStatus(t, e.postWebhook(t, event, credits.SignEvent(event, webhookSecret, time.Now())), http.StatusOK)
		}
		if got := e.balance(t, dev); got != "20.00" {
			t.Errorf("balance = %q, want 20.00", got)
		}
		if n := countRows(t, e, `SELECT count(*) FROM ledger_transactions WHERE kind = 'purchase'`); n != 1 {
			t.Errorf("%d purchase transactions, want 1", n)
		}
		if n := countRows(t, e, `SELECT deliveries FROM stripe_events WHERE id = 'evt_web_paid'`); n != 4 {
			t.Errorf("event recorded %d deliveries, want 4", n)
		}
	})

	t.Run("a tampered or stale event changes nothing", func(t *testing.T) {
		second := e.checkout(t, dev, devUser.AccountID, "50")
		good := paidEvent("evt_web_second", second)
		tampered := bytes.Replace(good, []byte(`"amount_total":5000`), []byte(`"amount_total":9000`), 1)
		if bytes.Equal(tampered, good) || len(tampered) != len(good) {
			t.Fatal("the tampered body does not differ from the signed one by one byte")
		}
		events := countRows(t, e, `SELECT count(*) FROM stripe_events`)

		wantStatus(t, e.postWebhook(t, tampered, credits.SignEvent(good, webhookSecret, time.Now())), http.StatusBadRequest)
		wantStatus(t, e.postWebhook(t, good, credits.SignEvent(good, webhookSecret, time.Now().Add(-301*time.Second))),
			http.StatusBadRequest)

		if got := e.balance(t, dev); got != "20.00" {
			t.Errorf("balance = %q, want 20.00", got)
		}
		if n := countRows(t, e, `SELECT count(*) FROM stripe_events`); n != events {
			t.Errorf("stripe events %d -> %d: refused events were stored", events, n)
		}
		if p, _ := e.credits.Purchase(ctx, devUser.AccountID, second.ID); p.Status != credits.PurchasePending {
			t.Errorf("purchase status %s, want pending", p.Status)
		}
		// The body as signed, freshly, is good: only the changes made it fail.
		wantStatus(t, e.postWebhook(t, good, credits.SignEvent(good, webhookSecret, time.Now())), http.StatusOK)
		if got := e.balance(t, dev); got != "70.00" {
			t.Errorf("balance after the good event = %q, want 70.00", got)
		}
	})

	t.Run("finance sees the events received", func(t *testing.T) {
		b, _ := loginBrowser(t, e, "finance@example.com")
		doc := getPage(t, b, e.srv.URL+"/finance/stripe-events")
		row := doc.Find(`[data-testid="stripe-event"][data-event="evt_web_paid"]`)
		if row.Length() != 1 {
			t.Fatalf("%d rows for evt_web_paid, want 1", row.Length())
		}
		// Every delivery records its outcome; the later ones found the purchase credited.
		cells := row.Find("td")
		if cells.Eq(1).Text() != "checkout.session.completed" || cells.Eq(2).Text() != "4" ||
			!strings.Contains(cells.Eq(3).Text(), "credited") {
			t.Errorf("event row %q, want checkout.session.completed, 4 deliveries, credited", row.Text())
		}
	})
}

// A developer buys credits through the pages: check-out, the local test-payment page, and the
// return page, which waits for the webhook and then shows the balance.
func TestCreditsFormFlow(t *testing.T) {
	t.Parallel()
	e := setup(t)
	b, csrf := loginBrowser(t, e, "developer@example.com")

	res := postForm(t, b, e.srv.URL+"/credits/checkout", url.Values{"amount_usd": {"20"}, "_csrf": {csrf}})
	wantStatus(t, res, http.StatusSeeOther)
	payURL := res.Header.Get("Location")
	_, id, ok := strings.Cut(payURL, "/credits/test-pay/")
	if !ok || id == "" {
		t.Fatalf("check-out sent the browser to %q, want the test-payment page", payURL)
	}
	if doc := getPage(t, b, payURL); doc.Find(`[data-testid="test-payment"]`).Length() != 1 {
		t.Fatal("the test-payment page is not marked as a test")
	}

	returnPath := "/credits/return?purchase=" + id
	doc := getPage(t, b, e.srv.URL+returnPath)
	if st, _ := doc.Find(`[data-testid="purchase-return"]`).Attr("data-status"); st != "pending" {
		t.Errorf("return page before payment: status %q, want pending", st)
	}

	res = postForm(t, b, e.srv.URL+"/credits/test-pay/"+id, url.Values{"_csrf": {csrf}})
	wantStatus(t, res, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); loc != returnPath {
		t.Fatalf("after paying the browser goes to %q, want %q", loc, returnPath)
	}
	doc = getPage(t, b, e.srv.URL+returnPath)
	if st, _ := doc.Find(`[data-testid="purchase-return"]`).Attr("data-status"); st != "paid" {
		t.Errorf("return page after payment: status %q, want paid", st)
	}
	if got := doc.Find(`[data-testid="balance"]`).Text(); got != "$20.00" {
		t.Errorf("return page balance %q, want $20.00", got)
	}
	if got := getPage(t, b, e.srv.URL+"/credits").Find(`[data-testid="balance"]`).Text(); got != "$20.00" {
		t.Errorf("credits page balance %q, want $20.00", got)
	}
	if n := countRows(t, e, `SELECT count(*) FROM ledger_transactions WHERE kind = 'purchase'`); n != 1 {
		t.Errorf("%d purchase transactions, want 1", n)
	}
}

// Another developer's purchase does not exist for you, on the pages or in the API, and
// cannot be paid from your session.
func TestCreditsOtherDevelopersPurchaseIsNotFound(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	other, err := e.accounts.SignUp(ctx, accounts.SignUpInput{Email: "other-dev@example.com", Password: demo.Password,
		Role: accounts.RoleDeveloper, AccountName: "Other Labs"})
	if err != nil {
		t.Fatal(err)
	}
	otherToken := e.token(t, other.Email, demo.Password)
	theirs := e.checkout(t, otherToken, other.AccountID, 25)

	dev := e.token(t, "developer@example.com", demo.Password)
	wantStatus(t, e.call(t, dev, http.MethodGet, "/api/credits/purchases/"+theirs.ID, nil, nil), http.StatusNotFound)
	wantStatus(t, e.call(t, otherToken, http.MethodGet, "/api/credits/purchases/"+theirs.ID, nil, nil), http.StatusOK)

	b, csrf := loginBrowser(t, e, "developer@example.com")
	for _, path := range []string{"/credits/return?purchase=" + theirs.ID, "/credits/test-pay/" + theirs.ID} {
		res, err := b.Get(e.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		wantStatus(t, res, http.StatusNotFound)
	}
	wantStatus(t, postForm(t, b, e.srv.URL+"/credits/test-pay/"+theirs.ID, url.Values{"_csrf": {csrf}}), http.StatusNotFound)
	if p, _ := e.credits.Purchase(ctx, other.AccountID, theirs.ID); p.Status != credits.PurchasePending {
		t.Errorf("their purchase is %s, want pending", p.Status)
	}
	if got := e.balance(t, otherToken); got != "0.00" {
		t.Errorf("their balance %q, want 0.00", got)
	}
}

type transactionJSON struct {
	ID        string `json:"id"`
	Kind      string `json:"kind"`
	Memo      string `json:"memo"`
	CreatedBy string `json:"created_by"`
	Postings  []struct {
		LedgerAccountID string `json:"ledger_account_id"`
		AmountPico      int64  `json:"amount_pico"`
	} `json:"postings"`
}

type financeBalancesJSON struct {
	Accounts []struct {
		LedgerAccountID string `json:"ledger_account_id"`
		Kind            string `json:"kind"`
		OwnerAccountID  string `json:"owner_account_id"`
		OwnerName       string `json:"owner_name"`
		BalanceUSD      string `json:"balance_usd"`
		Negative        bool   `json:"negative"`
	} `json:"accounts"`
}

func TestAPIFinanceAdjustment(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	fin := e.token(t, "finance@example.com", demo.Password)
	dev := e.token(t, "developer@example.com", demo.Password)
	finUser, err := e.accounts.UserByEmail(ctx, "finance@example.com")
	if err != nil {
		t.Fatal(err)
	}
	devUser, err := e.accounts.UserByEmail(ctx, "developer@example.com")
	if err != nil {
		t.Fatal(err)
	}
	adjust := func(token string, body map[string]any, out any) *http.Response {
		t.Helper()
		return e.call(t, token, http.MethodPost, "/api/finance/adjustments", body, out)
	}
	const grant = "Goodwill credit for the outage of 3 May"
	const takeBack = "Part of the goodwill credit was a mistake"

	var txn transactionJSON
	res := adjust(fin, map[string]any{"account_id": devUser.AccountID, "amount_usd": "12.345", "reason": grant}, &txn)
	wantStatus(t, res, http.StatusCreated)
	if txn.ID == "" || txn.Kind != "adjustment" || txn.CreatedBy != finUser.ID || !strings.Contains(txn.Memo, grant) {
		t.Errorf("transaction %+v, want an adjustment by %s with the reason", txn, finUser.ID)
	}
	if len(txn.Postings) != 2 || txn.Postings[0].AmountPico+txn.Postings[1].AmountPico != 0 {
		t.Errorf("postings %+v, want two that sum to zero", txn.Postings)
	}
	if got := e.balance(t, dev); got != "12.345" {
		t.Fatalf("balance after granting $12.345 = %q", got)
	}
	wantStatus(t, adjust(fin, map[string]any{"account_id": devUser.AccountID, "amount_usd": -2.5, "reason": takeBack}, nil),
		http.StatusCreated)
	if got := e.balance(t, dev); got != "9.845" {
		t.Fatalf("balance after taking back $2.50 = %q, want 9.845", got)
	}

	var hist historyJSON
	wantStatus(t, e.call(t, dev, http.MethodGet, "/api/credits/history", nil, &hist), http.StatusOK)
	if len(hist.Entries) != 2 {
		t.Fatalf("history has %d entries, want 2", len(hist.Entries))
	}
	for i, want := range []struct {
		reason string
		amount int64
	}{{takeBack, -2_500_000_000_000}, {grant, 12_345_000_000_000}} {
		if h := hist.Entries[i]; h.Kind != "adjustment" || !strings.Contains(h.Memo, want.reason) || h.Amount != want.amount {
			t.Errorf("history entry %d = %+v, want an adjustment of %d with %q", i, h, want.amount, want.reason)
		}
	}

	t.Run("refused adjustments save nothing", func(t *testing.T) {
		before := countRows(t, e, `SELECT count(*) FROM ledger_transactions`)
		for _, c := range []struct {
			name  string
			body  map[string]any
			field string
		}{
			{"missing reason", map[string]any{"account_id": devUser.AccountID, "amount_usd": "5"}, "reason"},
			{"blank reason", map[string]any{"account_id": devUser.AccountID, "amount_usd": "5", "reason": "  "}, "reason"},
			{"unreadable amount", map[string]any{"account_id": devUser.AccountID, "amount_usd": "abc", "reason": "x"}, "amount_usd"},
			{"zero amount", map[string]any{"account_id": devUser.AccountID, "amount_usd": 0, "reason": "x"}, "amount_usd"},
			{"no amount", map[string]any{"account_id": devUser.AccountID, "reason": "x"}, "amount_usd"},
			{"not an account id", map[string]any{"account_id": "acme", "amount_usd": "5", "reason": "x"}, "account_id"},
			{"no such account", map[string]any{"account_id": "00000000-0000-4000-8000-000000000000", "amount_usd": "5", "reason": "x"},
				"account_id"},
		} {
			var out apiErrorJSON
			res := adjust(fin, c.body, &out)
			if res.StatusCode != http.StatusUnprocessableEntity {
				t.Errorf("%s: status %d, want 422", c.name, res.StatusCode)
				continue
			}
			wantFields(t, out, c.field)
		}
		wantStatus(t, adjust(dev, map[string]any{"account_id": devUser.AccountID, "amount_usd": "100", "reason": "free money"}, nil),
			http.StatusForbidden)
		if after := countRows(t, e, `SELECT count(*) FROM ledger_transactions`); after != before {
			t.Errorf("ledger transactions %d -> %d after refused adjustments", before, after)
		}
		if got := e.balance(t, dev); got != "9.845" {
			t.Errorf("balance %q, want 9.845", got)
		}
	})

	t.Run("a balance taken below zero is flagged", func(t *testing.T) {
		wantStatus(t, adjust(fin, map[string]any{"account_id": devUser.AccountID, "amount_usd": "-20", "reason": "Chargeback"}, nil),
			http.StatusCreated)
		var out financeBalancesJSON
		wantStatus(t, e.call(t, fin, http.MethodGet, "/api/finance/balances", nil, &out), http.StatusOK)
		ledgerAccount := ""
		for _, a := range out.Accounts {
			switch {
			case a.Kind == "customer_credit" && a.OwnerAccountID == devUser.AccountID:
				ledgerAccount = a.LedgerAccountID
				if a.BalanceUSD != "-10.155" || !a.Negative || a.OwnerName != "Acme Labs" {
					t.Errorf("developer's credit %+v, want Acme Labs at -10.155, flagged", a)
				}
			case a.Kind == "platform_revenue":
				if a.BalanceUSD != "10.155" || a.Negative {
					t.Errorf("platform revenue %+v, want 10.155 unflagged", a)
				}
			}
		}
		if ledgerAccount == "" {
			t.Fatalf("no customer credit account for the developer in %+v", out.Accounts)
		}

		b, _ := loginBrowser(t, e, "finance@example.com")
		doc := getPage(t, b, e.srv.URL+"/finance/balances")
		if n := doc.Find(`[data-testid="negative-balance"]`).Length(); n != 1 {
			t.Errorf("%d balances flagged negative on the page, want 1", n)
		}
		row := doc.Find(`[data-testid="account"][data-account="` + ledgerAccount + `"]`)
		if row.Find(`[data-testid="negative-balance"]`).Length() != 1 || !strings.Contains(row.Text(), "-$10.16") {
			t.Errorf("developer's row %q, want -$10.16 ($-10.155 in cents) flagged", row.Text())
		}
	})
}

// Finance adjusts a customer's credit through the balances page; a refused form shows its
// errors beside the fields and saves nothing.
func TestFinanceAdjustmentForm(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	devUser, err := e.accounts.UserByEmail(ctx, "developer@example.com")
	if err != nil {
		t.Fatal(err)
	}
	b, csrf := loginBrowser(t, e, "finance@example.com")
	doc := getPage(t, b, e.srv.URL+"/finance/balances")
	if doc.Find(`select[name="account_id"] option[value="`+devUser.AccountID+`"]`).Length() != 1 {
		t.Fatal("the developer's account is not among the accounts to adjust")
	}

	form := url.Values{"account_id": {devUser.AccountID}, "amount_usd": {"7.50"}, "reason": {""}, "_csrf": {csrf}}
	res, err := b.PostForm(e.srv.URL+"/finance/adjustments", form)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, res, http.StatusUnprocessableEntity)
	doc, err = goqueryFrom(res)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Find(`[data-testid="error-reason"]`).Length() != 1 {
		t.Error("no error beside the reason")
	}
	if v, _ := doc.Find(`input[name="amount_usd"]`).Attr("value"); v != "7.50" {
		t.Errorf("amount field %q, want the 7.50 typed", v)
	}
	if n := countRows(t, e, `SELECT count(*) FROM ledger_transactions WHERE kind = 'adjustment'`); n != 0 {
		t.Fatalf("%d adjustments saved by a refused form", n)
	}

	form.Set("reason", "Welcome credit")
	ask := askedToConfirm(t, b, e.srv.URL+"/finance/adjustments", form)
	res = confirmation(t, b, e.srv.URL, ask)
	wantStatus(t, res, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); loc != "/finance/balances?flash=adjusted" {
		t.Fatalf("redirect to %q", loc)
	}
	doc = getPage(t, b, e.srv.URL+"/finance/balances?flash=adjusted")
	if f := doc.Find(`[data-testid="flash"]`).Text(); !strings.Contains(f, "adjustment") {
		t.Errorf("flash %q", f)
	}
	bal, err := e.credits.Balance(ctx, devUser.AccountID)
	if err != nil {
		t.Fatal(err)
	}
	if bal.USD != "7.50" {
		t.Errorf("developer's balance %q, want 7.50", bal.USD)
	}
}

type priceChangeJSON struct {
	Tier          string         `json:"tier"`
	Model         string         `json:"model"`
	Input         money.MicroUSD `json:"input_usd_per_mtok"`
	Output        money.MicroUSD `json:"output_usd_per_mtok"`
	EffectiveFrom time.Time      `json:"effective_from"`
	CreatedBy     string         `json:"created_by"`
}

func TestAPIFinancePrices(t *testing.T) {
	t.Parallel()
	e := setup(t)
	fin := e.token(t, "finance@example.com", demo.Password)
	schedule := func(token string, body map[string]any, out any) *http.Response {
		t.Helper()
		return e.call(t, token, http.MethodPost, "/api/finance/prices", body, out)
	}
	before := countRows(t, e, `SELECT count(*) FROM prices`)

	var refused apiErrorJSON
	res := schedule(fin, map[string]any{"tier": "standard", "input_usd_per_mtok": "0.2", "output_usd_per_mtok": 0.4,
		"effective_from": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)}, &refused)
	wantStatus(t, res, http.StatusUnprocessableEntity)
	wantFields(t, refused, "effective_from")

	refused = apiErrorJSON{}
	res = schedule(fin, map[string]any{"tier": "premium", "input_usd_per_mtok": "-1", "output_usd_per_mtok": "abc",
		"effective_from": "next tuesday"}, &refused)
	wantStatus(t, res, http.StatusUnprocessableEntity)
	wantFields(t, refused, "tier", "input_usd_per_mtok", "output_usd_per_mtok", "effective_from")

	wantStatus(t, schedule(e.token(t, "developer@example.com", demo.Password), map[string]any{"tier": "standard",
		"input_usd_per_mtok": "0.01", "output_usd_per_mtok": "0.01", "effective_from": "2099-01-01T00:00:00Z"}, nil), http.StatusForbidden)
	if after := countRows(t, e, `SELECT count(*) FROM prices`); after != before {
		t.Fatalf("prices %d -> %d after refused changes", before, after)
	}

	when := time.Now().UTC().Add(48 * time.Hour).Truncate(time.Hour)
	body := map[string]any{"tier": "standard", "input_usd_per_mtok": "0.2", "output_usd_per_mtok": 0.4,
		"effective_from": when.Format(time.RFC3339)}
	var created priceChangeJSON
	wantStatus(t, schedule(fin, body, &created), http.StatusCreated)
	if created.Tier != "standard" || created.Input != 200_000 || created.Output != 400_000 || !created.EffectiveFrom.Equal(when) ||
		created.CreatedBy != "finance@example.com" {
		t.Errorf("created %+v", created)
	}
	var conflict apiErrorJSON
	wantStatus(t, schedule(fin, body, &conflict), http.StatusConflict)
	wantFields(t, conflict, "effective_from")
	// A model's own price at the same moment is another row of the book, not a conflict.
	const llama = "meta-llama/Meta-Llama-3-8B-Instruct"
	var own priceChangeJSON
	wantStatus(t, schedule(fin, map[string]any{"tier": "standard", "model": llama, "input_usd_per_mtok": "0.25",
		"output_usd_per_mtok": "0.5", "effective_from": when.Format(time.RFC3339)}, &own), http.StatusCreated)
	if own.Model != llama || own.Tier != "standard" || own.Input != 250_000 || own.Output != 500_000 {
		t.Errorf("the model's price %+v", own)
	}

	var book struct {
		Current []priceChangeJSON `json:"current"`
		History []priceChangeJSON `json:"history"`
	}
	wantStatus(t, e.call(t, fin, http.MethodGet, "/api/finance/prices", nil, &book), http.StatusOK)
	found := 0
	for _, h := range book.History {
		if h.Tier == "standard" && h.EffectiveFrom.Equal(when) && h.Model == "" {
			found++
			if h.CreatedBy != "finance@example.com" || h.Input != 200_000 || h.Output != 400_000 {
				t.Errorf("history row %+v, want $0.20/$0.40 by finance@example.com", h)
			}
		}
	}
	if found != 1 {
		t.Errorf("%d history rows for the change, want 1", found)
	}
	defaults, models := 0, 0
	for _, c := range book.Current {
		if c.Model != "" {
			models++
			if c.Model == llama {
				t.Errorf("the 8B model's price is in force before its moment: %+v", c)
			}
			continue
		}
		defaults++
		for _, d := range catalog.DefaultPrices {
			if c.Tier == string(d.Tier) && (c.Input != d.Input || c.Output != d.Output) {
				t.Errorf("%s in force now is %s/%s, want the default until the change takes effect", c.Tier, c.Input, c.Output)
			}
		}
	}
	if defaults != len(catalog.Tiers) || models != len(demo.ModelPrices) {
		t.Errorf("%d tiers and %d models priced now, want %d and the demo's %d", defaults, models, len(catalog.Tiers), len(demo.ModelPrices))
	}
}

// The price book page refuses a retroactive change beside its date and lists a scheduled one.
func TestFinancePriceForm(t *testing.T) {
	t.Parallel()
	e := setup(t)
	b, csrf := loginBrowser(t, e, "admin@example.com")
	getPage(t, b, e.srv.URL+"/finance/prices")

	form := url.Values{"tier": {"batch"}, "input_usd_per_mtok": {"0.09"}, "output_usd_per_mtok": {"0.18"},
		"effective_from": {time.Now().UTC().Add(-24 * time.Hour).Format("2006-01-02T15:04")}, "_csrf": {csrf}}
	res, err := b.PostForm(e.srv.URL+"/finance/prices", form)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, res, http.StatusUnprocessableEntity)
	doc, err := goqueryFrom(res)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Find(`[data-testid="error-effective_from"]`).Length() != 1 {
		t.Error("no error beside the effective date")
	}
	if n := countRows(t, e, `SELECT count(*) FROM prices WHERE created_by IS NOT NULL`); n != 0 {
		t.Fatalf("%d price changes saved by a refused form", n)
	}

	form.Set("effective_from", time.Now().UTC().Add(72*time.Hour).Format("2006-01-02T15:04"))
	res = postForm(t, b, e.srv.URL+"/finance/prices", form)
	wantStatus(t, res, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); loc != "/finance/prices?flash=price-scheduled" {
		t.Fatalf("redirect to %q", loc)
	}
	doc = getPage(t, b, e.srv.URL+"/finance/prices")
	row := doc.Find(`[data-testid="price-change"][data-tier="batch"][data-status="scheduled"]`)
	if row.Length() != 1 || !strings.Contains(row.Text(), "admin@example.com") || !strings.Contains(row.Text(), "$0.09") {
		t.Errorf("scheduled rows %q, want one for batch at $0.09 by admin@example.com", row.Text())
	}
	if n := doc.Find(`[data-testid="current-price"][data-model=""]`).Length(); n != len(catalog.Tiers) {
		t.Errorf("%d tier prices in force, want %d", n, len(catalog.Tiers))
	}
	if n := doc.Find(`[data-testid="current-price"][data-model="meta-llama/Meta-Llama-3-70B-Instruct"][data-tier="batch"]`).Length(); n != 1 {
		t.Errorf("%d batch prices of the 70B model in force, want the demo's", n)
	}
}

// A price of $0 is refused unless marked free on purpose, through the API and the form alike;
// marked free it is scheduled.
func TestZeroPriceNeedsFreeOnPurpose(t *testing.T) {
	t.Parallel()
	e := setup(t)
	fin := e.token(t, "finance@example.com", demo.Password)
	before := countRows(t, e, `SELECT count(*) FROM prices`)
	when := time.Now().UTC().Add(48 * time.Hour).Truncate(time.Hour)

	var refused apiErrorJSON
	body := map[string]any{"tier": "batch", "input_usd_per_mtok": "0", "output_usd_per_mtok": "0.16", "effective_from": when.Format(time.RFC3339)}
	wantStatus(t, e.call(t, fin, http.MethodPost, "/api/finance/prices", body, &refused), http.StatusUnprocessableEntity)
	wantFields(t, refused, "input_usd_per_mtok")

	b, csrf := loginBrowser(t, e, "finance@example.com")
	form := url.Values{"tier": {"standard"}, "input_usd_per_mtok": {"0.15"}, "output_usd_per_mtok": {"0"},
		"effective_from": {when.Format("2006-01-02T15:04")}, "_csrf": {csrf}}
	res, err := b.PostForm(e.srv.URL+"/finance/prices", form)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, res, http.StatusUnprocessableEntity)
	doc, err := goqueryFrom(res)
	if err != nil {
		t.Fatal(err)
	}
	if msg := doc.Find(`[data-testid="error-output_usd_per_mtok"]`).Text(); !strings.Contains(msg, "Free on purpose") {
		t.Errorf("error beside the output price %q, want it to name the box", msg)
	}
	if doc.Find(`[data-testid="price-free"]`).Length() != 1 {
		t.Error("the form has no free-on-purpose box")
	}
	if after := countRows(t, e, `SELECT count(*) FROM prices`); after != before {
		t.Fatalf("prices %d -> %d after a $0 price not marked free", before, after)
	}

	body["free"] = true
	var created priceChangeJSON
	wantStatus(t, e.call(t, fin, http.MethodPost, "/api/finance/prices", body, &created), http.StatusCreated)
	if created.Tier != "batch" || created.Input != 0 || created.Output != 160_000 {
		t.Errorf("created %+v, want batch at $0 input, $0.16 output", created)
	}
	form.Set("free", "on")
	wantStatus(t, postForm(t, b, e.srv.URL+"/finance/prices", form), http.StatusSeeOther)
	if n := countRows(t, e, `SELECT count(*) FROM prices WHERE created_by IS NOT NULL AND (input_micro_usd_per_mtok = 0 OR output_micro_usd_per_mtok = 0)`); n != 2 {
		t.Errorf("%d $0 prices scheduled, want the 2 marked free", n)
	}
}

func goqueryFrom(res *http.Response) (*goquery.Document, error) {
	defer res.Body.Close()
	return goquery.NewDocumentFromReader(res.Body)
}
