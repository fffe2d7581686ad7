package credits

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// noAnswer makes every charge reach nobody: Stripe's API answers 503 and says not to retry, as
// when the charge's fate is unknown.
func noAnswer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/payment_intents" {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Stripe-Should-Retry", "false")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error": {"type": "api_error", "message": "Try again later."}}`))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// wantUnanswered checks that the attempt was given up: auto top-up is off with the reason, and
// one e-mail and one topup.failed event were raised.
func (s topupShop) wantUnanswered(t *testing.T, attemptID, reason string) {
	t.Helper()
	set, err := s.topup.Settings(context.Background(), s.org)
	if err != nil || set.Enabled || !strings.Contains(set.StoppedReason, reason) || set.StoppedAt == nil || set.Pending != nil {
		t.Fatalf("settings after giving up = %+v, %v", set, err)
	}
	att := s.attempts(t)
	if len(att) != 1 || att[0].ID != attemptID || att[0].Status != AttemptUnanswered || !strings.Contains(att[0].Failure, reason) {
		t.Fatalf("attempts = %+v", att)
	}
	if m, e := s.alerts.counts(); m != 1 || e != 1 {
		t.Fatalf("%d e-mails and %d events, want one each", m, e)
	}
	m, e := s.alerts.mails[0], s.alerts.events[0]
	if m.Key != "topup-failed:"+attemptID || m.To[0] != "dev@acme.test" || !strings.Contains(m.Text, reason) {
		t.Fatalf("e-mail = %+v", m)
	}
	if e.AccountID != s.org || e.Type != TopupEventFailed || e.ID != attemptID {
		t.Fatalf("event = %+v", e)
	}
}

// TestAutoTopupUnansweredChargeStops: Stripe never answers the charge. It is sent again, with
// its one idempotency key, MaxChargeTries times in all; then it is given up once: unanswered,
// auto top-up off, one e-mail and one topup.failed. No second charge is made for the crossing,
// however long the workers go on; a decline Stripe tells later raises no second alert.
func TestAutoTopupUnansweredChargeStops(t *testing.T) {
	t.Parallel()
	s := setupTopup(t, noAnswer)
	s.saveCard(t)
	s.enable(t)
	s.move(t, 300)
	ctx := context.Background()
	// The first round sends the charge and gets no answer: the round reports it.
	if err := s.topup.RunOnce(ctx); err == nil {
		t.Fatal("a charge with no answer: RunOnce reported nothing")
	}
	att := s.attempts(t)
	if len(att) != 1 || att[0].Status != AttemptCreated {
		t.Fatalf("attempts after the first try = %+v", att)
	}
	for range 3 * MaxChargeTries {
		s.clock.Advance(DefaultRetryAfter)
		_ = s.topup.RunOnce(ctx) // a try with no answer is an error; giving up is not
	}
	var keys []string
	for _, r := range s.stripe.Requests() {
		if r.Path == "/v1/payment_intents" {
			keys = append(keys, r.IdempotencyKey)
		}
	}
	if len(keys) != MaxChargeTries {
		t.Fatalf("the charge was sent %d times, want %d", len(keys), MaxChargeTries)
	}
	for _, k := range keys {
		if k != ChargeKey(att[0].ID) {
			t.Fatalf("a try was sent with key %q, want %q", k, ChargeKey(att[0].ID))
		}
	}
	s.wantUnanswered(t, att[0].ID, "did not answer the charge, sent 5 times")
	s.wantCredit(t, s.org, cents(300))

	// Another worker, later, changes nothing and alerts no more.
	s.clock.Advance(DefaultAnswerWait)
	if err := s.newTopup().RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if n := s.intents(); n != MaxChargeTries {
		t.Fatalf("%d charges after giving up, want still %d", n, MaxChargeTries)
	}
	s.wantUnanswered(t, att[0].ID, "did not answer")

	// A decline Stripe tells later records its reason, and raises no second alert.
	c := s.charge(att[0])
	c.PaymentIntentID = "pi_late_decline"
	got := deliver(t, s.webhook, TopupIntentEvent("evt_late_decline", "payment_intent.payment_failed", c, "insufficient_funds", testNow))
	if !strings.Contains(got, "given up before") {
		t.Fatalf("outcome %q", got)
	}
	if a := s.attempts(t); a[0].Status != AttemptFailed || !strings.Contains(a[0].Failure, "insufficient funds") {
		t.Fatalf("after the late decline: %+v", a[0])
	}
	if m, e := s.alerts.counts(); m != 1 || e != 1 {
		t.Fatalf("%d e-mails and %d events after the late decline, want still one each", m, e)
	}
}

// TestAutoTopupUnconfirmedChargeStops: Stripe takes the charge but its webhook never comes.
// After DefaultAnswerWait the charge is given up once and auto top-up stops; no second charge is
// made. The payment_intent.succeeded Stripe sends later still credits it, once.
func TestAutoTopupUnconfirmedChargeStops(t *testing.T) {
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
	s.clock.Advance(DefaultAnswerWait / 2)
	s.runOnce(t)
	if a := s.attempts(t); a[0].Status != AttemptPending {
		t.Fatalf("given up before the wait: %+v", a[0])
	}
	s.clock.Advance(DefaultAnswerWait / 2)
	s.runOnce(t)
	s.runOnce(t)
	s.wantUnanswered(t, att[0].ID, "did not confirm the charge within 24 hours")
	if n := s.intents(); n != 1 {
		t.Fatalf("%d charges, want 1", n)
	}

	// The webhook comes after all: the charge is credited once, and nothing is charged again.
	ev := TopupIntentEvent("evt_late_ok", "payment_intent.succeeded", s.charge(att[0]), "", testNow)
	if got := deliver(t, s.webhook, ev); got != "credited $20.00 (auto top-up)" {
		t.Fatalf("outcome %q", got)
	}
	deliver(t, s.webhook, ev)
	s.wantCredit(t, s.org, cents(2300))
	s.move(t, -2100) // below the threshold again: auto top-up is off
	s.runOnce(t)
	if n := s.intents(); n != 1 {
		t.Fatalf("%d charges after the late credit, want 1", n)
	}
	if m, e := s.alerts.counts(); m != 1 || e != 1 {
		t.Fatalf("%d e-mails and %d events, want still one each", m, e)
	}
}
