package credits

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/gpumarket/gpumarket/services/credits/stripemock/stripemocktest"

	"github.com/gpumarket/gpumarket/services/credits/stripemock"
)

var (
	stripeMock stripemocktest.Shared
)

// stripeMockURL starts one stripe-mock for the package's tests, on first use; TestMain
// stops it.
func stripeMockURL(t *testing.T) string { return stripeMock.URL(t) }

func TestMain(m *testing.M) {
	code := m.Run()
	stripeMock.Stop()
	os.Exit(code)
}

// recordingStripe forwards to stripe-mock and keeps what the platform asked for, so that a
// test sees both stripe-mock's answer and the parameters it was given.
func recordingStripe(t *testing.T) (apiURL string, requests func() []stripemock.Request) {
	t.Helper()
	proxy, err := stripemock.Proxy(stripeMockURL(t))
	if err != nil {
		t.Fatal(err)
	}
	rec := stripemock.Record(proxy)
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	return srv.URL, rec.Requests
}

// TestStartCreatesCheckoutSessionOnStripeMock buys credits through the real stripe-mock: the
// purchase is recorded as pending with the session stripe-mock created, the session is a
// one-off payment of exactly the amount for the buying account, keyed for idempotency by the
// purchase; and the session's paid completion credits it.
func TestStartCreatesCheckoutSessionOnStripeMock(t *testing.T) {
	t.Parallel()
	apiURL, requests := recordingStripe(t)
	s := setupShop(t, NewStripeCheckout("sk_test_billing", apiURL))
	ctx := context.Background()

	p, sess, err := s.credits.Start(ctx, StartInput{AccountID: s.org, UserID: s.user, AmountCents: 2050,
		ReturnURL: "https://gpumarket.test/credits/return", CancelURL: "https://gpumarket.test/credits"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sess.ID, "cs_test_") || !strings.HasPrefix(sess.URL, "https://") {
		t.Fatalf("session = %+v, want stripe-mock's", sess)
	}
	if p.Status != PurchasePending || p.StripeSessionID != sess.ID || p.AccountID != s.org || p.AmountCents != 2050 ||
		p.RefundedCents != 0 || !p.CreatedAt.Equal(testNow) {
		t.Fatalf("purchase = %+v", p)
	}
	if row := purchaseRow(t, s.pool, p.ID); row.Status != PurchasePending || row.SessionID != sess.ID || row.CreatedBy != s.user {
		t.Fatalf("stored purchase = %+v", row)
	}

	sent := requests()
	if len(sent) != 1 {
		t.Fatalf("%d requests to Stripe, want 1: %+v", len(sent), sent)
	}
	r := sent[0]
	for key, want := range map[string]string{
		"mode":                                       "payment",
		"client_reference_id":                        s.org,
		"success_url":                                "https://gpumarket.test/credits/return?purchase=" + p.ID,
		"cancel_url":                                 "https://gpumarket.test/credits",
		"line_items[0][quantity]":                    "1",
		"line_items[0][price_data][currency]":        "usd",
		"line_items[0][price_data][unit_amount]":     "2050",
		"metadata[purchase_id]":                      p.ID,
		"metadata[account_id]":                       s.org,
		"payment_intent_data[metadata][purchase_id]": p.ID,
	} {
		if got := r.Form.Get(key); got != want {
			t.Errorf("%s = %q, want %q", key, got, want)
		}
	}
	if r.Method != http.MethodPost || r.Path != "/v1/checkout/sessions" || r.IdempotencyKey != "checkout-"+p.ID {
		t.Fatalf("request = %s %s, idempotency key %q", r.Method, r.Path, r.IdempotencyKey)
	}

	// A second purchase gets a session of its own.
	q := s.buy(t, 500)
	if q.StripeSessionID == "" || q.StripeSessionID == p.StripeSessionID {
		t.Fatalf("second session %q, first %q: want two", q.StripeSessionID, p.StripeSessionID)
	}

	if got := deliver(t, s.webhook, CheckoutEvent("evt_mock_paid", "checkout.session.completed", p, "paid", "pi_mock_1", testNow)); got != "credited $20.50" {
		t.Fatalf("outcome %q", got)
	}
	s.wantCredit(t, s.org, cents(2050))
	if row := purchaseRow(t, s.pool, p.ID); row.Status != PurchasePaid || row.PaymentIntent != "pi_mock_1" {
		t.Fatalf("paid purchase = %+v", row)
	}
}
