package credits

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/ledger"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/gpumarket/gpumarket/services/money"
)

// deliver signs the payload now, as Stripe does on every attempt, and hands it to the
// webhook; it returns the outcome.
func deliver(t testing.TB, w *StripeWebhook, payload []byte) string {
	t.Helper()
	outcome, err := w.Handle(context.Background(), payload, SignEvent(payload, testWebhookSecret, time.Now()))
	if err != nil {
		t.Fatalf("Handle(%.80s...): %v", payload, err)
	}
	return outcome
}

// stripeEvent builds an event of any type around an object, as Stripe sends it.
func stripeEvent(id, eventType string, object map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{
		"id": id, "object": "event", "api_version": stripe.APIVersion, "created": testNow.Unix(),
		"type": eventType, "livemode": false, "pending_webhooks": 1, "data": map[string]any{"object": object},
	})
	return b
}

// storedEvent is a stripe_events row.
type storedEvent struct {
	Type       string
	Payload    []byte
	Deliveries int
	Outcome    string
	First      time.Time
	Last       time.Time
}

func eventRow(t testing.TB, pool *pgxpool.Pool, id string) storedEvent {
	t.Helper()
	var e storedEvent
	if err := pool.QueryRow(context.Background(), `
		SELECT type, payload, deliveries, outcome, first_received_at, last_received_at FROM stripe_events WHERE id = $1`, id).
		Scan(&e.Type, &e.Payload, &e.Deliveries, &e.Outcome, &e.First, &e.Last); err != nil {
		t.Fatalf("stripe event %s: %v", id, err)
	}
	return e
}

// TestWebhookFieldCase9UnpaidCompletionWaits (docs/failure-cases.md, case 9): a delayed
// payment method completes the checkout unpaid. Nothing is credited until
// async_payment_succeeded, which credits once.
func TestWebhookFieldCase9UnpaidCompletionWaits(t *testing.T) {
	t.Parallel()
	s := setupShop(t, nil)
	p := s.buy(t, 2000)

	if got := deliver(t, s.webhook, CheckoutEvent("evt_c9_completed", "checkout.session.completed", p, "unpaid", "pi_c9", testNow)); got != "awaiting payment" {
		t.Fatalf("unpaid completion: outcome %q", got)
	}
	if row := purchaseRow(t, s.pool, p.ID); row.Status != PurchaseAwaitingPayment || row.CreditTxn != "" || row.PaymentIntent != "pi_c9" {
		t.Fatalf("after the unpaid completion: %+v", row)
	}
	s.wantCredit(t, s.org, 0)
	if n := countTransactions(t, s.pool, ledger.TransactionPurchase); n != 0 {
		t.Fatalf("%d purchase transactions before payment, want 0", n)
	}

	succeeded := CheckoutEvent("evt_c9_succeeded", "checkout.session.async_payment_succeeded", p, "paid", "pi_c9", testNow)
	if got := deliver(t, s.webhook, succeeded); got != "credited $20.00" {
		t.Fatalf("async_payment_succeeded: outcome %q", got)
	}
	if got := deliver(t, s.webhook, succeeded); got != "already credited" {
		t.Fatalf("async_payment_succeeded again: outcome %q", got)
	}
	// A late copy of the unpaid completion does not take the purchase back to waiting.
	if got := deliver(t, s.webhook, CheckoutEvent("evt_c9_completed", "checkout.session.completed", p, "unpaid", "pi_c9", testNow)); !strings.Contains(got, "already paid") {
		t.Fatalf("late unpaid completion: outcome %q", got)
	}

	row := purchaseRow(t, s.pool, p.ID)
	if row.Status != PurchasePaid || row.CreditTxn == "" {
		t.Fatalf("after payment: %+v", row)
	}
	s.wantCredit(t, s.org, cents(2000))
	wantBalance(t, s.ledger, s.clearing, -cents(2000))
	if n := countTransactions(t, s.pool, ledger.TransactionPurchase); n != 1 {
		t.Fatalf("%d purchase transactions, want 1", n)
	}
	checkInvariants(t, s.pool)
}

