package payouts

import (
	"context"
	"fmt"
	"time"

	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/client"
)

// StripeConnectOrigin is where Stripe hosts Connect onboarding, the pages Account Links send
// providers to; the pages' CSP must let the connect form's redirect reach it.
const StripeConnectOrigin = "https://connect.stripe.com"

// AccountRequest asks Stripe for a provider's connected account.
type AccountRequest struct {
	ProviderAccountID string
	Email             string
	Country           string // ISO 3166-1 alpha-2, as Stripe takes it
}

// AccountState is what Stripe says of a connected account.
type AccountState struct {
	ID               string
	DetailsSubmitted bool // the provider finished Stripe's onboarding form
	PayoutsEnabled   bool // Stripe lets the account receive payouts
}

// AccountLinkRequest asks for a link into Stripe's onboarding of a connected account.
type AccountLinkRequest struct {
	StripeAccountID string
	RefreshURL      string // where Stripe sends the provider when the link has expired
	ReturnURL       string // where Stripe sends the provider back when they leave onboarding
}

// AccountLink is a single-use link into Stripe's onboarding.
type AccountLink struct {
	URL       string
	ExpiresAt time.Time
}

// TransferRequest is the transfer that pays one payout. Every field is fixed when the payout
// is first made, so every attempt sends Stripe the same request.
type TransferRequest struct {
	PayoutID          string
	StatementID       string
	StatementNumber   string
	Period            string
	ProviderAccountID string
	Destination       string // the provider's connected account
	AmountCents       int64  // US cents
}

// IdempotencyKey is the key every attempt to pay the statement sends: one statement, one
// transfer, however often it is asked for within Stripe's keys' lifetime (24 hours).
func (r TransferRequest) IdempotencyKey() string { return "payout-" + r.StatementID }

// TransferGroup names the statement on the transfer, so that an attempt after Stripe forgot
// the idempotency key still finds the transfer an earlier attempt made.
func (r TransferRequest) TransferGroup() string { return "statement-" + r.StatementID }

// Transfer is a Stripe Transfer as the platform reads it.
type Transfer struct {
	ID          string
	Destination string
	Group       string
	AmountCents int64
	Currency    string
}

// pays reports whether the transfer is the one the request asks for: to the same account, of
// the same amount in dollars, for the same statement.
func (t Transfer) pays(r TransferRequest) bool {
	return t.ID != "" && t.Destination == r.Destination && t.AmountCents == r.AmountCents &&
		t.Currency == string(stripe.CurrencyUSD) && t.Group == r.TransferGroup()
}

// Stripe is the part of Stripe's API that payouts calls. StripeConnect is the implementation;
// the same code talks to Stripe and to stripe-mock.
type Stripe interface {
	CreateAccount(ctx context.Context, req AccountRequest) (AccountState, error)
	RetrieveAccount(ctx context.Context, stripeAccountID string) (AccountState, error)
	CreateAccountLink(ctx context.Context, req AccountLinkRequest) (AccountLink, error)
	CreateTransfer(ctx context.Context, req TransferRequest) (Transfer, error)
	// FindTransfer looks for a transfer that pays the request, made by an earlier attempt.
	FindTransfer(ctx context.Context, req TransferRequest) (Transfer, bool, error)
}

// StripeConnect calls Stripe Connect with stripe-go (credits.NewStripeAPI builds the client).
type StripeConnect struct {
	api *client.API
}

var _ Stripe = (*StripeConnect)(nil)

// NewStripeConnect returns payouts' Stripe on the client.
func NewStripeConnect(api *client.API) *StripeConnect { return &StripeConnect{api: api} }

// CreateAccount creates an Express account for the provider, asking for the transfers
// capability (payouts arrive as transfers). The idempotency key names the provider and the
// country, so a retry after a lost answer gets the same account, and a corrected country is a
// new request rather than a refused one.
func (s *StripeConnect) CreateAccount(ctx context.Context, req AccountRequest) (AccountState, error) {
	params := &stripe.AccountParams{
		Type:    stripe.String(string(stripe.AccountTypeExpress)),
		Email:   stripe.String(req.Email),
		Country: stripe.String(req.Country),
		Capabilities: &stripe.AccountCapabilitiesParams{
			Transfers: &stripe.AccountCapabilitiesTransfersParams{Requested: stripe.Bool(true)},
		},
		Metadata: map[string]string{"provider_account_id": req.ProviderAccountID},
	}
	params.Context = ctx
	params.SetIdempotencyKey("connect-account-" + req.ProviderAccountID + "-" + req.Country)
	a, err := s.api.Accounts.New(params)
	if err != nil {
		return AccountState{}, fmt.Errorf("stripe: create connected account: %w", err)
	}
	return stateOf(a), nil
}

