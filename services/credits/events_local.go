package credits

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/webhook"
)

// CheckoutEvent builds a Stripe event about a purchase's Checkout Session, as Stripe sends it,
// for the local test-payment page (no real Stripe) and for tests. paymentStatus is "paid" or
// "unpaid"; a checkout.session.expired event's session is expired.
func CheckoutEvent(eventID, eventType string, p Purchase, paymentStatus, paymentIntent string, at time.Time) []byte {
	status := "complete"
	if eventType == "checkout.session.expired" {
		status = "expired"
	}
	ev := map[string]any{
		"id": eventID, "object": "event", "api_version": stripe.APIVersion, "created": at.Unix(),
		"type": eventType, "livemode": false, "pending_webhooks": 1,
		"request": map[string]any{"id": nil, "idempotency_key": nil},
		"data": map[string]any{"object": map[string]any{
			"id": p.StripeSessionID, "object": "checkout.session", "mode": "payment", "status": status,
			"client_reference_id": p.AccountID, "amount_total": p.AmountCents, "currency": "usd",
			"payment_status": paymentStatus, "payment_intent": paymentIntent,
			"metadata": map[string]string{"purchase_id": p.ID, "account_id": p.AccountID},
		}},
	}
	b, _ := json.Marshal(ev)
	return b
}

// RefundEvent builds a charge.refunded event whose charge has refunded amountRefunded
// cents in all.
func RefundEvent(eventID string, p Purchase, paymentIntent string, amountRefunded int64, at time.Time) []byte {
	ev := map[string]any{
		"id": eventID, "object": "event", "api_version": stripe.APIVersion, "created": at.Unix(),
		"type": "charge.refunded", "livemode": false, "pending_webhooks": 1,
		"data": map[string]any{"object": map[string]any{
			"id": "ch_" + p.ID[:8], "object": "charge", "amount": p.AmountCents, "amount_refunded": amountRefunded,
			"currency": "usd", "refunded": amountRefunded == p.AmountCents, "payment_intent": paymentIntent,
			"metadata": map[string]string{"purchase_id": p.ID, "account_id": p.AccountID},
		}},
	}
	b, _ := json.Marshal(ev)
	return b
}

// SignEvent signs a payload as Stripe does, with stripe-go's test helper, at the given time.
func SignEvent(payload []byte, secret string, at time.Time) string {
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: secret, Timestamp: at})
	return signed.Header
}

// LocalPaymentIntent names the payment a test-payment page makes for a purchase.
func LocalPaymentIntent(purchaseID string) string { return fmt.Sprintf("pi_test_%s", purchaseID[:8]) }

// SetupSucceededEvent builds the setup_intent.succeeded event of a card saved for auto top-up
// on the account's customer, as Stripe sends it, for the local save-card page and for tests.
func SetupSucceededEvent(eventID, accountID, customerID, paymentMethodID string, at time.Time) []byte {
	ev := map[string]any{
		"id": eventID, "object": "event", "api_version": stripe.APIVersion, "created": at.Unix(),
		"type": "setup_intent.succeeded", "livemode": false, "pending_webhooks": 1,
		"data": map[string]any{"object": map[string]any{
			"id": "seti_" + eventID, "object": "setup_intent", "status": "succeeded", "usage": "off_session",
			"customer": customerID, "payment_method": paymentMethodID,
			"metadata": map[string]string{"account_id": accountID, "purpose": "auto_topup"},
		}},
	}
	b, _ := json.Marshal(ev)
	return b
}

// TopupIntentEvent builds a payment_intent.succeeded or payment_intent.payment_failed event
// for an auto top-up's charge, as Stripe sends it; a failed one carries a card_declined error
// with declineCode.
func TopupIntentEvent(eventID, eventType string, c TopupCharge, declineCode string, at time.Time) []byte {
	pi := map[string]any{
		"id": c.PaymentIntentID, "object": "payment_intent", "amount": c.AmountCents, "currency": "usd",
		"customer": c.CustomerID, "status": "succeeded", "amount_received": c.AmountCents,
		"metadata": map[string]string{"topup_attempt_id": c.AttemptID, "account_id": c.AccountID},
	}
	if eventType == "payment_intent.payment_failed" {
		pi["status"], pi["amount_received"] = "requires_payment_method", 0
		pi["last_payment_error"] = map[string]any{"type": "card_error", "code": "card_declined",
			"decline_code": declineCode, "message": "Your card was declined."}
	}
	ev := map[string]any{
		"id": eventID, "object": "event", "api_version": stripe.APIVersion, "created": at.Unix(),
		"type": eventType, "livemode": false, "pending_webhooks": 1,
		"data": map[string]any{"object": pi},
	}
	b, _ := json.Marshal(ev)
	return b
}