// TestWebhookFieldCase10OnlyTheSessionGrants (docs/failure-cases.md, case 10):
// payment_intent.succeeded and charge.succeeded arrive for the same payment as the Checkout
// Session. Only the session grants, once, keyed by the purchase.
func TestWebhookFieldCase10OnlyTheSessionGrants(t *testing.T) {
	t.Parallel()
	s := setupShop(t, nil)
	p := s.buy(t, 2000)
	meta := map[string]string{"purchase_id": p.ID, "account_id": p.AccountID}
	intent := stripeEvent("evt_c10_pi", "payment_intent.succeeded", map[string]any{
		"id": "pi_c10", "object": "payment_intent", "amount": 2000, "amount_received": 2000, "currency": "usd",
		"status": "succeeded", "metadata": meta})
	charge := stripeEvent("evt_c10_ch", "charge.succeeded", map[string]any{
		"id": "ch_c10", "object": "charge", "amount": 2000, "currency": "usd", "paid": true, "payment_intent": "pi_c10",
		"metadata": meta})

	for _, ev := range [][]byte{intent, charge} {
		if got := deliver(t, s.webhook, ev); got != "ignored" {
			t.Fatalf("outcome %q, want ignored", got)
		}
	}
	s.wantCredit(t, s.org, 0)
	if row := purchaseRow(t, s.pool, p.ID); row.Status != PurchasePending {
		t.Fatalf("purchase = %+v, want pending", row)
	}

	if got := deliver(t, s.webhook, CheckoutEvent("evt_c10_cs", "checkout.session.completed", p, "paid", "pi_c10", testNow)); got != "credited $20.00" {
		t.Fatalf("completion: outcome %q", got)
	}
	// The payment's other events, again and after the grant, and a stray
	// async_payment_succeeded for the same session, grant nothing more.
	for _, ev := range [][]byte{intent, charge,
		CheckoutEvent("evt_c10_async", "checkout.session.async_payment_succeeded", p, "paid", "pi_c10", testNow)} {
		deliver(t, s.webhook, ev)
	}
	s.wantCredit(t, s.org, cents(2000))
	if n := countTransactions(t, s.pool, ledger.TransactionPurchase); n != 1 {
		t.Fatalf("%d purchase transactions, want 1", n)
	}
	if n := countRows(t, s.pool, "stripe_events"); n != 4 {
		t.Fatalf("%d events stored, want 4", n)
	}
	checkInvariants(t, s.pool)
}

// TestWebhookFieldCase11SameFinalStateHoweverDelivered (docs/failure-cases.md, case 11): the
// events of one purchase (an unpaid completion, its async_payment_succeeded, a partial refund)
// delivered once in order, each three times, in reverse order, and all again three days later:
// the same final state every time, and every delivery counted.
func TestWebhookFieldCase11SameFinalStateHoweverDelivered(t *testing.T) {
	t.Parallel()
	const completed, succeeded, refunded = "evt_c11_completed", "evt_c11_succeeded", "evt_c11_refunded"
	events := func(p Purchase) map[string][]byte {
		return map[string][]byte{
			completed: CheckoutEvent(completed, "checkout.session.completed", p, "unpaid", "pi_c11", testNow),
			succeeded: CheckoutEvent(succeeded, "checkout.session.async_payment_succeeded", p, "paid", "pi_c11", testNow),
			refunded:  RefundEvent(refunded, p, "pi_c11", 500, testNow),
		}
	}
	inOrder := []string{completed, succeeded, refunded}

	for _, c := range []struct {
		name       string
		run        func(t *testing.T, s shop, ev map[string][]byte)
		deliveries int
	}{
		{"once in order", func(t *testing.T, s shop, ev map[string][]byte) {
			for _, id := range inOrder {
				deliver(t, s.webhook, ev[id])
			}
		}, 1},
		{"the same signed delivery three times", func(t *testing.T, s shop, ev map[string][]byte) {
			for _, id := range inOrder {
				header := SignEvent(ev[id], testWebhookSecret, time.Now())
				for range 3 {
					if _, err := s.webhook.Handle(context.Background(), ev[id], header); err != nil {
						t.Fatal(err)
					}
				}
			}
		}, 3},
		{"reverse order", func(t *testing.T, s shop, ev map[string][]byte) {
			deliver(t, s.webhook, ev[refunded])
			s.wantCredit(t, s.org, -cents(500))
			deliver(t, s.webhook, ev[succeeded])
			deliver(t, s.webhook, ev[completed])
		}, 1},
		{"again three days later", func(t *testing.T, s shop, ev map[string][]byte) {
			for _, id := range inOrder {
				deliver(t, s.webhook, ev[id])
			}
			s.clock.Advance(72 * time.Hour)
			for _, id := range inOrder {
				deliver(t, s.webhook, ev[id]) // signed again, now, as Stripe does on a retry
			}
		}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := setupShop(t, nil)
			p := s.buy(t, 2000)
			ev := events(p)
			c.run(t, s, ev)

			row := purchaseRow(t, s.pool, p.ID)
			if row.Status != PurchasePaid || row.RefundedCents != 500 || row.PaymentIntent != "pi_c11" || row.CreditTxn == "" {
				t.Fatalf("purchase = %+v, want paid with $5.00 refunded", row)
			}
			s.wantCredit(t, s.org, cents(1500))
			wantBalance(t, s.ledger, s.clearing, -cents(1500))
			if n, m := countTransactions(t, s.pool, ledger.TransactionPurchase), countTransactions(t, s.pool, ledger.TransactionRefund); n != 1 || m != 1 {
				t.Fatalf("%d purchase and %d refund transactions, want 1 and 1", n, m)
			}
			if n := countRows(t, s.pool, "stripe_events"); n != 3 {
				t.Fatalf("%d events stored, want 3", n)
			}
			for id, payload := range ev {
				e := eventRow(t, s.pool, id)
				if e.Deliveries != c.deliveries || !bytes.Equal(e.Payload, payload) || !e.First.Equal(testNow) ||
					!e.Last.Equal(s.clock.Now()) {
					t.Errorf("event %s: %d deliveries, first %s, last %s; want %d, %s, %s",
						id, e.Deliveries, e.First, e.Last, c.deliveries, testNow, s.clock.Now())
				}
			}
			checkInvariants(t, s.pool)
		})
	}
}

