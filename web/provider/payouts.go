package provider

import (
	"time"

	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/payouts"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// Where Stripe sends a provider from its onboarding: back (return), or for a fresh link when
// the one it was given expired (refresh). In test mode the local onboarding page stands in for
// Stripe's.
const (
	onboardingReturnPath  = "/provider/payouts/return"
	onboardingRefreshPath = "/provider/payouts/onboarding"
	testOnboardingPath    = "/provider/payouts/test-onboarding"
)

// onboardingURL is where the connect form sends the provider: Stripe's onboarding, or in test
// mode the local page, since stripe-mock hosts none.
func (s *Server) onboardingURL(c echo.Context, link payouts.AccountLink) string {
	if s.Payments.TestMode() {
		return s.BaseURL(c) + testOnboardingPath
	}
	return link.URL
}

func (s *Server) providerPayoutsPage(c echo.Context) error {
	return s.renderProviderPayouts(c, http.StatusOK, templates.Form{Values: map[string]string{"country": "US"}})
}

func (s *Server) renderProviderPayouts(c echo.Context, status int, form templates.Form) error {
	po, err := s.PayoutsService()
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	provider := core.ProviderAccount(c)
	a, err := po.Account(ctx, provider)
	if err != nil {
		return err
	}
	list, err := po.List(ctx, payouts.ListFilter{ProviderAccountID: provider})
	if err != nil {
		return err
	}
	p := templates.ProviderPayoutsPage{Page: s.Page(c, "Payouts"), Account: accountView(core.Zone(c), a), Form: form,
		TestMode: s.Payments.TestMode()}
	for _, o := range list {
		p.Payouts = append(p.Payouts, core.PayoutRow(core.Zone(c), o))
	}
	if p.Run, err = s.PayoutRunView(ctx, "", provider, "/provider/payouts"); err != nil {
		return err
	}
	if p.Run.Src != "" {
		p.Refresh = 5 // follow a payout under way without a script
	}
	return s.Render(c, status, templates.ProviderPayouts(p))
}

// payoutRunProgress is the progress block of the provider's own payouts of a period alone,
// which the page's script polls (docs/progress.md).
func (s *Server) payoutRunProgress(c echo.Context) error {
	v, err := s.PayoutRunView(c.Request().Context(), c.QueryParam("period"), core.ProviderAccount(c), "/provider/payouts")
	if err != nil {
		return err
	}
	return s.RenderProgress(c, v)
}

func accountView(loc *time.Location, a payouts.ConnectedAccount) templates.ConnectedAccountView {
	v := templates.ConnectedAccountView{State: a.State, StripeAccountID: a.StripeAccountID, Email: a.Email, Country: a.Country,
		LastError: a.LastError}
	if a.OnboardedAt != nil {
		v.OnboardedAt = core.MomentIn(loc, *a.OnboardedAt, core.ToMinute)
	}
	return v
}

// connectPayoutsSubmit creates the provider's Stripe account on its first click and sends the
// provider into Stripe's onboarding of it.
func (s *Server) connectPayoutsSubmit(c echo.Context) error {
	po, err := s.PayoutsService()
	if err != nil {
		return err
	}
	sess, _ := core.CurrentSession(c)
	base := s.BaseURL(c)
	_, link, err := po.Connect(c.Request().Context(), payouts.ConnectInput{ProviderAccountID: sess.User.AccountID,
		Email: sess.User.Email, Country: c.FormValue("country"),
		RefreshURL: base + onboardingRefreshPath, ReturnURL: base + onboardingReturnPath})
	target := ""
	if err == nil {
		target = s.onboardingURL(c, link)
		err = s.checkRedirect(c, target)
	}
	if err != nil {
		switch services.ErrorCode(err) {
		case services.CodeInvalid, services.CodeUnavailable, services.CodeConflict:
			_, body := s.Describe(err)
			return s.renderProviderPayouts(c, core.StatusFor(err), templates.Form{Values: core.Submitted(c, "country"),
				Errors: body.Fields, Error: body.Message})
		}
		return err
	}
	return c.Redirect(http.StatusSeeOther, target)
}

// checkRedirect refuses a redirect after a form post that the pages' CSP would block, with a
// message instead of a page the browser silently refuses to leave (see docs/web-security.md,
// "The buy form and the CSP").
func (s *Server) checkRedirect(c echo.Context, target string) error {
	if s.Payments.AllowsCheckout(target, c.Scheme()+"://"+c.Request().Host) {
		return nil
	}
	s.Log.Error("a form redirects to an origin the pages' CSP does not allow", "url", core.Clip(target, 200),
		"allowed", s.Payments.CheckoutOrigins)
	return services.Errorf(services.CodeUnavailable, "Stripe's page cannot be opened from here. Nothing was changed; please try again later.")
}

// onboardingRefresh is Stripe's refresh URL: the link expired or was used, so a new one is made
// for the provider's account. It never creates an account (a GET carries no CSRF token).
func (s *Server) onboardingRefresh(c echo.Context) error {
	po, err := s.PayoutsService()
	if err != nil {
		return err
	}
	base := s.BaseURL(c)
	link, err := po.OnboardingLink(c.Request().Context(), core.ProviderAccount(c), base+onboardingRefreshPath, base+onboardingReturnPath)
	if services.ErrorCode(err) == services.CodeNotFound {
		return c.Redirect(http.StatusSeeOther, "/provider/payouts")
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, s.onboardingURL(c, link))
}

// onboardingReturn is where Stripe sends the provider back: the account is read from Stripe and
// recorded.
func (s *Server) onboardingReturn(c echo.Context) error {
	po, err := s.PayoutsService()
	if err != nil {
		return err
	}
	a, err := po.Refresh(c.Request().Context(), core.ProviderAccount(c))
	if services.ErrorCode(err) == services.CodeNotFound {
		return c.Redirect(http.StatusSeeOther, "/provider/payouts")
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/provider/payouts?flash="+onboardingFlash(a))
}

func onboardingFlash(a payouts.ConnectedAccount) string {
	if a.State == payouts.AccountComplete {
		return "onboarded"
	}
	return "onboarding-unfinished"
}

// connectedAccount is the provider's account for the test onboarding page: it exists only in
// test mode, and only for a provider whose account was created.
func (s *Server) connectedAccount(c echo.Context) (*payouts.Service, payouts.ConnectedAccount, error) {
	po, err := s.PayoutsService()
	if err != nil || !s.Payments.TestMode() {
		return nil, payouts.ConnectedAccount{}, echo.ErrNotFound
	}
	a, err := po.Account(c.Request().Context(), core.ProviderAccount(c))
	if err == nil && a.StripeAccountID == "" {
		err = services.Errorf(services.CodeNotFound, "No Stripe account is connected yet: connect one on the Payouts page first.")
	}
	return po, a, err
}

func (s *Server) testOnboardingPage(c echo.Context) error {
	_, a, err := s.connectedAccount(c)
	if err != nil {
		return err
	}
	return s.Render(c, http.StatusOK, templates.TestOnboarding(templates.TestOnboardingPage{Page: s.Page(c, "Test onboarding"),
		StripeAccountID: a.StripeAccountID, Email: a.Email, Country: a.Country}))
}

// testOnboardingSubmit completes onboarding on the local page: it records the account as
// Stripe describes one that finished onboarding, through Observe, the call that records the
// return from Stripe's page and its account.updated webhook.
func (s *Server) testOnboardingSubmit(c echo.Context) error {
	po, a, err := s.connectedAccount(c)
	if err != nil {
		return err
	}
	a, err = po.Observe(c.Request().Context(), payouts.AccountState{ID: a.StripeAccountID, DetailsSubmitted: true, PayoutsEnabled: true}, s.Now())
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/provider/payouts?flash="+onboardingFlash(a))
}

func (s *Server) apiProviderPayouts(c echo.Context) error {
	po, err := s.PayoutsService()
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	provider := core.ProviderAccount(c)
	a, err := po.Account(ctx, provider)
	if err != nil {
		return err
	}
	list, err := po.List(ctx, payouts.ListFilter{ProviderAccountID: provider})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"account": a, "payouts": list, "count": len(list)})
}
