package payouts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stripe/stripe-go/v76"

	"github.com/gpumarket/gpumarket/services"
)

// Connected account states, as pages and the API name them.
const (
	AccountNotConnected = "not_connected" // no Stripe account yet
	AccountOnboarding   = "onboarding"    // created; Stripe does not yet let it receive payouts
	AccountComplete     = "complete"      // details submitted and payouts enabled
)

// ConnectedAccount is a provider's Stripe account as the platform last heard of it.
type ConnectedAccount struct {
	ProviderAccountID string     `json:"provider_account_id"`
	StripeAccountID   string     `json:"stripe_account_id"` // "" until Stripe created it
	Email             string     `json:"email"`
	Country           string     `json:"country"`
	DetailsSubmitted  bool       `json:"details_submitted"`
	PayoutsEnabled    bool       `json:"payouts_enabled"`
	State             string     `json:"state"`
	ObservedAt        *time.Time `json:"observed_at,omitempty"`  // when Stripe's description recorded was current
	OnboardedAt       *time.Time `json:"onboarded_at,omitempty"` // when it was first complete
	LastError         string     `json:"last_error,omitempty"`   // why the last creation failed
	CreatedAt         time.Time  `json:"created_at"`
	UpdatedAt         time.Time  `json:"updated_at"`
}

func stateName(stripeAccountID string, detailsSubmitted, payoutsEnabled bool) string {
	switch {
	case stripeAccountID == "":
		return AccountNotConnected
	case detailsSubmitted && payoutsEnabled:
		return AccountComplete
	}
	return AccountOnboarding
}

// How long a second click on "connect" waits for the first one's creation at Stripe, and after
// how long a creation that never finished (a crash) no longer holds the next one back. The
// lease outlasts the Stripe client's worst case: three tries of 20 s each.
const (
	creationWait  = 15 * time.Second
	creationLease = 2 * time.Minute
)

// ConnectInput starts or continues a provider's onboarding.
type ConnectInput struct {
	ProviderAccountID string
	Email             string // the provider user's, handed to Stripe for the account
	Country           string // ISO 3166-1 alpha-2; Stripe fixes it when it creates the account
	RefreshURL        string // absolute: Stripe sends the provider there when a link expired
	ReturnURL         string // absolute: Stripe sends the provider back there
}

// Validate checks the input without the database or Stripe.
func (in ConnectInput) Validate() error {
	fe := services.FieldErrors{}
	if !uuidPattern.MatchString(in.ProviderAccountID) {
		fe.Add("provider_account_id", "Not an account id.")
	}
	if e := strings.TrimSpace(in.Email); len(e) < 3 || len(e) > 320 || !strings.Contains(e, "@") {
		fe.Add("email", "An email address is needed for the Stripe account.")
	}
	if !countryPattern.MatchString(in.Country) {
		fe.Add("country", "Enter the country as two capital letters, like US, DE or FR.")
	}
	for field, u := range map[string]string{"refresh_url": in.RefreshURL, "return_url": in.ReturnURL} {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
			fe.Add(field, "An absolute http(s) URL is needed.")
		}
	}
	return fe.Err()
}

const accountColumns = `provider_account_id::text, coalesce(stripe_account_id, ''), email, country, details_submitted,
	payouts_enabled, observed_at, onboarded_at, last_error, created_at, updated_at`

func scanAccount(row pgx.Row) (ConnectedAccount, error) {
	var a ConnectedAccount
	err := row.Scan(&a.ProviderAccountID, &a.StripeAccountID, &a.Email, &a.Country, &a.DetailsSubmitted,
		&a.PayoutsEnabled, &a.ObservedAt, &a.OnboardedAt, &a.LastError, &a.CreatedAt, &a.UpdatedAt)
	a.State = stateName(a.StripeAccountID, a.DetailsSubmitted, a.PayoutsEnabled)
	return a, err
}