// TestWebhookFieldCase12Signatures (docs/failure-cases.md, case 12): only a signature made
// with a configured secret over the exact body, within 300 s, passes. A refused delivery
// stores nothing and moves nothing.
func TestWebhookFieldCase12Signatures(t *testing.T) {
	t.Parallel()
	s := setupShop(t, nil)
	ctx := context.Background()
	p := s.buy(t, 2000)
	paid := func(id string) []byte {
		return CheckoutEvent(id, "checkout.session.completed", p, "paid", "pi_c12", testNow)
	}
	v1 := func(at time.Time, payload []byte, secret string) string {
		return hex.EncodeToString(webhook.ComputeSignature(at, payload, secret))
	}
	rotated := NewStripeWebhook(s.credits, []string{"whsec_test_previous", testWebhookSecret})

	body := paid("evt_c12_refused")
	changed := bytes.Replace(body, []byte(`"amount_total":2000`), []byte(`"amount_total":9000`), 1)
	if diff := countDiff(body, changed); diff != 1 {
		t.Fatalf("the changed body differs in %d bytes, want 1", diff)
	}
	var reserialised bytes.Buffer
	if err := json.Indent(&reserialised, body, "", "  "); err != nil {
		t.Fatal(err)
	}

	now := time.Now()
	for _, c := range []struct {
		name    string
		payload []byte
		header  string
	}{
		{"301 s old", body, SignEvent(body, testWebhookSecret, now.Add(-301*time.Second))},
		{"the wrong secret", body, SignEvent(body, "whsec_test_someone_else", now)},
		{"body changed by one byte", changed, SignEvent(body, testWebhookSecret, now)},
		{"body re-serialised", reserialised.Bytes(), SignEvent(body, testWebhookSecret, now)},
		{"timestamp changed", body, fmt.Sprintf("t=%d,v1=%s", now.Unix()+1, v1(now, body, testWebhookSecret))},
		{"two v1 values, neither right", body, fmt.Sprintf("t=%d,v1=%s,v1=%s", now.Unix(),
			v1(now, body, "whsec_test_a"), v1(now, body, "whsec_test_b"))},
		{"no signature", body, ""},
		{"no v1 value", body, fmt.Sprintf("t=%d,v0=%s", now.Unix(), v1(now, body, testWebhookSecret))},
	} {
		for _, w := range []*StripeWebhook{s.webhook, rotated} {
			outcome, err := w.Handle(ctx, c.payload, c.header)
			if !errors.Is(err, ErrBadSignature) || outcome != "" {
				t.Errorf("%s: Handle = %q, %v; want ErrBadSignature", c.name, outcome, err)
			}
		}
		if n := countRows(t, s.pool, "stripe_events"); n != 0 {
			t.Fatalf("%s: %d events stored, want 0", c.name, n)
		}
		s.wantCredit(t, s.org, 0)
		if row := purchaseRow(t, s.pool, p.ID); row.Status != PurchasePending || row.PaymentIntent != "" {
			t.Fatalf("%s: purchase = %+v, want untouched", c.name, row)
		}
	}

	now = time.Now()
	accepted := []struct {
		name    string
		webhook *StripeWebhook
		payload []byte
		header  func(payload []byte) string
	}{
		{"valid", s.webhook, paid("evt_c12_valid"), func(b []byte) string { return SignEvent(b, testWebhookSecret, now) }},
		{"290 s old", s.webhook, paid("evt_c12_old"), func(b []byte) string {
			return SignEvent(b, testWebhookSecret, now.Add(-290*time.Second))
		}},
		{"two v1 values, the second right", s.webhook, paid("evt_c12_two_v1"), func(b []byte) string {
			return fmt.Sprintf("t=%d,v1=%s,v1=%s", now.Unix(), v1(now, b, "whsec_test_previous"), v1(now, b, testWebhookSecret))
		}},
		{"signed with the second of two configured secrets", rotated, paid("evt_c12_rotated"), func(b []byte) string {
			return SignEvent(b, testWebhookSecret, now)
		}},
		{"signed with the first of two configured secrets", rotated, paid("evt_c12_previous"), func(b []byte) string {
			return SignEvent(b, "whsec_test_previous", now)
		}},
	}
	for i, c := range accepted {
		outcome, err := c.webhook.Handle(ctx, c.payload, c.header(c.payload))
		want := "already credited"
		if i == 0 {
			want = "credited $20.00"
		}
		if err != nil || outcome != want {
			t.Fatalf("%s: Handle = %q, %v; want %q", c.name, outcome, err, want)
		}
	}
	if n := countRows(t, s.pool, "stripe_events"); n != len(accepted) {
		t.Fatalf("%d events stored, want %d", n, len(accepted))
	}
	s.wantCredit(t, s.org, cents(2000))
	if n := countTransactions(t, s.pool, ledger.TransactionPurchase); n != 1 {
		t.Fatalf("%d purchase transactions, want 1", n)
	}
}

