package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stripe/stripe-go/v76"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/payouts"
	"github.com/gpumarket/gpumarket/web"
)

// providerPayoutsJSON is GET /api/provider/payouts, with the fields these tests read.
type providerPayoutsJSON struct {
	Account struct {
		State           string `json:"state"`
		StripeAccountID string `json:"stripe_account_id"`
		Country         string `json:"country"`
	} `json:"account"`
	Payouts []payoutJSON `json:"payouts"`
	Count   int          `json:"count"`
}

type payoutJSON struct {
	ID               string   `json:"id"`
	StatementID      string   `json:"statement_id"`
	ProviderName     string   `json:"provider_name"`
	AmountCents      int64    `json:"amount_cents"`
	Status           string   `json:"status"`
	Attempts         int      `json:"attempts"`
	LastError        string   `json:"last_error"`
	StripeTransferID string   `json:"stripe_transfer_id"`
	Actions          []string `json:"actions"`
}

// A provider connects Stripe in test mode: the connect form creates the account once however
// often it is posted and sends the provider to the local onboarding page, plainly marked as a
// test; its button completes onboarding, and the Payouts page and its JSON say so. Another
// provider's account is untouched.
func TestProviderConnectsStripeOnTheLocalTestPage(t *testing.T) {
	t.Parallel()
	e := setup(t)
	b, csrf := loginBrowser(t, e, "provider@example.com")
	token := e.token(t, "provider@example.com", demo.Password)

	doc := getPage(t, b, e.srv.URL+"/provider/payouts")
	if state, _ := doc.Find(testID("connected-account")).Attr("data-state"); state != payouts.AccountNotConnected ||
		doc.Find(`form[action="/provider/payouts/connect"] input[name="country"]`).Length() != 1 || doc.Find(testID("test-mode")).Length() != 1 {
		t.Fatalf("payouts page before connecting: state %q", state)
	}
	for range 3 {
		res := postForm(t, b, e.srv.URL+"/provider/payouts/connect", url.Values{"country": {"no"}, "_csrf": {csrf}})
		wantStatus(t, res, http.StatusSeeOther)
		if loc := res.Header.Get("Location"); loc != e.srv.URL+"/provider/payouts/test-onboarding" {
			t.Fatalf("connect sends the provider to %q", loc)
		}
	}
	var accountID, country string
	if n := countRows(t, e, `SELECT count(*) FROM provider_stripe_accounts`); n != 1 {
		t.Fatalf("%d Stripe accounts stored, want 1", n)
	}
	if err := e.pool.QueryRow(context.Background(), `SELECT stripe_account_id, country FROM provider_stripe_accounts`).Scan(&accountID, &country); err != nil ||
		!strings.HasPrefix(accountID, "acct_") || country != "NO" {
		t.Fatalf("stored account %q %q, %v", accountID, country, err)
	}

	doc = getPage(t, b, e.srv.URL+"/provider/payouts/test-onboarding")
	if !strings.Contains(doc.Find(testID("test-banner")).Text(), "TEST ONBOARDING") || !strings.Contains(doc.Text(), accountID) {
		t.Fatalf("test onboarding page: %q", doc.Find("main").Text())
	}
	res := postForm(t, b, e.srv.URL+"/provider/payouts/test-onboarding", url.Values{"_csrf": {csrf}})
	wantStatus(t, res, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); loc != "/provider/payouts?flash=onboarded" {
		t.Fatalf("after completing: %q", loc)
	}
	doc = getPage(t, b, e.srv.URL+"/provider/payouts?flash=onboarded")
	if state, _ := doc.Find(testID("connected-account")).Attr("data-state"); state != payouts.AccountComplete ||
		doc.Find(testID("stripe-account")).Text() != accountID || !strings.Contains(doc.Find(testID("flash")).Text(), "can receive payouts") {
		t.Fatalf("payouts page after onboarding: state %q, account %q", state, doc.Find(testID("stripe-account")).Text())
	}

	var out providerPayoutsJSON
	wantStatus(t, e.call(t, token, http.MethodGet, "/api/provider/payouts", nil, &out), http.StatusOK)
	if out.Account.State != payouts.AccountComplete || out.Account.StripeAccountID != accountID || out.Count != 0 || out.Payouts == nil {
		t.Fatalf("provider payouts JSON = %+v", out)
	}
	other := e.token(t, "northwind@example.com", demo.Password)
	wantStatus(t, e.call(t, other, http.MethodGet, "/api/provider/payouts", nil, &out), http.StatusOK)
	if out.Account.State != payouts.AccountNotConnected || out.Account.StripeAccountID != "" {
		t.Fatalf("another provider sees %+v", out)
	}
}