// RetrieveAccount reads a connected account as Stripe holds it now.
func (s *StripeConnect) RetrieveAccount(ctx context.Context, stripeAccountID string) (AccountState, error) {
	params := &stripe.AccountParams{}
	params.Context = ctx
	a, err := s.api.Accounts.GetByID(stripeAccountID, params)
	if err != nil {
		return AccountState{}, fmt.Errorf("stripe: retrieve account %s: %w", stripeAccountID, err)
	}
	return stateOf(a), nil
}

func stateOf(a *stripe.Account) AccountState {
	return AccountState{ID: a.ID, DetailsSubmitted: a.DetailsSubmitted, PayoutsEnabled: a.PayoutsEnabled}
}

// CreateAccountLink makes a link into onboarding. Links are single-use and short-lived, so
// each visit asks for a new one.
func (s *StripeConnect) CreateAccountLink(ctx context.Context, req AccountLinkRequest) (AccountLink, error) {
	params := &stripe.AccountLinkParams{
		Account:    stripe.String(req.StripeAccountID),
		Type:       stripe.String(string(stripe.AccountLinkTypeAccountOnboarding)),
		RefreshURL: stripe.String(req.RefreshURL),
		ReturnURL:  stripe.String(req.ReturnURL),
	}
	params.Context = ctx
	l, err := s.api.AccountLinks.New(params)
	if err != nil {
		return AccountLink{}, fmt.Errorf("stripe: create account link for %s: %w", req.StripeAccountID, err)
	}
	return AccountLink{URL: l.URL, ExpiresAt: time.Unix(l.ExpiresAt, 0).UTC()}, nil
}

// CreateTransfer sends the payout's amount to the provider's account, keyed by the statement.
func (s *StripeConnect) CreateTransfer(ctx context.Context, req TransferRequest) (Transfer, error) {
	params := &stripe.TransferParams{
		Amount:        stripe.Int64(req.AmountCents),
		Currency:      stripe.String(string(stripe.CurrencyUSD)),
		Destination:   stripe.String(req.Destination),
		TransferGroup: stripe.String(req.TransferGroup()),
		Description:   stripe.String(fmt.Sprintf("gpumarket statement %s (%s)", req.StatementNumber, req.Period)),
		Metadata: map[string]string{
			"payout_id": req.PayoutID, "statement_id": req.StatementID, "statement_number": req.StatementNumber,
			"period": req.Period, "provider_account_id": req.ProviderAccountID,
		},
	}
	params.Context = ctx
	params.SetIdempotencyKey(req.IdempotencyKey())
	t, err := s.api.Transfers.New(params)
	if err != nil {
		return Transfer{}, fmt.Errorf("stripe: create transfer for statement %s: %w", req.StatementID, err)
	}
	return transferOf(t), nil
}

// FindTransfer lists the transfers of the statement's group to the provider's account and
// returns the one that pays the request, if any.
func (s *StripeConnect) FindTransfer(ctx context.Context, req TransferRequest) (Transfer, bool, error) {
	params := &stripe.TransferListParams{Destination: stripe.String(req.Destination), TransferGroup: stripe.String(req.TransferGroup())}
	params.Context = ctx
	params.Limit = stripe.Int64(10)
	it := s.api.Transfers.List(params)
	for it.Next() {
		if t := transferOf(it.Transfer()); t.pays(req) {
			return t, true, nil
		}
	}
	if err := it.Err(); err != nil {
		return Transfer{}, false, fmt.Errorf("stripe: list transfers of statement %s: %w", req.StatementID, err)
	}
	return Transfer{}, false, nil
}

func transferOf(t *stripe.Transfer) Transfer {
	out := Transfer{ID: t.ID, Group: t.TransferGroup, AmountCents: t.Amount, Currency: string(t.Currency)}
	if t.Destination != nil {
		out.Destination = t.Destination.ID
	}
	return out
}