func countDiff(a, b []byte) int {
	if len(a) != len(b) {
		return -1
	}
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

// TestWebhookFieldCase13ManyPurchasesAndRefunds (docs/failure-cases.md, case 13): many small
// purchases, then partial and full refunds delivered in random order and some twice. The
// balance is what was bought less what was refunded, to the picodollar, and equals the sum of
// its postings and of its history.
func TestWebhookFieldCase13ManyPurchasesAndRefunds(t *testing.T) {
	t.Parallel()
	s := setupShop(t, nil)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(13, 9))

	type refund struct {
		purchase      Purchase
		paymentIntent string
		cumulative    int64
	}
	var refunds []refund
	var want money.Pico
	refundedOf := map[string]int64{}
	var purchases []Purchase
	for i := range 40 {
		amount := MinPurchaseCents + rng.Int64N(300)
		p := s.buy(t, amount)
		purchases = append(purchases, p)
		pi := fmt.Sprintf("pi_c13_%d", i)
		if got := deliver(t, s.webhook, CheckoutEvent(fmt.Sprintf("evt_c13_paid_%d", i), "checkout.session.completed", p, "paid",
			pi, testNow)); got != "credited "+formatCents(amount) {
			t.Fatalf("purchase %d: outcome %q", i, got)
		}
		want += cents(amount)
		// Half the purchases are refunded in one to three steps, the last maybe in full.
		if i%2 == 0 {
			var total int64
			for range 1 + rng.IntN(3) {
				total = min(total+1+rng.Int64N(amount/2), amount)
				refunds = append(refunds, refund{p, pi, total})
			}
			refundedOf[p.ID] = total
			want -= cents(total)
		}
	}
	rng.Shuffle(len(refunds), func(i, j int) { refunds[i], refunds[j] = refunds[j], refunds[i] })
	for i, r := range refunds {
		ev := RefundEvent(fmt.Sprintf("evt_c13_refund_%d", i), r.purchase, r.paymentIntent, r.cumulative, testNow)
		deliver(t, s.webhook, ev)
		if rng.IntN(3) == 0 {
			deliver(t, s.webhook, ev)
		}
	}

	s.wantCredit(t, s.org, want)
	wantBalance(t, s.ledger, s.clearing, -want)
	for _, p := range purchases {
		if row := purchaseRow(t, s.pool, p.ID); row.Status != PurchasePaid || row.RefundedCents != refundedOf[p.ID] {
			t.Errorf("purchase %s: %+v, want paid with %d cents refunded", p.ID, row, refundedOf[p.ID])
		}
	}
	var sum string
	if err := s.pool.QueryRow(ctx, `SELECT sum(amount)::text FROM ledger_postings WHERE ledger_account_id = $1`, s.customer).Scan(&sum); err != nil {
		t.Fatal(err)
	}
	if sum != fmt.Sprint(int64(want)) {
		t.Fatalf("sum of postings %s, want %d", sum, int64(want))
	}
	var fromHistory money.BigPico
	for before := ledger.PostingID(0); ; {
		page, err := s.credits.History(ctx, s.org, 25, before)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Entries {
			fromHistory = fromHistory.Add(e.Amount)
		}
		if before = page.Next; before == 0 {
			break
		}
	}
	if !fromHistory.Equal(want) {
		t.Fatalf("history sums to %s, want %s", fromHistory, want)
	}
	checkInvariants(t, s.pool)
}

