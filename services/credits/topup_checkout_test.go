package credits

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// setupIntents stands in for Stripe's GET /v1/setup_intents/{id}, which stripe-mock answers with
// a fixture that saved no card: it answers the SetupIntent a Checkout Session in setup mode made
// as Stripe does once the customer saved a card, and passes everything else to stripe-mock.
type setupIntents struct {
	mu   sync.Mutex
	byID map[string]map[string]any
}

func (f *setupIntents) set(id, status, customer, paymentMethod string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.byID[id] = map[string]any{"id": id, "object": "setup_intent", "status": status, "customer": customer,
		"payment_method": paymentMethod, "usage": "off_session", "livemode": false}
}

func (f *setupIntents) front(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := strings.CutPrefix(r.URL.Path, "/v1/setup_intents/")
		f.mu.Lock()
		si, known := f.byID[id]
		f.mu.Unlock()
		if r.Method == http.MethodGet && ok && known {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(si)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// checkoutSetupCompleted is Stripe's checkout.session.completed for a session in setup mode, as
// real Stripe sends it: the SetupIntent named by its id only.
func checkoutSetupCompleted(eventID, sessionID, accountID, customer, setupIntent string) []byte {
	return stripeEvent(eventID, "checkout.session.completed", map[string]any{
		"id": sessionID, "object": "checkout.session", "mode": "setup", "status": "complete",
		"payment_status": "no_payment_required", "customer": customer, "setup_intent": setupIntent,
		"client_reference_id": accountID, "amount_total": nil, "currency": nil, "payment_intent": nil,
		"metadata": map[string]string{"account_id": accountID, "purpose": "auto_topup"},
	})
}

// TestAutoTopupCardSavedByCheckoutSession: the customer saves a card on Stripe Checkout in setup
// mode; Stripe's signed checkout.session.completed saves it, the card read from the session's
// SetupIntent through the Stripe API, with no setup_intent.succeeded. Auto top-up then charges
// that card. A session on another customer, or whose SetupIntent did not succeed, saves nothing.
func TestAutoTopupCardSavedByCheckoutSession(t *testing.T) {
	t.Parallel()
	intents := &setupIntents{byID: map[string]map[string]any{}}
	s := setupTopup(t, intents.front)
	ctx := context.Background()
	page, err := s.topup.StartSaveCard(ctx, SaveCardInput{AccountID: s.org, ReturnURL: "https://gpumarket.test/credits",
		CancelURL: "https://gpumarket.test/credits", RandomPart: "checkout"})
	if err != nil {
		t.Fatal(err)
	}
	var created url.Values
	for _, r := range s.stripe.Requests() {
		if r.Method == http.MethodPost && r.Path == "/v1/checkout/sessions" {
			created = r.Form
		}
	}
	if created.Get("mode") != "setup" || created.Get("metadata[purpose]") != "auto_topup" || created.Get("metadata[account_id]") != s.org {
		t.Fatalf("the Checkout Session was created with %v; want setup mode and the account in its metadata", created)
	}
	customer, _ := s.topup.Customer(ctx, s.org)

	// A SetupIntent that has not succeeded, then one on another customer: nothing is saved.
	intents.set("seti_pending", "requires_payment_method", customer, "")
	got := deliver(t, s.webhook, checkoutSetupCompleted("evt_cs_pending", page.ID, s.org, customer, "seti_pending"))
	if !strings.HasPrefix(got, "not saved") {
		t.Fatalf("a SetupIntent that did not succeed: outcome %q", got)
	}
	intents.set("seti_other", "succeeded", "cus_someone_else", "pm_card_mastercard")
	got = deliver(t, s.webhook, checkoutSetupCompleted("evt_cs_other", page.ID, s.org, customer, "seti_other"))
	if !strings.HasPrefix(got, "not saved") {
		t.Fatalf("a SetupIntent on another customer: outcome %q", got)
	}
	if set, _ := s.topup.Settings(ctx, s.org); set.Card != nil {
		t.Fatalf("a card was saved: %+v", set.Card)
	}

	// The customer's card.
	intents.set("seti_saved", "succeeded", customer, "pm_card_visa")
	if got := deliver(t, s.webhook, checkoutSetupCompleted("evt_cs_saved", page.ID, s.org, customer, "seti_saved")); got != "card saved" {
		t.Fatalf("checkout.session.completed in setup mode: outcome %q", got)
	}
	if n := s.stripe.Count(http.MethodGet, "/v1/setup_intents/seti_saved"); n != 1 {
		t.Fatalf("the SetupIntent was read %d times, want once", n)
	}
	set, err := s.topup.Settings(ctx, s.org)
	if err != nil || set.Card == nil || set.Card.PaymentMethodID != "pm_card_visa" || set.Card.Brand != "visa" || set.Card.Last4 != "4242" {
		t.Fatalf("settings after the session = %+v (card %+v), %v", set, set.Card, err)
	}
	// A purchase's session is untouched by this path: a setup session names no purchase.
	var purchases int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM credit_purchases`).Scan(&purchases); err != nil || purchases != 0 {
		t.Fatalf("%d purchases, %v", purchases, err)
	}

	// The saved card is the one auto top-up charges.
	s.enable(t)
	s.move(t, 300)
	s.runOnce(t)
	var charged url.Values
	for _, r := range s.stripe.Requests() {
		if r.Method == http.MethodPost && r.Path == "/v1/payment_intents" {
			charged = r.Form
		}
	}
	if charged.Get("payment_method") != "pm_card_visa" || charged.Get("customer") != customer {
		t.Fatalf("the top-up charged %v", charged)
	}
}