// Account returns the provider's connected account. A provider that never started connecting
// has one in the state not_connected, with only its id set.
func (s *Service) Account(ctx context.Context, providerAccountID string) (_ ConnectedAccount, err error) {
	defer services.Wrap(&err, "payouts.Account(%s)", providerAccountID)
	if !uuidPattern.MatchString(providerAccountID) {
		return ConnectedAccount{}, services.Errorf(services.CodeNotFound, "No such provider.")
	}
	a, err := scanAccount(s.pool.QueryRow(ctx, `SELECT `+accountColumns+`
		FROM provider_stripe_accounts WHERE provider_account_id = $1`, providerAccountID))
	if errors.Is(err, pgx.ErrNoRows) {
		return ConnectedAccount{ProviderAccountID: providerAccountID, State: AccountNotConnected}, nil
	}
	return a, err
}

// Connect creates the provider's connected account at Stripe the first time it is asked, and
// returns a link into Stripe's onboarding for it. However often a provider clicks, one account
// is created: the row is claimed before Stripe is called, a click while the creation runs
// waits for it, and the creation carries an idempotency key (docs/payouts.md, "Connecting a
// Stripe account").
func (s *Service) Connect(ctx context.Context, in ConnectInput) (_ ConnectedAccount, _ AccountLink, err error) {
	defer services.Wrap(&err, "payouts.Connect(%s)", in.ProviderAccountID)
	in.Email = strings.ToLower(strings.TrimSpace(in.Email))
	in.Country = strings.ToUpper(strings.TrimSpace(in.Country))
	if err := in.Validate(); err != nil {
		return ConnectedAccount{}, AccountLink{}, err
	}
	a, err := s.ensureAccount(ctx, in)
	if err != nil {
		return ConnectedAccount{}, AccountLink{}, err
	}
	link, err := s.link(ctx, a, in.RefreshURL, in.ReturnURL)
	return a, link, err
}

// OnboardingLink returns a new link into onboarding for a provider whose account exists: what
// Stripe's refresh URL asks for when a link has expired or was used. It never creates an
// account.
func (s *Service) OnboardingLink(ctx context.Context, providerAccountID, refreshURL, returnURL string) (_ AccountLink, err error) {
	defer services.Wrap(&err, "payouts.OnboardingLink(%s)", providerAccountID)
	a, err := s.Account(ctx, providerAccountID)
	if err != nil {
		return AccountLink{}, err
	}
	if a.StripeAccountID == "" {
		return AccountLink{}, errNotConnected
	}
	return s.link(ctx, a, refreshURL, returnURL)
}

var errNotConnected = services.Errorf(services.CodeNotFound, "No Stripe account is connected yet: connect one first.")

func (s *Service) link(ctx context.Context, a ConnectedAccount, refreshURL, returnURL string) (AccountLink, error) {
	link, err := s.stripe.CreateAccountLink(ctx, AccountLinkRequest{StripeAccountID: a.StripeAccountID,
		RefreshURL: refreshURL, ReturnURL: returnURL})
	if err != nil {
		return AccountLink{}, &services.Error{Code: services.CodeUnavailable,
			Message: "Stripe did not give a link to its onboarding. Please try again in a moment.", Cause: err}
	}
	return link, nil
}

// ensureAccount returns the provider's account once Stripe has created it, creating it when no
// one has.
func (s *Service) ensureAccount(ctx context.Context, in ConnectInput) (ConnectedAccount, error) {
	deadline := time.NewTimer(creationWait)
	defer deadline.Stop()
	poll := time.NewTicker(200 * time.Millisecond)
	defer poll.Stop()
	for {
		a, claimed, err := s.claimCreation(ctx, in)
		if err != nil || a.StripeAccountID != "" {
			return a, err
		}
		if claimed {
			return s.create(ctx, in)
		}
		select {
		case <-ctx.Done():
			return ConnectedAccount{}, ctx.Err()
		case <-deadline.C:
			return ConnectedAccount{}, services.Errorf(services.CodeConflict,
				"Your Stripe account is still being set up. Please try again in a moment.")
		case <-poll.C:
		}
	}
}