// TestWebhookRefunds: charge.refunded carries the cumulative amount refunded; the ledger
// takes back what it has not yet taken back, whatever the order of the events and however
// often they come.
func TestWebhookRefunds(t *testing.T) {
	t.Parallel()
	t.Run("partial then full", func(t *testing.T) {
		t.Parallel()
		s := setupShop(t, nil)
		p := s.buy(t, 2000)
		deliver(t, s.webhook, CheckoutEvent("evt_paid", "checkout.session.completed", p, "paid", "pi_r1", testNow))
		partial := RefundEvent("evt_refund_partial", p, "pi_r1", 500, testNow)
		full := RefundEvent("evt_refund_full", p, "pi_r1", 2000, testNow)

		if got := deliver(t, s.webhook, partial); got != "refunded $5.00" {
			t.Fatalf("partial refund: outcome %q", got)
		}
		s.wantCredit(t, s.org, cents(1500))
		if got := deliver(t, s.webhook, full); got != "refunded $15.00" {
			t.Fatalf("full refund: outcome %q", got)
		}
		for _, ev := range [][]byte{partial, full, partial} {
			if got := deliver(t, s.webhook, ev); got != "refund already taken back" {
				t.Fatalf("redelivered refund: outcome %q", got)
			}
		}
		s.wantCredit(t, s.org, 0)
		wantBalance(t, s.ledger, s.clearing, 0)
		if row := purchaseRow(t, s.pool, p.ID); row.Status != PurchasePaid || row.RefundedCents != 2000 {
			t.Fatalf("purchase = %+v", row)
		}
		if n := countTransactions(t, s.pool, ledger.TransactionRefund); n != 2 {
			t.Fatalf("%d refund transactions, want 2", n)
		}
		checkInvariants(t, s.pool)
	})

	t.Run("full before partial", func(t *testing.T) {
		t.Parallel()
		s := setupShop(t, nil)
		p := s.buy(t, 2000)
		deliver(t, s.webhook, CheckoutEvent("evt_paid", "checkout.session.completed", p, "paid", "pi_r2", testNow))
		if got := deliver(t, s.webhook, RefundEvent("evt_refund_full", p, "pi_r2", 2000, testNow)); got != "refunded $20.00" {
			t.Fatalf("full refund: outcome %q", got)
		}
		if got := deliver(t, s.webhook, RefundEvent("evt_refund_partial", p, "pi_r2", 500, testNow)); got != "refund already taken back" {
			t.Fatalf("late partial refund: outcome %q", got)
		}
		s.wantCredit(t, s.org, 0)
		if row := purchaseRow(t, s.pool, p.ID); row.RefundedCents != 2000 {
			t.Fatalf("purchase = %+v", row)
		}
		if n := countTransactions(t, s.pool, ledger.TransactionRefund); n != 1 {
			t.Fatalf("%d refund transactions, want 1", n)
		}
		checkInvariants(t, s.pool)
	})

	t.Run("refund before the completion", func(t *testing.T) {
		t.Parallel()
		s := setupShop(t, nil)
		p := s.buy(t, 2000)
		// The refund names the purchase only in its metadata: no session event has told the
		// platform the payment intent yet.
		if got := deliver(t, s.webhook, RefundEvent("evt_refund", p, "pi_r3", 500, testNow)); got != "refunded $5.00" {
			t.Fatalf("early refund: outcome %q", got)
		}
		s.wantCredit(t, s.org, -cents(500))
		b, err := s.credits.Balance(context.Background(), s.org)
		if err != nil || !b.Negative || b.USD != "-5.00" {
			t.Fatalf("Balance = %+v, %v; want -5.00, flagged", b, err)
		}
		if got := deliver(t, s.webhook, CheckoutEvent("evt_paid", "checkout.session.completed", p, "paid", "pi_r3", testNow)); got != "credited $20.00" {
			t.Fatalf("completion: outcome %q", got)
		}
		s.wantCredit(t, s.org, cents(1500))
		if row := purchaseRow(t, s.pool, p.ID); row.Status != PurchasePaid || row.RefundedCents != 500 {
			t.Fatalf("purchase = %+v", row)
		}
		checkInvariants(t, s.pool)
	})
}

