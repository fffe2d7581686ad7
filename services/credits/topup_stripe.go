package credits

import (
	"context"
	"errors"
	"fmt"

	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/client"
)

// Cards saves a customer's card and charges it when the customer is away: the calls auto top-up
// makes to its payment provider. StripeCards is the implementation; the same code talks to
// Stripe and to stripe-mock.
type Cards interface {
	// EnsureCustomer returns the payment provider's customer for the account, creating it once:
	// the account id is the creation's idempotency key.
	EnsureCustomer(ctx context.Context, accountID string) (customerID string, err error)
	// StartSaveCard creates a hosted page where the customer saves a card for later charges.
	StartSaveCard(ctx context.Context, req SaveCardRequest) (CheckoutSession, error)
	// SetupIntent reads a SetupIntent: whether it succeeded, its customer and the card it saved.
	SetupIntent(ctx context.Context, id string) (SetupIntentInfo, error)
	// Card reads a saved card's brand and last four digits.
	Card(ctx context.Context, paymentMethodID string) (brand, last4 string, err error)
	// Forget detaches a card from its customer, so that it can never be charged again.
	Forget(ctx context.Context, paymentMethodID string) error
	// Charge charges a saved card off-session, confirmed at once. A decline or a charge that
	// needs the customer is a *ChargeRefused; any other error means the answer is unknown and
	// the same request (same idempotency key) may be sent again.
	Charge(ctx context.Context, req ChargeRequest) (ChargeResult, error)
}

// SaveCardRequest asks for a hosted page that saves a card on the account's customer.
type SaveCardRequest struct {
	AccountID, CustomerID string
	SuccessURL, CancelURL string
	// Key is the creation's idempotency key.
	Key string
}

// SetupIntentInfo is what the platform reads of a SetupIntent.
type SetupIntentInfo struct {
	ID              string
	Status          string // "succeeded" once the card is saved
	CustomerID      string // "" when it names none
	PaymentMethodID string // "" until a card is saved
}

// ChargeRequest is one auto top-up charge.
type ChargeRequest struct {
	AttemptID       string // the idempotency key's and the metadata's
	AccountID       string
	CustomerID      string
	PaymentMethodID string
	AmountCents     int64
}

// ChargeResult is the payment provider's answer to a charge it took: the PaymentIntent and its
// status ("succeeded", "processing", or "requires_action" when the bank wants the customer).
type ChargeResult struct {
	PaymentIntentID string
	Status          string
}

// ChargeRefused is a charge the payment provider refused for good: the card was declined or
// the bank wants the customer to authenticate. Sending it again would be refused again.
type ChargeRefused struct {
	PaymentIntentID string // "" when the answer named none
	Code            string // card_declined, authentication_required, ...
	DeclineCode     string // insufficient_funds, ...
	Message         string
}

func (e *ChargeRefused) Error() string {
	return fmt.Sprintf("charge refused: %s %s: %s", e.Code, e.DeclineCode, e.Message)
}

// ChargeKey is the idempotency key of an attempt's PaymentIntent: one per attempt, so that a
// charge sent again after a timeout or a restart is the same charge.
func ChargeKey(attemptID string) string { return "topup-" + attemptID }

// StripeCards makes auto top-up's calls with stripe-go.
type StripeCards struct {
	api *client.API
}

var _ Cards = (*StripeCards)(nil)

// NewStripeCards returns auto top-up's client for the Stripe API (NewStripeAPI).
func NewStripeCards(api *client.API) *StripeCards { return &StripeCards{api: api} }

// EnsureCustomer creates the account's Stripe customer, keyed by the account.
func (s *StripeCards) EnsureCustomer(ctx context.Context, accountID string) (string, error) {
	params := &stripe.CustomerParams{Metadata: map[string]string{"account_id": accountID}}
	params.Context = ctx
	params.SetIdempotencyKey("customer-" + accountID)
	c, err := s.api.Customers.New(params)
	if err != nil {
		return "", fmt.Errorf("stripe: create customer: %w", err)
	}
	return c.ID, nil
}

