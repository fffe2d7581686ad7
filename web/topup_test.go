package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/demo"
)

// postedPage posts a page form that must answer with the status and reads the page.
func postedPage(t *testing.T, b *http.Client, pageURL string, form url.Values, want int) *goquery.Document {
	t.Helper()
	res, body := postPage(t, b, pageURL, form)
	wantStatus(t, res, want)
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// A developer saves a card on the credits page (the local test page in test mode), turns auto
// top-up on, sees the charge wait for Stripe's word, and sees why auto top-up stopped when the
// card is declined; the JSON says the same.
func TestAutoTopupPageFlow(t *testing.T) {
	t.Parallel()
	e := setup(t)
	b, csrf := loginBrowser(t, e, "developer@example.com")
	doc := getPage(t, b, e.srv.URL+"/credits")
	if doc.Find(`[data-testid="auto-topup"] [data-testid="no-card"]`).Length() != 1 {
		t.Fatal("the credits page shows no auto top-up section without a card")
	}
	if _, disabled := doc.Find(`[data-testid="topup-enabled"]`).Attr("disabled"); !disabled {
		t.Error("auto top-up can be ticked without a card")
	}

	doc = postedPage(t, b, e.srv.URL+"/credits/auto-topup", url.Values{"topup_enabled": {"on"},
		"topup_threshold_usd": {"10"}, "topup_amount_usd": {"20"}, "_csrf": {csrf}}, http.StatusUnprocessableEntity)
	if got := doc.Find(`[data-testid="topup-error"]`).Text(); !strings.Contains(got, "Save a card first") {
		t.Errorf("turning on without a card: %q", got)
	}

	res := postForm(t, b, e.srv.URL+"/credits/card", url.Values{"_csrf": {csrf}})
	wantStatus(t, res, http.StatusSeeOther)
	page := res.Header.Get("Location")
	if !strings.Contains(page, "/credits/test-card?session=cs_test_") {
		t.Fatalf("save card sent the browser to %q, want the local test page with stripe-mock's session", page)
	}
	if getPage(t, b, page).Find(`[data-testid="test-save-card"]`).Length() != 1 {
		t.Fatal("the test card page is not marked as a test")
	}
	wantStatus(t, postForm(t, b, e.srv.URL+"/credits/test-card", url.Values{"_csrf": {csrf}}), http.StatusSeeOther)
	doc = getPage(t, b, e.srv.URL+"/credits")
	if got := doc.Find(`[data-testid="card"]`).Text(); got != "Visa ending 4242" {
		t.Fatalf("saved card %q", got)
	}

	doc = postedPage(t, b, e.srv.URL+"/credits/auto-topup", url.Values{"topup_enabled": {"on"},
		"topup_threshold_usd": {"ten"}, "topup_amount_usd": {"2"}, "_csrf": {csrf}}, http.StatusUnprocessableEntity)
	for _, f := range []string{"topup_threshold_usd", "topup_amount_usd"} {
		if doc.Find(`[data-testid="error-`+f+`"]`).Length() != 1 {
			t.Errorf("no error beside %s", f)
		}
	}
	if v, _ := doc.Find(`#topup_threshold_usd`).Attr("value"); v != "ten" {
		t.Errorf("the form lost what was typed: %q", v)
	}
	// The demo developer's balance is below $10,000: the next round charges.
	wantStatus(t, postForm(t, b, e.srv.URL+"/credits/auto-topup", url.Values{"topup_enabled": {"on"},
		"topup_threshold_usd": {"10000"}, "topup_amount_usd": {"25"}, "_csrf": {csrf}}), http.StatusSeeOther)
	if err := e.topups.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	doc = getPage(t, b, e.srv.URL+"/credits")
	if _, on := doc.Find(`[data-testid="topup-enabled"]`).Attr("checked"); !on {
		t.Error("auto top-up is not shown on")
	}
	if got := doc.Find(`[data-testid="topup-pending"]`).Text(); !strings.Contains(got, "$25.00") {
		t.Errorf("pending top-up: %q", got)
	}

	token := e.token(t, "developer@example.com", demo.Password)
	var set credits.TopupSettings
	wantStatus(t, e.call(t, token, http.MethodGet, "/api/credits/auto-topup", nil, &set), http.StatusOK)
	if !set.Enabled || set.ThresholdCents != 1_000_000 || set.AmountCents != 2500 || set.Card == nil || set.Pending == nil ||
		set.Pending.StripePaymentIntent == "" {
		t.Fatalf("JSON settings = %+v", set)
	}
	customer, err := e.topups.Customer(context.Background(), accountOf(t, e, "developer@example.com"))
	if err != nil {
		t.Fatal(err)
	}
	failed := credits.TopupIntentEvent("evt_page_declined", "payment_intent.payment_failed", credits.TopupCharge{
		AttemptID: set.Pending.ID, AccountID: accountOf(t, e, "developer@example.com"), CustomerID: customer,
		PaymentIntentID: set.Pending.StripePaymentIntent, AmountCents: 2500}, "insufficient_funds", time.Now())
	wantStatus(t, e.postWebhook(t, failed, credits.SignEvent(failed, webhookSecret, time.Now())), http.StatusOK)
	doc = getPage(t, b, e.srv.URL+"/credits")
	if got := doc.Find(`[data-testid="topup-stopped"]`).Text(); !strings.Contains(got, "insufficient funds") {
		t.Errorf("stopped reason on the page: %q", got)
	}
	if _, on := doc.Find(`[data-testid="topup-enabled"]`).Attr("checked"); on {
		t.Error("auto top-up is still shown on after the decline")
	}

	// The JSON changes it too, and removing the card turns it off.
	var put credits.TopupSettings
	wantStatus(t, e.call(t, token, http.MethodPut, "/api/credits/auto-topup",
		map[string]any{"enabled": true, "threshold_usd": "5", "amount_usd": 30}, &put), http.StatusOK)
	if !put.Enabled || put.ThresholdCents != 500 || put.AmountCents != 3000 || put.StoppedReason != "" {
		t.Fatalf("PUT = %+v", put)
	}
	wantStatus(t, postForm(t, b, e.srv.URL+"/credits/card/remove", url.Values{"_csrf": {csrf}}), http.StatusSeeOther)
	wantStatus(t, e.call(t, token, http.MethodGet, "/api/credits/auto-topup", nil, &set), http.StatusOK)
	if set.Enabled || set.Card != nil {
		t.Fatalf("after removing the card = %+v", set)
	}
}

func accountOf(t *testing.T, e *env, email string) string {
	t.Helper()
	u, err := e.accounts.UserByEmail(context.Background(), email)
	if err != nil {
		t.Fatal(err)
	}
	return u.AccountID
}