// TestWebhookAsyncPaymentFailed: a delayed payment that fails marks the purchase failed and
// credits nothing; a failure reported after a credit leaves it alone.
func TestWebhookAsyncPaymentFailed(t *testing.T) {
	t.Parallel()
	s := setupShop(t, nil)
	p := s.buy(t, 2000)

	deliver(t, s.webhook, CheckoutEvent("evt_completed", "checkout.session.completed", p, "unpaid", "pi_f1", testNow))
	failed := CheckoutEvent("evt_failed", "checkout.session.async_payment_failed", p, "unpaid", "pi_f1", testNow)
	for range 2 {
		if got := deliver(t, s.webhook, failed); got != "payment failed" {
			t.Fatalf("async_payment_failed: outcome %q", got)
		}
	}
	if row := purchaseRow(t, s.pool, p.ID); row.Status != PurchaseFailed || row.CreditTxn != "" {
		t.Fatalf("purchase = %+v, want failed", row)
	}
	s.wantCredit(t, s.org, 0)

	q := s.buy(t, 1000)
	deliver(t, s.webhook, CheckoutEvent("evt_q_paid", "checkout.session.completed", q, "paid", "pi_f2", testNow))
	if got := deliver(t, s.webhook, CheckoutEvent("evt_q_failed", "checkout.session.async_payment_failed", q, "unpaid", "pi_f2", testNow)); !strings.Contains(got, "left as paid") {
		t.Fatalf("failure after credit: outcome %q", got)
	}
	if row := purchaseRow(t, s.pool, q.ID); row.Status != PurchasePaid {
		t.Fatalf("purchase = %+v, want paid", row)
	}
	s.wantCredit(t, s.org, cents(1000))
	if n := countTransactions(t, s.pool, ledger.TransactionPurchase); n != 1 {
		t.Fatalf("%d purchase transactions, want 1", n)
	}
	checkInvariants(t, s.pool)
}

// TestWebhookSessionThatDisagreesCreditsNothing: the credit is what the platform recorded
// when the buyer started. A session naming another amount or another account credits
// nothing and leaves the problem on the purchase for review.
func TestWebhookSessionThatDisagreesCreditsNothing(t *testing.T) {
	t.Parallel()
	s := setupShop(t, nil)
	p := s.buy(t, 2000)
	other := newOrg(t, s.pool, "Someone Else")

	cheaper := p
	cheaper.AmountCents = 200_000
	elsewhere := p
	elsewhere.AccountID = other
	for i, claimed := range []Purchase{cheaper, elsewhere} {
		for _, typ := range []string{"checkout.session.completed", "checkout.session.async_payment_succeeded"} {
			got := deliver(t, s.webhook, CheckoutEvent(fmt.Sprintf("evt_bad_%d_%s", i, typ), typ, claimed, "paid", "pi_d", testNow))
			if !strings.HasPrefix(got, "not credited: ") {
				t.Fatalf("%+v: outcome %q, want not credited", claimed, got)
			}
		}
		row := purchaseRow(t, s.pool, p.ID)
		if row.Status != PurchasePending || !strings.Contains(row.Problem, fmt.Sprint(claimed.AmountCents)) ||
			!strings.Contains(row.Problem, claimed.AccountID) {
			t.Fatalf("purchase = %+v, want pending with the problem", row)
		}
	}
	s.wantCredit(t, s.org, 0)
	s.wantCredit(t, other, 0)
	if n := countRows(t, s.pool, "ledger_transactions"); n != 0 {
		t.Fatalf("%d ledger transactions, want 0", n)
	}

	deliver(t, s.webhook, CheckoutEvent("evt_good", "checkout.session.completed", p, "paid", "pi_d", testNow))
	if row := purchaseRow(t, s.pool, p.ID); row.Status != PurchasePaid || row.Problem != "" {
		t.Fatalf("purchase = %+v, want paid, problem cleared", row)
	}
	s.wantCredit(t, s.org, cents(2000))
	s.wantCredit(t, other, 0)
}