// StartSaveCard creates a Checkout Session in setup mode for the customer. The session and the
// SetupIntent it makes both carry the account in their metadata, so that either Stripe event
// saves the card: checkout.session.completed (mode setup) or setup_intent.succeeded.
func (s *StripeCards) StartSaveCard(ctx context.Context, req SaveCardRequest) (CheckoutSession, error) {
	meta := map[string]string{"account_id": req.AccountID, "purpose": "auto_topup"}
	params := &stripe.CheckoutSessionParams{
		Mode:               stripe.String(string(stripe.CheckoutSessionModeSetup)),
		Customer:           stripe.String(req.CustomerID),
		ClientReferenceID:  stripe.String(req.AccountID),
		PaymentMethodTypes: stripe.StringSlice([]string{"card"}),
		SuccessURL:         stripe.String(req.SuccessURL),
		CancelURL:          stripe.String(req.CancelURL),
		Metadata:           meta,
		SetupIntentData:    &stripe.CheckoutSessionSetupIntentDataParams{Metadata: meta},
	}
	params.Context = ctx
	params.SetIdempotencyKey(req.Key)
	sess, err := s.api.CheckoutSessions.New(params)
	if err != nil {
		return CheckoutSession{}, fmt.Errorf("stripe: create setup session: %w", err)
	}
	return CheckoutSession{ID: sess.ID, URL: sess.URL}, nil
}

// SetupIntent reads the SetupIntent a Checkout Session in setup mode made.
func (s *StripeCards) SetupIntent(ctx context.Context, id string) (SetupIntentInfo, error) {
	params := &stripe.SetupIntentParams{}
	params.Context = ctx
	si, err := s.api.SetupIntents.Get(id, params)
	if err != nil {
		return SetupIntentInfo{}, fmt.Errorf("stripe: read setup intent: %w", err)
	}
	info := SetupIntentInfo{ID: si.ID, Status: string(si.Status)}
	if si.Customer != nil {
		info.CustomerID = si.Customer.ID
	}
	if si.PaymentMethod != nil {
		info.PaymentMethodID = si.PaymentMethod.ID
	}
	return info, nil
}

// Card reads the card's brand and last four digits.
func (s *StripeCards) Card(ctx context.Context, paymentMethodID string) (string, string, error) {
	params := &stripe.PaymentMethodParams{}
	params.Context = ctx
	pm, err := s.api.PaymentMethods.Get(paymentMethodID, params)
	if err != nil {
		return "", "", fmt.Errorf("stripe: read payment method: %w", err)
	}
	if pm.Card == nil {
		return "", "", nil
	}
	return string(pm.Card.Brand), pm.Card.Last4, nil
}

// Forget detaches the card from its customer.
func (s *StripeCards) Forget(ctx context.Context, paymentMethodID string) error {
	params := &stripe.PaymentMethodDetachParams{}
	params.Context = ctx
	if _, err := s.api.PaymentMethods.Detach(paymentMethodID, params); err != nil {
		return fmt.Errorf("stripe: detach payment method: %w", err)
	}
	return nil
}

// Charge creates and confirms a PaymentIntent off-session on the saved card, keyed by the
// attempt.
func (s *StripeCards) Charge(ctx context.Context, req ChargeRequest) (ChargeResult, error) {
	meta := map[string]string{"topup_attempt_id": req.AttemptID, "account_id": req.AccountID}
	params := &stripe.PaymentIntentParams{
		Amount:        stripe.Int64(req.AmountCents),
		Currency:      stripe.String(string(stripe.CurrencyUSD)),
		Customer:      stripe.String(req.CustomerID),
		PaymentMethod: stripe.String(req.PaymentMethodID),
		OffSession:    stripe.Bool(true),
		Confirm:       stripe.Bool(true),
		Description:   stripe.String(fmt.Sprintf("gpumarket API credits, auto top-up (%s)", formatCents(req.AmountCents))),
		Metadata:      meta,
	}
	params.Context = ctx
	params.SetIdempotencyKey(ChargeKey(req.AttemptID))
	pi, err := s.api.PaymentIntents.New(params)
	var se *stripe.Error
	if errors.As(err, &se) && (se.Type == stripe.ErrorTypeCard || se.Code == stripe.ErrorCodeAuthenticationRequired) {
		refused := &ChargeRefused{Code: string(se.Code), DeclineCode: string(se.DeclineCode), Message: se.Msg}
		if se.PaymentIntent != nil {
			refused.PaymentIntentID = se.PaymentIntent.ID
		}
		return ChargeResult{}, refused
	}
	if err != nil {
		return ChargeResult{}, fmt.Errorf("stripe: create payment intent: %w", err)
	}
	return ChargeResult{PaymentIntentID: pi.ID, Status: string(pi.Status)}, nil
}
