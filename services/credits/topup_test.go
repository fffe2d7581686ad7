package credits

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/credits/stripemock"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/mail"
)

// recordedAlerts keeps the e-mails and events a failed top-up raised, as the mail queue and the
// event log would in the same transaction.
type recordedAlerts struct {
	mu     sync.Mutex
	mails  []mail.Message
	events []recordedEvent
}

type recordedEvent struct {
	AccountID, Type, ID string
	Data                any
}

func (r *recordedAlerts) Enqueue(_ context.Context, tx pgx.Tx, m mail.Message) error {
	if tx == nil {
		panic("Enqueue outside a transaction")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mails = append(r.mails, m)
	return nil
}

func (r *recordedAlerts) Emit(_ context.Context, tx pgx.Tx, accountID, eventType, eventID string, data any) error {
	if tx == nil {
		panic("Emit outside a transaction")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, recordedEvent{accountID, eventType, eventID, data})
	return nil
}

func (r *recordedAlerts) counts() (int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.mails), len(r.events)
}

var (
	_ MailQueue    = (*recordedAlerts)(nil)
	_ EventEmitter = (*recordedAlerts)(nil)
)

// topupShop is a shop with auto top-up on stripe-mock, behind a recorder that counts every
// request that reaches the Stripe API.
type topupShop struct {
	shop
	topup  *AutoTopup
	cards  Cards
	stripe *stripemock.Recorder
	alerts *recordedAlerts
}

// setupTopup builds the shop; front, when set, answers some Stripe requests itself (a
// decline) before the rest go to stripe-mock.
func setupTopup(t *testing.T, front func(next http.Handler) http.Handler) topupShop {
	t.Helper()
	proxy, err := stripemock.Proxy(stripeMockURL(t))
	if err != nil {
		t.Fatal(err)
	}
	var next http.Handler = proxy
	if front != nil {
		next = front(proxy)
	}
	rec := stripemock.Record(next)
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	s := setupShop(t, nil)
	alerts := &recordedAlerts{}
	cards := NewStripeCards(NewStripeAPI("sk_test_topup", srv.URL))
	ts := topupShop{shop: s, cards: cards, stripe: rec, alerts: alerts}
	ts.topup = ts.newTopup()
	s.webhook.WithAutoTopup(ts.topup)
	return ts
}

// newTopup is another worker on the same database and Stripe: another process.
func (s topupShop) newTopup() *AutoTopup {
	return NewAutoTopup(TopupConfig{Pool: s.pool, Ledger: s.ledger, Cards: s.cards, Now: s.clock.Now,
		Mail: s.alerts, Events: s.alerts})
}

func (s topupShop) intents() int { return s.stripe.Count(http.MethodPost, "/v1/payment_intents") }

// saveCard saves a card as a customer does: the setup page on stripe-mock, then Stripe's signed
// setup_intent.succeeded.
func (s topupShop) saveCard(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	sess, err := s.topup.StartSaveCard(ctx, SaveCardInput{AccountID: s.org, ReturnURL: "https://gpumarket.test/credits",
		CancelURL: "https://gpumarket.test/credits", RandomPart: "1"})
	if err != nil || !strings.HasPrefix(sess.ID, "cs_test_") {
		t.Fatalf("StartSaveCard = %+v, %v", sess, err)
	}
	customer, err := s.topup.Customer(ctx, s.org)
	if err != nil || !strings.HasPrefix(customer, "cus_") {
		t.Fatalf("customer %q, %v", customer, err)
	}
	if got := deliver(t, s.webhook, SetupSucceededEvent("evt_setup_"+s.org[:8], s.org, customer, "pm_card_visa", testNow)); got != "card saved" {
		t.Fatalf("setup_intent.succeeded: outcome %q", got)
	}
}

// enable turns auto top-up on: below $10, add $20.
func (s topupShop) enable(t *testing.T) {
	t.Helper()
	got, err := s.topup.Save(context.Background(), SettingsInput{AccountID: s.org, Email: "dev@acme.test", Enabled: true,
		ThresholdCents: 1000, AmountCents: 2000})
	if err != nil || !got.Enabled {
		t.Fatalf("Save = %+v, %v", got, err)
	}
}

