package core

import (
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/payouts"
	"github.com/gpumarket/gpumarket/templates"
)

// Payments wires credits and the Stripe webhook into the web server.
type Payments struct {
	Credits *credits.Credits
	Ledger  *ledger.Ledger
	Webhook *credits.StripeWebhook
	// Topups is auto top-up: a saved card charged when the balance falls below the customer's
	// threshold; nil hides it.
	Topups *credits.AutoTopup
	// Payouts connects providers' Stripe accounts and pays their statements (web/provider, web/ledger).
	Payouts *payouts.Service
	// LocalWebhookSecret, when set, turns on the local test-payment page, which signs its
	// events with it: the platform runs on stripe-mock and no card is ever charged.
	LocalWebhookSecret string
	// PublicURL is where buyers come back to; empty means the request's own scheme and host.
	PublicURL string
	// CheckoutOrigins are the origins of the Stripe pages forms send people to, such as
	// https://checkout.stripe.com for the buy form and https://connect.stripe.com for a
	// provider's onboarding: the pages' CSP lets forms be redirected there.
	CheckoutOrigins []string
}

// TestMode reports whether payments run on the local test page: every page then says so.
func (p Payments) TestMode() bool { return p.LocalWebhookSecret != "" }

// AllowsCheckout reports whether the pages' CSP lets the buy form redirect to the URL: a path
// on this site, the site's own origin as the request or PublicURL names it, or one of the
// payment pages' origins.
func (p Payments) AllowsCheckout(checkoutURL, requestOrigin string) bool {
	u, err := url.Parse(checkoutURL)
	if err != nil {
		return false
	}
	if u.Scheme == "" && u.Host == "" && strings.HasPrefix(u.Path, "/") && !strings.HasPrefix(u.Path, "//") {
		return true
	}
	origin := u.Scheme + "://" + u.Host
	if origin == requestOrigin || slices.Contains(p.CheckoutOrigins, origin) {
		return true
	}
	public, err := url.Parse(p.PublicURL)
	return err == nil && p.PublicURL != "" && origin == public.Scheme+"://"+public.Host
}

// BaseURL is the platform as the caller reaches it: Payments.PublicURL, else the request's own
// scheme and host.
func (s *Core) BaseURL(c echo.Context) string {
	if s.Payments.PublicURL != "" {
		return s.Payments.PublicURL
	}
	return c.Scheme() + "://" + c.Request().Host
}

// PayoutsService is the payouts service, or an unavailable error where this server has none.
func (s *Core) PayoutsService() (*payouts.Service, error) {
	if s.Payments.Payouts == nil {
		return nil, services.Errorf(services.CodeUnavailable, "Payouts are not available on this server.")
	}
	return s.Payments.Payouts, nil
}

// PayoutRow is a payout as the provider's and finance's tables show it.
func PayoutRow(loc *time.Location, p payouts.Payout) templates.PayoutRow {
	r := templates.PayoutRow{ID: p.ID, Provider: p.ProviderName, Statement: p.StatementNumber, StatementID: p.StatementID,
		Period: p.Period, Amount: CentsText(p.AmountCents), Status: string(p.Status), Attempts: p.Attempts, Error: p.LastError,
		Transfer: p.StripeTransferID, Created: MomentIn(loc, p.CreatedAt, ToMinute), InDoubt: p.InDoubt}
	if p.PaidAt != nil {
		r.Paid = MomentIn(loc, *p.PaidAt, ToMinute)
	}
	for _, a := range p.Actions {
		r.CanRetry = r.CanRetry || a == payouts.ActionRetry
	}
	return r
}