// TestWebhookStoresEveryEventAsItCame: every verified event is kept with its body exactly as
// it arrived, whatever its type; unknown types and events about no purchase are acknowledged
// and change nothing.
func TestWebhookStoresEveryEventAsItCame(t *testing.T) {
	t.Parallel()
	s := setupShop(t, nil)

	// Key order, spacing and escapes that a re-serialisation would not keep.
	unknown := []byte("{\n  \"type\": \"customer.subscription.created\",  \"id\":\"evt_unknown\",\n\t\"object\":\"event\"," +
		"\"api_version\":\"2019-01-01\",\"created\":1773480600,\"data\":{\"object\":{\"id\":\"sub_1\",\"name\":\"Caf\\u00e9 \u2603\"," +
		"\"quantity\":1.50}}}\n")
	if got := deliver(t, s.webhook, unknown); got != "ignored" {
		t.Fatalf("unknown type: outcome %q", got)
	}
	e := eventRow(t, s.pool, "evt_unknown")
	if !bytes.Equal(e.Payload, unknown) || e.Type != "customer.subscription.created" || e.Outcome != "ignored" ||
		e.Deliveries != 1 || !e.First.Equal(testNow) {
		t.Fatalf("stored %+v (payload %q)", e, e.Payload)
	}

	// A session this code cannot read is kept with the reason, and acknowledged.
	garbled := stripeEvent("evt_garbled", "checkout.session.completed", map[string]any{"id": "cs_test_garbled", "amount_total": "twenty"})
	if got := deliver(t, s.webhook, garbled); !strings.HasPrefix(got, "unreadable session: ") {
		t.Fatalf("garbled session: outcome %q", got)
	}
	if e := eventRow(t, s.pool, "evt_garbled"); !bytes.Equal(e.Payload, garbled) || !strings.HasPrefix(e.Outcome, "unreadable session: ") {
		t.Fatalf("garbled session: stored %+v", e)
	}

	stray := Purchase{ID: "0b7c2d7e-0000-4000-8000-000000000000", AccountID: s.org, AmountCents: 2000, StripeSessionID: "cs_test_unknown"}
	for id, ev := range map[string][]byte{
		"evt_stray_session": CheckoutEvent("evt_stray_session", "checkout.session.completed", stray, "paid", "pi_stray", testNow),
		"evt_stray_refund":  RefundEvent("evt_stray_refund", stray, "pi_stray", 2000, testNow),
	} {
		got := deliver(t, s.webhook, ev)
		if !strings.HasPrefix(got, "no purchase for ") {
			t.Fatalf("%s: outcome %q", id, got)
		}
		if e := eventRow(t, s.pool, id); !bytes.Equal(e.Payload, ev) || e.Outcome != got {
			t.Fatalf("%s: stored %+v", id, e)
		}
	}
	if n := countRows(t, s.pool, "ledger_transactions"); n != 0 {
		t.Fatalf("%d ledger transactions, want 0", n)
	}
	s.wantCredit(t, s.org, 0)
}