// A provider who never comes back from Stripe: the account.updated event on the platform's
// Stripe webhook records the completed onboarding, once its signature verifies.
func TestAccountUpdatedWebhookCompletesOnboarding(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	northwind, err := e.accounts.UserByEmail(ctx, "northwind@example.com")
	if err != nil {
		t.Fatal(err)
	}
	a, _, err := e.payouts.Connect(ctx, payouts.ConnectInput{ProviderAccountID: northwind.AccountID, Email: northwind.Email,
		Country: "US", RefreshURL: e.srv.URL + "/provider/payouts/onboarding", ReturnURL: e.srv.URL + "/provider/payouts/return"})
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(map[string]any{"id": "evt_acct_done", "object": "event", "api_version": stripe.APIVersion,
		"created": time.Now().Unix(), "type": "account.updated", "account": a.StripeAccountID,
		"data": map[string]any{"object": map[string]any{"id": a.StripeAccountID, "object": "account",
			"details_submitted": true, "payouts_enabled": true}}})
	wantStatus(t, e.postWebhook(t, payload, credits.SignEvent(payload, "whsec_not_ours", time.Now())), http.StatusBadRequest)
	if got, _ := e.payouts.Account(ctx, northwind.AccountID); got.State != payouts.AccountOnboarding {
		t.Fatalf("after a badly signed event: %+v", got)
	}
	wantStatus(t, e.postWebhook(t, payload, credits.SignEvent(payload, webhookSecret, time.Now())), http.StatusOK)
	var out providerPayoutsJSON
	wantStatus(t, e.call(t, e.token(t, "northwind@example.com", demo.Password), http.MethodGet, "/api/provider/payouts", nil, &out), http.StatusOK)
	if out.Account.State != payouts.AccountComplete {
		t.Fatalf("after the webhook: %+v", out.Account)
	}
	if got := countRows(t, e, `SELECT count(*) FROM stripe_events WHERE id = 'evt_acct_done' AND outcome LIKE '%recorded: complete'`); got != 1 {
		t.Fatalf("stored events with the outcome: %d", got)
	}
}

// webStatements is the invoicing side for the web tests: the statements to pay.
type webStatements struct {
	mu   sync.Mutex
	byID map[string]webStatement
	paid map[string]string // statement id -> payout id
}

type webStatement struct {
	id, provider string
	cents        int64
}

func (s webStatement) StatementID() string     { return s.id }
func (s webStatement) PayeeAccountID() string  { return s.provider }
func (s webStatement) PayableCents() int64     { return s.cents }
func (s webStatement) StatementPeriod() string { return "2026-03" }
func (s webStatement) StatementNumber() string { return "GPM-S-2026-000001" }

func (w *webStatements) StatementToPay(_ context.Context, id string) (payouts.Statement, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	st, ok := w.byID[id]
	if !ok {
		return nil, services.Errorf(services.CodeNotFound, "No such statement.")
	}
	return st, nil
}

func (w *webStatements) MarkPaidTx(_ context.Context, _ pgx.Tx, id string, p payouts.Payout) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.paid[id] = p.ID
	return nil
}