// move moves the account's balance by hand (as usage would).
func (s topupShop) move(t *testing.T, c int64) {
	t.Helper()
	if _, err := s.credits.Adjust(context.Background(), AdjustInput{AccountID: s.org, Amount: cents(c), Reason: "usage", ByUserID: s.user}); err != nil {
		t.Fatal(err)
	}
}

func (s topupShop) runOnce(t *testing.T) {
	t.Helper()
	if err := s.topup.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// attempts lists the account's attempts, newest first.
func (s topupShop) attempts(t *testing.T) []TopupAttempt {
	t.Helper()
	a, err := s.topup.Attempts(context.Background(), s.org, 100)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (s topupShop) charge(a TopupAttempt) TopupCharge {
	customer, _ := s.topup.Customer(context.Background(), s.org)
	return TopupCharge{AttemptID: a.ID, AccountID: s.org, CustomerID: customer, PaymentIntentID: a.StripePaymentIntent, AmountCents: a.AmountCents}
}

// TestAutoTopupSucceeds: the balance falls below $10; one off-session PaymentIntent of $20 on
// the saved card, keyed by its attempt; the webhook delivered twice credits exactly $20 once;
// the next crossing charges again.
func TestAutoTopupSucceeds(t *testing.T) {
	t.Parallel()
	s := setupTopup(t, nil)
	s.saveCard(t)
	set, err := s.topup.Settings(context.Background(), s.org)
	if err != nil || set.Card == nil || set.Card.Brand != "visa" || set.Card.Last4 != "4242" || set.Card.PaymentMethodID != "pm_card_visa" {
		t.Fatalf("settings after saving = %+v (card %+v), %v", set, set.Card, err)
	}
	s.enable(t)
	s.move(t, 1500)
	s.runOnce(t) // $15: above the threshold
	if n := s.intents(); n != 0 {
		t.Fatalf("%d charges above the threshold", n)
	}
	s.move(t, -1200) // $3
	s.runOnce(t)
	s.runOnce(t)
	if n := s.intents(); n != 1 {
		t.Fatalf("%d charges for one crossing, want 1", n)
	}
	att := s.attempts(t)
	if len(att) != 1 || att[0].Status != AttemptPending || att[0].AmountCents != 2000 || att[0].StripePaymentIntent == "" {
		t.Fatalf("attempts = %+v", att)
	}
	var sent stripemock.Request
	for _, r := range s.stripe.Requests() {
		if r.Path == "/v1/payment_intents" {
			sent = r
		}
	}
	customer, _ := s.topup.Customer(context.Background(), s.org)
	for key, want := range map[string]string{"amount": "2000", "currency": "usd", "off_session": "true", "confirm": "true",
		"customer": customer, "payment_method": "pm_card_visa", "metadata[topup_attempt_id]": att[0].ID} {
		if got := sent.Form.Get(key); got != want {
			t.Errorf("%s = %q, want %q", key, got, want)
		}
	}
	if sent.IdempotencyKey != ChargeKey(att[0].ID) {
		t.Fatalf("idempotency key %q, want %q", sent.IdempotencyKey, ChargeKey(att[0].ID))
	}
	s.wantCredit(t, s.org, cents(300)) // the answer alone credits nothing

	ev := TopupIntentEvent("evt_topup_ok", "payment_intent.succeeded", s.charge(att[0]), "", testNow)
	if got := deliver(t, s.webhook, ev); got != "credited $20.00 (auto top-up)" {
		t.Fatalf("outcome %q", got)
	}
	if got := deliver(t, s.webhook, ev); got != "already credited" {
		t.Fatalf("second delivery: outcome %q", got)
	}
	s.wantCredit(t, s.org, cents(2300))
	wantBalance(t, s.ledger, s.clearing, -cents(2000))
	if n := countTransactions(t, s.pool, ledger.TransactionPurchase); n != 1 {
		t.Fatalf("%d purchase transactions, want 1", n)
	}
	s.runOnce(t)
	if n := s.intents(); n != 1 {
		t.Fatalf("%d charges after the credit, want 1", n)
	}
	// The next crossing is a new one.
	s.move(t, -2000) // $3
	s.runOnce(t)
	if n := s.intents(); n != 2 {
		t.Fatalf("%d charges after a second crossing, want 2", n)
	}
	checkInvariants(t, s.pool)
}

// TestAutoTopupDeclinedByWebhook: Stripe's payment_intent.payment_failed stops auto top-up with
// the reason, raises one alert in the transaction, credits nothing, and no charge follows.
func TestAutoTopupDeclinedByWebhook(t *testing.T) {
	t.Parallel()
	s := setupTopup(t, nil)
	s.saveCard(t)
	s.enable(t)
	s.move(t, 300)
	s.runOnce(t)
	att := s.attempts(t)
	if len(att) != 1 || att[0].Status != AttemptPending {
		t.Fatalf("attempts = %+v", att)
	}
	ev := TopupIntentEvent("evt_topup_declined", "payment_intent.payment_failed", s.charge(att[0]), "insufficient_funds", testNow)
	if got := deliver(t, s.webhook, ev); !strings.Contains(got, "top-up failed") || !strings.Contains(got, "insufficient funds") {
		t.Fatalf("outcome %q", got)
	}
	deliver(t, s.webhook, ev)
	s.wantStopped(t, att[0].ID, "insufficient funds")
	s.runOnce(t)
	if n := s.intents(); n != 1 {
		t.Fatalf("%d charges after a decline, want 1", n)
	}
	s.wantCredit(t, s.org, cents(300))
	if n := countTransactions(t, s.pool, ledger.TransactionPurchase); n != 0 {
		t.Fatalf("%d purchase transactions after a decline", n)
	}
}

// wantStopped checks that the attempt failed, auto top-up is off with the reason, and one
// e-mail and one topup.failed event were raised for it.
func (s topupShop) wantStopped(t *testing.T, attemptID, reason string) {
	t.Helper()
	set, err := s.topup.Settings(context.Background(), s.org)
	if err != nil || set.Enabled || !strings.Contains(set.StoppedReason, reason) || set.StoppedAt == nil || set.Pending != nil {
		t.Fatalf("settings after the decline = %+v, %v", set, err)
	}
	att := s.attempts(t)
	if att[0].ID != attemptID || att[0].Status != AttemptFailed || !strings.Contains(att[0].Failure, reason) {
		t.Fatalf("attempt = %+v", att[0])
	}
	if m, e := s.alerts.counts(); m != 1 || e != 1 {
		t.Fatalf("%d e-mails and %d events, want one each", m, e)
	}
	m, e := s.alerts.mails[0], s.alerts.events[0]
	if m.Key != "topup-failed:"+attemptID || len(m.To) != 1 || m.To[0] != "dev@acme.test" || !strings.Contains(m.Text, reason) {
		t.Fatalf("e-mail = %+v", m)
	}
	if e.AccountID != s.org || e.Type != TopupEventFailed || e.ID != attemptID {
		t.Fatalf("event = %+v", e)
	}
}

// stripeCardDeclined is Stripe's answer to a confirmed PaymentIntent the card declined: HTTP
// 402 and a card_error, as the API sends it.
const stripeCardDeclined = `{
  "error": {
    "charge": "ch_3Declined",
    "code": "card_declined",
    "decline_code": "insufficient_funds",
    "doc_url": "https://stripe.com/docs/error-codes/card-declined",
    "message": "Your card has insufficient funds.",
    "payment_intent": {"id": "pi_3Declined", "object": "payment_intent", "amount": 2000, "currency": "usd",
      "status": "requires_payment_method", "last_payment_error": {"code": "card_declined", "decline_code": "insufficient_funds", "type": "card_error"}},
    "request_log_url": "https://dashboard.stripe.com/test/logs/req_declined",
    "type": "card_error"
  }
}`

// TestAutoTopupDeclinedAtOnce: the API call itself answers 402 card_declined: the attempt
// fails at once, auto top-up stops with the reason and the alert, nothing is credited.
func TestAutoTopupDeclinedAtOnce(t *testing.T) {
	t.Parallel()
	s := setupTopup(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && r.URL.Path == "/v1/payment_intents" {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusPaymentRequired)
				_, _ = w.Write([]byte(stripeCardDeclined))
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	s.saveCard(t)
	s.enable(t)
	s.move(t, 300)
	if err := s.topup.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	att := s.attempts(t)
	if len(att) != 1 || att[0].StripePaymentIntent != "pi_3Declined" {
		t.Fatalf("attempts = %+v", att)
	}
	s.wantStopped(t, att[0].ID, "insufficient funds")
	s.runOnce(t)
	if n := s.intents(); n != 1 {
		t.Fatalf("%d charges, want 1", n)
	}
	s.wantCredit(t, s.org, cents(300))
}

// TestAutoTopupRacesManualPurchase: the balance is below $10 and a top-up is pending when a
// purchase by hand lands, first leaving the balance below, then lifting it above: one charge
// for the crossing, and the ledger has both credits once.
func TestAutoTopupRacesManualPurchase(t *testing.T) {
	t.Parallel()
	s := setupTopup(t, nil)
	s.saveCard(t)
	s.enable(t)
	s.move(t, 300)
	s.runOnce(t)

	small := s.buy(t, 500)
	deliver(t, s.webhook, CheckoutEvent("evt_race_small", "checkout.session.completed", small, "paid", "pi_race_small", testNow))
	s.wantCredit(t, s.org, cents(800)) // still below $10
	s.runOnce(t)
	big := s.buy(t, 2000)
	deliver(t, s.webhook, CheckoutEvent("evt_race_big", "checkout.session.completed", big, "paid", "pi_race_big", testNow))
	s.runOnce(t)
	if n := s.intents(); n != 1 {
		t.Fatalf("%d charges for one crossing, want 1", n)
	}
	att := s.attempts(t)
	deliver(t, s.webhook, TopupIntentEvent("evt_race_topup", "payment_intent.succeeded", s.charge(att[0]), "", testNow))
	s.wantCredit(t, s.org, cents(300+500+2000+2000))
	wantBalance(t, s.ledger, s.clearing, -cents(500+2000+2000))
	if n := countTransactions(t, s.pool, ledger.TransactionPurchase); n != 3 {
		t.Fatalf("%d purchase transactions, want 3", n)
	}
	s.runOnce(t)
	if n := s.intents(); n != 1 {
		t.Fatalf("%d charges, want 1", n)
	}
	checkInvariants(t, s.pool)
}

// TestAutoTopupTwoWorkersChargeOnce: two workers (two processes) evaluate the same crossing at
// once, many times: one charge reaches Stripe.
func TestAutoTopupTwoWorkersChargeOnce(t *testing.T) {
	t.Parallel()
	s := setupTopup(t, nil)
	s.saveCard(t)
	s.enable(t)
	s.move(t, 300)
	workers := []*AutoTopup{s.topup, s.newTopup()}
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs <- workers[i%2].RunOnce(context.Background())
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := s.intents(); n != 1 {
		t.Fatalf("%d charges from two workers, want 1", n)
	}
	if att := s.attempts(t); len(att) != 1 {
		t.Fatalf("%d attempts, want 1", len(att))
	}
}

// TestAutoTopupRestartReusesKey: the process stops after recording the attempt and before
// calling Stripe. Another worker sends the charge once the attempt's wait is over, with the
// attempt's idempotency key, once.
func TestAutoTopupRestartReusesKey(t *testing.T) {
	t.Parallel()
	s := setupTopup(t, nil)
	s.saveCard(t)
	s.enable(t)
	s.move(t, 300)
	a, made, err := s.topup.open(context.Background(), s.org)
	if err != nil || !made {
		t.Fatalf("open = %+v, %v, %v", a, made, err)
	}
	// The process is gone; another starts.
	after := s.newTopup()
	if err := after.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := s.intents(); n != 0 {
		t.Fatalf("%d charges before the attempt's wait is over, want 0", n)
	}
	s.clock.Advance(DefaultRetryAfter)
	for range 2 {
		if err := after.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	var keys []string
	for _, r := range s.stripe.Requests() {
		if r.Path == "/v1/payment_intents" {
			keys = append(keys, r.IdempotencyKey)
		}
	}
	if len(keys) != 1 || keys[0] != ChargeKey(a.ID) {
		t.Fatalf("charges sent with keys %q, want one with %q", keys, ChargeKey(a.ID))
	}
	if att := s.attempts(t); len(att) != 1 || att[0].ID != a.ID || att[0].Status != AttemptPending {
		t.Fatalf("attempts = %+v", att)
	}
}

// TestAutoTopupSettings: the bounds, a card before turning it on, and removing the card turns
// it off.
func TestAutoTopupSettings(t *testing.T) {
	t.Parallel()
	s := setupTopup(t, nil)
	ctx := context.Background()
	for _, c := range []struct {
		threshold, amount int64
		field             string
	}{
		{-1, 2000, "threshold_usd"},
		{MaxThresholdCents + 1, 2000, "threshold_usd"},
		{1000, 499, "amount_usd"},
		{1000, MaxTopupCents + 1, "amount_usd"},
	} {
		_, err := s.topup.Save(ctx, SettingsInput{AccountID: s.org, Enabled: false, ThresholdCents: c.threshold, AmountCents: c.amount})
		var se *services.Error
		if !errors.As(err, &se) || se.Code != services.CodeInvalid || se.Fields[c.field] == "" {
			t.Errorf("Save(%d, %d) = %v, want invalid %s", c.threshold, c.amount, err, c.field)
		}
	}
	if _, err := s.topup.Save(ctx, SettingsInput{AccountID: s.org, Enabled: true, ThresholdCents: 0, AmountCents: 500}); services.ErrorCode(err) != services.CodeInvalid {
		t.Fatalf("turning on without a card: %v", err)
	}
	s.saveCard(t)
	got, err := s.topup.Save(ctx, SettingsInput{AccountID: s.org, Email: "dev@acme.test", Enabled: true, ThresholdCents: 0, AmountCents: 500})
	if err != nil || !got.Enabled || got.ThresholdCents != 0 || got.AmountCents != 500 {
		t.Fatalf("Save = %+v, %v", got, err)
	}
	if err := s.topup.RemoveCard(ctx, s.org); err != nil {
		t.Fatal(err)
	}
	got, err = s.topup.Settings(ctx, s.org)
	if err != nil || got.Enabled || got.Card != nil {
		t.Fatalf("after removing the card = %+v, %v", got, err)
	}
	if n := s.stripe.Count(http.MethodPost, "/v1/payment_methods/pm_card_visa/detach"); n != 1 {
		t.Fatalf("%d detaches, want 1", n)
	}
	if err := s.topup.RemoveCard(ctx, s.org); err != nil {
		t.Fatalf("removing again: %v", err)
	}
	if n := s.stripe.Count(http.MethodPost, "/v1/payment_methods/pm_card_visa/detach"); n != 1 {
		t.Fatalf("%d detaches after removing twice, want 1", n)
	}
	// A SetupIntent on another customer saves nothing.
	if got := deliver(t, s.webhook, SetupSucceededEvent("evt_setup_other", s.org, "cus_someone_else", "pm_other", testNow)); !strings.HasPrefix(got, "not saved") {
		t.Fatalf("outcome %q", got)
	}
}

// TestAutoTopupRemovedCardIsNeverCharged: the card is removed after a charge was recorded and
// before it was sent (a restart between): no worker sends it afterwards.
func TestAutoTopupRemovedCardIsNeverCharged(t *testing.T) {
	t.Parallel()
	s := setupTopup(t, nil)
	s.saveCard(t)
	s.enable(t)
	s.move(t, 300)
	if _, made, err := s.topup.open(context.Background(), s.org); err != nil || !made {
		t.Fatalf("open: %v, %v", made, err)
	}
	if err := s.topup.RemoveCard(context.Background(), s.org); err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(DefaultRetryAfter)
	s.runOnce(t)
	if n := s.intents(); n != 0 {
		t.Fatalf("%d charges of a removed card", n)
	}
	if att := s.attempts(t); len(att) != 1 || att[0].Status != AttemptFailed || !strings.Contains(att[0].Failure, "removed") {
		t.Fatalf("attempts = %+v", att)
	}
	if m, e := s.alerts.counts(); m != 0 || e != 0 {
		t.Fatalf("%d e-mails and %d events for a removal the customer made", m, e)
	}
}