// claimCreation reads the provider's account row, making it on first use, and claims the
// creation at Stripe when the account does not exist and no other request is creating it.
// Details given before the account exists (a corrected country) replace the earlier ones.
func (s *Service) claimCreation(ctx context.Context, in ConnectInput) (a ConnectedAccount, claimed bool, err error) {
	now := s.now().UTC()
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
			INSERT INTO provider_stripe_accounts (provider_account_id, email, country, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $4)
			ON CONFLICT (provider_account_id) DO NOTHING`, in.ProviderAccountID, in.Email, in.Country, now); err != nil {
			return err
		}
		var creatingSince *time.Time
		if err := tx.QueryRow(ctx, `SELECT creating_since FROM provider_stripe_accounts
			WHERE provider_account_id = $1 FOR UPDATE`, in.ProviderAccountID).Scan(&creatingSince); err != nil {
			return err
		}
		var err error
		if a, err = scanAccount(tx.QueryRow(ctx, `SELECT `+accountColumns+`
			FROM provider_stripe_accounts WHERE provider_account_id = $1`, in.ProviderAccountID)); err != nil {
			return err
		}
		if a.StripeAccountID != "" || (creatingSince != nil && now.Sub(*creatingSince) < creationLease) {
			return nil
		}
		claimed = true
		_, err = tx.Exec(ctx, `UPDATE provider_stripe_accounts SET creating_since = $2, email = $3, country = $4, updated_at = $2
			WHERE provider_account_id = $1`, in.ProviderAccountID, now, in.Email, in.Country)
		return err
	})
	return a, claimed, err
}

// create asks Stripe for the account and records it. It runs to its end even when the caller
// goes away, so that an account Stripe created is never left unrecorded.
func (s *Service) create(ctx context.Context, in ConnectInput) (ConnectedAccount, error) {
	ctx = context.WithoutCancel(ctx)
	state, err := s.stripe.CreateAccount(ctx, AccountRequest{ProviderAccountID: in.ProviderAccountID, Email: in.Email, Country: in.Country})
	now := s.now().UTC()
	if err != nil {
		if _, dbErr := s.pool.Exec(ctx, `UPDATE provider_stripe_accounts SET creating_since = NULL, last_error = $2, updated_at = $3
			WHERE provider_account_id = $1`, in.ProviderAccountID, clip(err.Error()), now); dbErr != nil {
			return ConnectedAccount{}, errors.Join(err, dbErr)
		}
		return ConnectedAccount{}, &services.Error{Code: services.CodeUnavailable,
			Message: "Stripe did not create your account, so nothing was set up. Check the country and try again.", Cause: err}
	}
	if !strings.HasPrefix(state.ID, "acct_") {
		return ConnectedAccount{}, fmt.Errorf("stripe created an account with the id %q", state.ID)
	}
	a, err := scanAccount(s.pool.QueryRow(ctx, `
		UPDATE provider_stripe_accounts SET stripe_account_id = $2, details_submitted = $3, payouts_enabled = $4,
			observed_at = $5, onboarded_at = CASE WHEN $3 AND $4 THEN $5::timestamptz END, creating_since = NULL, last_error = '', updated_at = $5
		WHERE provider_account_id = $1 AND stripe_account_id IS NULL
		RETURNING `+accountColumns, in.ProviderAccountID, state.ID, state.DetailsSubmitted, state.PayoutsEnabled, now.Truncate(time.Second)))
	if errors.Is(err, pgx.ErrNoRows) {
		// A creation that outlived its lease found the account recorded by the one after it
		// (Stripe answered both with the same account, by the idempotency key).
		return s.Account(ctx, in.ProviderAccountID)
	}
	return a, err
}

// Refresh asks Stripe for the provider's account as it is now and records it: the return from
// onboarding.
func (s *Service) Refresh(ctx context.Context, providerAccountID string) (_ ConnectedAccount, err error) {
	defer services.Wrap(&err, "payouts.Refresh(%s)", providerAccountID)
	a, err := s.Account(ctx, providerAccountID)
	if err != nil {
		return ConnectedAccount{}, err
	}
	if a.StripeAccountID == "" {
		return ConnectedAccount{}, errNotConnected
	}
	state, err := s.stripe.RetrieveAccount(ctx, a.StripeAccountID)
	if err != nil {
		return ConnectedAccount{}, &services.Error{Code: services.CodeUnavailable,
			Message: "Stripe did not say how your onboarding went. Reload this page in a moment.", Cause: err}
	}
	if state.ID != a.StripeAccountID {
		return ConnectedAccount{}, fmt.Errorf("stripe answered for account %q, asked for %q", state.ID, a.StripeAccountID)
	}
	return s.Observe(ctx, state, s.now())
}

// Observe records Stripe's description of a connected account, current as of observedAt.
// Everything that learns an account's state records it here: the return from onboarding
// (Refresh), the account.updated webhook (AccountUpdated), and in test mode the local
// onboarding page. A description older than the one recorded changes nothing, so that a late
// or repeated webhook never undoes a newer state. Times count in whole seconds, as Stripe's
// events do.
func (s *Service) Observe(ctx context.Context, state AccountState, observedAt time.Time) (_ ConnectedAccount, err error) {
	defer services.Wrap(&err, "payouts.Observe(%s)", state.ID)
	var a ConnectedAccount
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		a, _, err = s.observeTx(ctx, tx, state, observedAt)
		return err
	})
	return a, err
}

// observeTx is Observe inside the caller's transaction. It reports whether the description was
// recorded (false when it was older than the recorded one); an account that is no provider's
// is not found.
func (s *Service) observeTx(ctx context.Context, tx pgx.Tx, state AccountState, observedAt time.Time) (ConnectedAccount, bool, error) {
	at := observedAt.UTC().Truncate(time.Second)
	a, err := scanAccount(tx.QueryRow(ctx, `
		UPDATE provider_stripe_accounts SET details_submitted = $2, payouts_enabled = $3, observed_at = $4,
			onboarded_at = CASE WHEN onboarded_at IS NULL AND $2 AND $3 THEN $4 ELSE onboarded_at END, updated_at = $5
		WHERE stripe_account_id = $1 AND (observed_at IS NULL OR observed_at <= $4)
		RETURNING `+accountColumns, state.ID, state.DetailsSubmitted, state.PayoutsEnabled, at, s.now().UTC()))
	if err == nil {
		return a, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return ConnectedAccount{}, false, err
	}
	a, err = scanAccount(tx.QueryRow(ctx, `SELECT `+accountColumns+` FROM provider_stripe_accounts WHERE stripe_account_id = $1`, state.ID))
	if errors.Is(err, pgx.ErrNoRows) {
		return ConnectedAccount{}, false, services.Errorf(services.CodeNotFound, "No provider has the Stripe account %s.", state.ID)
	}
	return a, false, err
}

// accountObject is the part of a Stripe account object the webhook reads.
type accountObject struct {
	ID               string `json:"id"`
	Object           string `json:"object"`
	DetailsSubmitted bool   `json:"details_submitted"`
	PayoutsEnabled   bool   `json:"payouts_enabled"`
}

// AccountUpdated applies Stripe's account.updated event (a credits.EventHandler, handed to it
// with StripeWebhook.On), so that a finished onboarding is recorded even when the provider
// never comes back to the return page. The event has been verified by its signature; the
// account is found by the id the platform stored when it created it, never by anything else
// the event carries.
func (s *Service) AccountUpdated(ctx context.Context, tx pgx.Tx, ev stripe.Event) (string, error) {
	var obj accountObject
	if ev.Data == nil || json.Unmarshal(ev.Data.Raw, &obj) != nil || obj.Object != "account" || !strings.HasPrefix(obj.ID, "acct_") {
		return "unreadable account", nil
	}
	if ev.Account != "" && ev.Account != obj.ID {
		return fmt.Sprintf("event of account %s carries account %s; ignored", ev.Account, obj.ID), nil
	}
	a, recorded, err := s.observeTx(ctx, tx, AccountState{ID: obj.ID, DetailsSubmitted: obj.DetailsSubmitted,
		PayoutsEnabled: obj.PayoutsEnabled}, time.Unix(ev.Created, 0))
	switch {
	case services.ErrorCode(err) == services.CodeNotFound:
		return "account " + obj.ID + " is no provider's; ignored", nil
	case err != nil:
		return "", err
	case !recorded:
		return "older than the state recorded for " + obj.ID + "; ignored", nil
	}
	return fmt.Sprintf("account %s recorded: %s", obj.ID, a.State), nil
}