// Finance sees a failed payout with its reason and a retry button; once the provider has
// onboarded, the button pays it: the row says paid with its transfer, the ledger moved exactly
// the amount, the provider sees its payout and no other provider does.
func TestFinanceRetriesAFailedPayout(t *testing.T) {
	t.Parallel()
	book := &webStatements{byID: map[string]webStatement{}, paid: map[string]string{}}
	e := setupWith(t, func(cfg *web.Config, pool *pgxpool.Pool) {
		po := payouts.NewService(payouts.Config{Pool: pool, Ledger: cfg.Payments.Ledger, Statements: book,
			Stripe: payouts.NewStripeConnect(credits.NewStripeAPI("sk_test_web", stripeMockURL(t)))})
		cfg.Payments.Payouts = po
	})
	ctx := context.Background()
	fjord, err := e.accounts.UserByEmail(ctx, "provider@example.com")
	if err != nil {
		t.Fatal(err)
	}
	dev, err := e.accounts.UserByEmail(ctx, "developer@example.com")
	if err != nil {
		t.Fatal(err)
	}
	payable, _ := e.ledger.AccountFor(ctx, ledger.AccountProviderPayable, fjord.AccountID)
	credit, _ := e.ledger.AccountFor(ctx, ledger.AccountCustomerCredit, dev.AccountID)
	clearing, _ := e.ledger.AccountFor(ctx, ledger.AccountStripeClearing, "")
	owed := money.Pico(4321)*money.PicoPerCent + 7 // $43.21 and 7 picodollars
	if _, _, err := e.ledger.Post(ctx, ledger.TransactionInput{Kind: ledger.TransactionUsage, IdempotencyKey: "web-usage-1",
		Postings: []ledger.Posting{{Account: credit, Amount: -owed}, {Account: payable, Amount: owed}}}); err != nil {
		t.Fatal(err)
	}
	clearingBefore, _ := e.ledger.Balance(ctx, clearing)
	st := webStatement{id: "st-web-1", provider: fjord.AccountID, cents: 4000}
	book.byID[st.id] = st
	failed, err := e.payouts.Pay(ctx, st)
	if services.ErrorCode(err) != services.CodeConflict || failed.Status != payouts.StatusFailed {
		t.Fatalf("pay without an account: %+v, %v", failed, err)
	}

	fin, csrf := loginBrowser(t, e, "finance@example.com")
	doc := getPage(t, fin, e.srv.URL+"/finance/payouts?status=failed")
	row := doc.Find(`[data-payout="` + failed.ID + `"]`)
	if row.Length() != 1 || row.AttrOr("data-status", "") != "failed" || row.Find(testID("payout-amount")).Text() != "$40.00" ||
		strings.TrimSpace(row.Find(testID("payout-attempts")).Text()) != "1" ||
		!strings.Contains(row.Find(testID("payout-error")).Text(), "no Stripe account") || row.Find(testID("retry")).Length() != 1 ||
		!strings.Contains(row.Text(), "Fjord GPU Co-op") {
		t.Fatalf("failed payout row: %q", row.Text())
	}

	// The first POST says what a retry sends and sends nothing.
	retryURL := e.srv.URL + "/finance/payouts/" + failed.ID + "/retry"
	ask := askedToConfirm(t, fin, retryURL, url.Values{"_csrf": {csrf}})
	if c, b := consequences(ask), text(ask.Find(testID("confirm"))); !strings.Contains(c, "Stripe transfer of $40.00 to Fjord GPU Co-op") ||
		b != "Pay $40.00 to Fjord GPU Co-op through Stripe" {
		t.Errorf("the retry's confirmation says %q, button %q", c, b)
	}
	if p, _ := e.payouts.Get(ctx, failed.ID); p.Attempts != 1 {
		t.Fatalf("the first POST attempted the payout: %d attempts", p.Attempts)
	}
	// Retried before the provider onboarded: still failed, and the list says why.
	res := confirmation(t, fin, e.srv.URL, ask)
	wantStatus(t, res, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); loc != "/finance/payouts?flash=payout-not-paid" {
		t.Fatalf("after a retry that failed: %q", loc)
	}

	a, _, err := e.payouts.Connect(ctx, payouts.ConnectInput{ProviderAccountID: fjord.AccountID, Email: fjord.Email, Country: "NO",
		RefreshURL: e.srv.URL + "/provider/payouts/onboarding", ReturnURL: e.srv.URL + "/provider/payouts/return"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.payouts.Observe(ctx, payouts.AccountState{ID: a.StripeAccountID, DetailsSubmitted: true, PayoutsEnabled: true}, time.Now()); err != nil {
		t.Fatal(err)
	}
	// A confirmation from before the failed attempt no longer matches: asked again.
	if stale := confirmation(t, fin, e.srv.URL, ask); stale.StatusCode != http.StatusConflict {
		t.Fatalf("an earlier retry's confirmation: status %d, want 409", stale.StatusCode)
	}
	ask = askedToConfirm(t, fin, retryURL, url.Values{"_csrf": {csrf}})
	res = confirmation(t, fin, e.srv.URL, ask)
	wantStatus(t, res, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); loc != "/finance/payouts?flash=payout-paid" {
		t.Fatalf("after the retry: %q", loc)
	}
	if again := confirmation(t, fin, e.srv.URL, ask); again.StatusCode != http.StatusConflict {
		t.Fatalf("the paid retry's confirmation again: status %d, want 409", again.StatusCode)
	}
	doc = getPage(t, fin, e.srv.URL+"/finance/payouts")
	row = doc.Find(`[data-payout="` + failed.ID + `"]`)
	if row.AttrOr("data-status", "") != "paid" || strings.TrimSpace(row.Find(testID("payout-attempts")).Text()) != "3" ||
		row.Find(testID("retry")).Length() != 0 || !strings.Contains(row.Text(), "tr_") {
		t.Fatalf("paid payout row: %q", row.Text())
	}
	if book.paid[st.id] != failed.ID {
		t.Fatalf("invoicing told %v", book.paid)
	}
	if got, _ := e.ledger.Balance(ctx, payable); !got.Equal(owed - 4000*money.PicoPerCent) {
		t.Fatalf("payable = %s, want $3.21 and 7 picodollars", got)
	}
	if got, _ := e.ledger.Balance(ctx, clearing); !got.Equal(mustPico(t, clearingBefore) + 4000*money.PicoPerCent) {
		t.Fatalf("clearing = %s, want %s + $40", got, clearingBefore)
	}

	financeToken := e.token(t, "finance@example.com", demo.Password)
	var list struct {
		Payouts []payoutJSON `json:"payouts"`
		Count   int          `json:"count"`
	}
	wantStatus(t, e.call(t, financeToken, http.MethodGet, "/api/finance/payouts?status=paid", nil, &list), http.StatusOK)
	if list.Count != 1 || list.Payouts[0].ID != failed.ID || list.Payouts[0].AmountCents != 4000 || list.Payouts[0].Attempts != 3 ||
		len(list.Payouts[0].Actions) != 0 || list.Payouts[0].ProviderName != "Fjord GPU Co-op" {
		t.Fatalf("finance JSON = %+v", list)
	}
	var bad apiErrorJSON
	wantStatus(t, e.call(t, financeToken, http.MethodGet, "/api/finance/payouts?status=lost", nil, &bad), http.StatusUnprocessableEntity)
	var again payoutJSON
	wantStatus(t, e.call(t, financeToken, http.MethodPost, "/api/finance/payouts/"+failed.ID+"/retry", nil, &again), http.StatusOK)
	if again.Status != "paid" || again.Attempts != 3 {
		t.Fatalf("retrying a paid payout through the API: %+v", again)
	}

	var mine providerPayoutsJSON
	wantStatus(t, e.call(t, e.token(t, "provider@example.com", demo.Password), http.MethodGet, "/api/provider/payouts", nil, &mine), http.StatusOK)
	if mine.Count != 1 || mine.Payouts[0].Status != "paid" || mine.Payouts[0].AmountCents != 4000 {
		t.Fatalf("the provider's payouts = %+v", mine)
	}
	pb, _ := loginBrowser(t, e, "provider@example.com")
	doc = getPage(t, pb, e.srv.URL+"/provider/payouts")
	if doc.Find(testID("payout")).AttrOr("data-status", "") != "paid" || doc.Find(testID("payout-amount")).Text() != "$40.00" {
		t.Fatalf("the provider's payouts page: %q", doc.Find(testID("payouts")).Text())
	}
	wantStatus(t, e.call(t, e.token(t, "northwind@example.com", demo.Password), http.MethodGet, "/api/provider/payouts", nil, &mine), http.StatusOK)
	if mine.Count != 0 {
		t.Fatalf("another provider sees %+v", mine)
	}
}

func mustPico(t *testing.T, b money.BigPico) money.Pico {
	t.Helper()
	p, err := b.Pico()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// With real payments, the connect form redirects only to an origin the pages' CSP lets forms
// reach: a link elsewhere is refused with a plain message (the browser would silently refuse
// it), and one on an allowed origin is followed.
func TestConnectRedirectsOnlyWhereTheCSPAllows(t *testing.T) {
	t.Parallel()
	live := func(origins []string) func(*web.Config, *pgxpool.Pool) {
		return func(cfg *web.Config, _ *pgxpool.Pool) {
			cfg.Payments.LocalWebhookSecret = ""
			cfg.Payments.CheckoutOrigins = origins
		}
	}
	e := setupWith(t, live([]string{credits.StripeCheckoutOrigin, payouts.StripeConnectOrigin}))
	b, csrf := loginBrowser(t, e, "provider@example.com")
	res, err := b.PostForm(e.srv.URL+"/provider/payouts/connect", url.Values{"country": {"NO"}, "_csrf": {csrf}})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := goqueryFrom(res)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(doc.Find(testID("form-error")).Text(), "cannot be opened from here") {
		t.Fatalf("a link on stripe-mock's origin: status %d, %q", res.StatusCode, doc.Find(testID("form-error")).Text())
	}
	fjord, _ := e.accounts.UserByEmail(context.Background(), "provider@example.com")
	link, err := e.payouts.OnboardingLink(context.Background(), fjord.AccountID, e.srv.URL+"/r", e.srv.URL+"/b")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(link.URL)

	e2 := setupWith(t, live([]string{u.Scheme + "://" + u.Host}))
	b2, csrf2 := loginBrowser(t, e2, "provider@example.com")
	res = postForm(t, b2, e2.srv.URL+"/provider/payouts/connect", url.Values{"country": {"NO"}, "_csrf": {csrf2}})
	wantStatus(t, res, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); !strings.HasPrefix(loc, u.Scheme+"://"+u.Host+"/") {
		t.Fatalf("connect redirects to %q, want Stripe's onboarding on %s", loc, u.Host)
	}
}