// TestWebhookConcurrentDeliveriesCreditOnce: ten deliveries of one paid event at once, and
// ten different paid events (completions and async successes) of another purchase at once,
// all together, through a pool of fewer connections than deliveries. Each purchase is
// credited exactly once, and no delivery waits for ever on a connection.
func TestWebhookConcurrentDeliveriesCreditOnce(t *testing.T) {
	t.Parallel()
	s := setupShop(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	same, mixed := s.buy(t, 2000), s.buy(t, 5000)

	// Three connections whatever the machine (pgxpool's default grows with the CPUs): a
	// delivery that held one connection while it waited for a second would deadlock here.
	cfg, err := pgxpool.ParseConfig(s.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 3
	small, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(small.Close)
	hook := NewStripeWebhook(NewCredits(small, ledger.NewLedger(small, s.clock.Now), nil, s.clock.Now), []string{testWebhookSecret})

	type delivery struct {
		purchase string
		payload  []byte
		header   string
	}
	var deliveries []delivery
	samePayload := CheckoutEvent("evt_same", "checkout.session.completed", same, "paid", "pi_same", testNow)
	sameHeader := SignEvent(samePayload, testWebhookSecret, time.Now())
	for i := range 10 {
		deliveries = append(deliveries, delivery{same.ID, samePayload, sameHeader})
		typ := "checkout.session.completed"
		if i%2 == 1 {
			typ = "checkout.session.async_payment_succeeded"
		}
		payload := CheckoutEvent(fmt.Sprintf("evt_mixed_%d", i), typ, mixed, "paid", "pi_mixed", testNow)
		deliveries = append(deliveries, delivery{mixed.ID, payload, SignEvent(payload, testWebhookSecret, time.Now())})
	}

	var mu sync.Mutex
	credited := map[string]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, d := range deliveries {
		wg.Go(func() {
			<-start
			outcome, err := hook.Handle(ctx, d.payload, d.header)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("Handle: %v", err)
			}
			if strings.HasPrefix(outcome, "credited") {
				credited[d.purchase]++
			}
		})
	}
	close(start)
	wg.Wait()

	if credited[same.ID] != 1 || credited[mixed.ID] != 1 {
		t.Fatalf("credited %d and %d times, want once each", credited[same.ID], credited[mixed.ID])
	}
	s.wantCredit(t, s.org, cents(7000))
	if n := countTransactions(t, s.pool, ledger.TransactionPurchase); n != 2 {
		t.Fatalf("%d purchase transactions, want 2", n)
	}
	if e := eventRow(t, s.pool, "evt_same"); e.Deliveries != 10 {
		t.Fatalf("evt_same counted %d deliveries, want 10", e.Deliveries)
	}
	if n := countRows(t, s.pool, "stripe_events"); n != 11 {
		t.Fatalf("%d events stored, want 11", n)
	}
	checkInvariants(t, s.pool)
}

// TestWebhookFieldCase35SessionExpired (docs/failure-cases.md, case 35): Stripe's
// checkout.session.expired marks a pending purchase expired, once, and credits nothing; a
// purchase paid before its session's expired event arrived stays paid.
func TestWebhookFieldCase35SessionExpired(t *testing.T) {
	t.Parallel()
	s := setupShop(t, nil)
	p := s.buy(t, 2000)
	if p.ExpiresAt == nil || !p.ExpiresAt.Equal(testNow.Add(CheckoutExpiry)) {
		t.Fatalf("purchase expires at %v, want %v", p.ExpiresAt, testNow.Add(CheckoutExpiry))
	}

	expired := CheckoutEvent("evt_c35_expired", "checkout.session.expired", p, "unpaid", "", testNow)
	if got := deliver(t, s.webhook, expired); got != "expired unpaid" {
		t.Fatalf("session expired: outcome %q", got)
	}
	if got := deliver(t, s.webhook, expired); got != "session expired; purchase already expired" {
		t.Fatalf("session expired again: outcome %q", got)
	}
	if row := purchaseRow(t, s.pool, p.ID); row.Status != PurchaseExpired || row.CreditTxn != "" {
		t.Fatalf("after expiry: %+v", row)
	}
	got, err := s.credits.Purchase(context.Background(), s.org, p.ID)
	if err != nil || got.Status != PurchaseExpired {
		t.Fatalf("Purchase = %+v, %v; want expired", got, err)
	}
	var updated int
	if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM stripe_events WHERE id = 'evt_c35_expired'`).Scan(&updated); err != nil || updated != 1 {
		t.Fatalf("stored expired events = %d, %v; want 1", updated, err)
	}
	s.wantCredit(t, s.org, 0)

	q := s.buy(t, 1000)
	deliver(t, s.webhook, CheckoutEvent("evt_c35_paid", "checkout.session.completed", q, "paid", "pi_c35", testNow))
	if got := deliver(t, s.webhook, CheckoutEvent("evt_c35_late", "checkout.session.expired", q, "unpaid", "", testNow)); got != "session expired; purchase already paid" {
		t.Fatalf("expiry after payment: outcome %q", got)
	}
	if row := purchaseRow(t, s.pool, q.ID); row.Status != PurchasePaid {
		t.Fatalf("purchase = %+v, want paid", row)
	}
	s.wantCredit(t, s.org, cents(1000))
	checkInvariants(t, s.pool)
}

// TestPendingPurchasePastItsExpiryReadsExpired: before Stripe's expired event arrives, a
// pending purchase past its expiry reads as expired, and no longer counts as an open checkout.
func TestPendingPurchasePastItsExpiryReadsExpired(t *testing.T) {
	t.Parallel()
	s := setupShop(t, nil)
	p := s.buy(t, 2000)
	ctx := context.Background()

	s.clock.Advance(CheckoutExpiry - time.Second)
	if got, err := s.credits.Purchase(ctx, s.org, p.ID); err != nil || got.Status != PurchasePending {
		t.Fatalf("a second before expiry: %+v, %v; want pending", got, err)
	}
	s.clock.Advance(time.Second)
	list, err := s.credits.Purchases(ctx, s.org, 10)
	if err != nil || len(list) != 1 || list[0].Status != PurchaseExpired {
		t.Fatalf("at expiry: %+v, %v; want one expired", list, err)
	}
	// The row itself waits for Stripe's event, which still marks it once.
	if row := purchaseRow(t, s.pool, p.ID); row.Status != PurchasePending {
		t.Fatalf("row = %+v, want pending until the event", row)
	}
	if got := deliver(t, s.webhook, CheckoutEvent("evt_exp", "checkout.session.expired", p, "unpaid", "", testNow)); got != "expired unpaid" {
		t.Fatalf("session expired: outcome %q", got)
	}
}
