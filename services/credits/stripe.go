package credits

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/client"
)

// StripeCheckoutOrigin is where Stripe hosts the Checkout pages its sessions' URLs point to.
const StripeCheckoutOrigin = "https://checkout.stripe.com"

// StripeCheckout creates Checkout Sessions with stripe-go. Pointed at stripe-mock (no secret
// key configured), it makes the same calls.
type StripeCheckout struct {
	api *client.API
}

var _ Checkout = (*StripeCheckout)(nil)

// NewStripeCheckout returns a client for the Stripe API with the secret key; apiURL, when
// not empty, points it elsewhere (stripe-mock).
func NewStripeCheckout(secretKey, apiURL string) *StripeCheckout {
	return &StripeCheckout{api: NewStripeAPI(secretKey, apiURL)}
}

// NewStripeAPI returns the platform's client for the Stripe API with the secret key: a 20 s
// timeout, two retries of a request that got no answer (stripe-go sends each with its
// idempotency key again), and no logging. apiURL, when not empty, points it elsewhere
// (stripe-mock). Every part of the platform that calls Stripe builds its client here.
func NewStripeAPI(secretKey, apiURL string) *client.API {
	cfg := &stripe.BackendConfig{
		HTTPClient:        &http.Client{Timeout: 20 * time.Second},
		MaxNetworkRetries: stripe.Int64(2),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	}
	if apiURL != "" {
		cfg.URL = stripe.String(apiURL)
	}
	backends := &stripe.Backends{
		API:     stripe.GetBackendWithConfig(stripe.APIBackend, cfg),
		Connect: stripe.GetBackendWithConfig(stripe.ConnectBackend, cfg),
		Uploads: stripe.GetBackendWithConfig(stripe.UploadsBackend, cfg),
	}
	return client.New(secretKey, backends)
}

// CreateSession creates a one-off payment of the credits' amount. The purchase id travels as
// the idempotency key, in the session's metadata and in the payment intent's (so that charge
// and refund events name the purchase too).
func (s *StripeCheckout) CreateSession(ctx context.Context, req CheckoutRequest) (CheckoutSession, error) {
	meta := map[string]string{"purchase_id": req.PurchaseID, "account_id": req.AccountID}
	params := &stripe.CheckoutSessionParams{
		Mode:              stripe.String(string(stripe.CheckoutSessionModePayment)),
		ClientReferenceID: stripe.String(req.AccountID),
		SuccessURL:        stripe.String(req.SuccessURL),
		CancelURL:         stripe.String(req.CancelURL),
		LineItems: []*stripe.CheckoutSessionLineItemParams{{
			Quantity: stripe.Int64(1),
			PriceData: &stripe.CheckoutSessionLineItemPriceDataParams{
				Currency:   stripe.String(string(stripe.CurrencyUSD)),
				UnitAmount: stripe.Int64(req.AmountCents),
				ProductData: &stripe.CheckoutSessionLineItemPriceDataProductDataParams{
					Name: stripe.String(fmt.Sprintf("gpumarket API credits (%s)", formatCents(req.AmountCents))),
				},
			},
		}},
		Metadata:          meta,
		ExpiresAt:         stripe.Int64(req.ExpiresAt.Unix()),
		PaymentIntentData: &stripe.CheckoutSessionPaymentIntentDataParams{Metadata: meta},
	}
	params.Context = ctx
	params.SetIdempotencyKey("checkout-" + req.PurchaseID)
	sess, err := s.api.CheckoutSessions.New(params)
	if err != nil {
		return CheckoutSession{}, fmt.Errorf("stripe: create checkout session: %w", err)
	}
	return CheckoutSession{ID: sess.ID, URL: sess.URL}, nil
}
