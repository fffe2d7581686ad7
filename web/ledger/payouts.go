package ledger

import (
	"context"
	"net/http"
	"slices"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/services/payouts"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// Every provider's payouts, for finance, and retrying a failed one (docs/payouts.md).

var payoutStatuses = []string{string(payouts.StatusPending), string(payouts.StatusPaid), string(payouts.StatusFailed)}

func (s *Server) financePayoutsPage(c echo.Context) error {
	po, err := s.PayoutsService()
	if err != nil {
		return err
	}
	status := c.QueryParam("status")
	list, err := po.List(c.Request().Context(), payouts.ListFilter{Status: payouts.Status(status)})
	if err != nil {
		return err
	}
	p := templates.FinancePayoutsPage{Page: s.Page(c, "Payouts"), Status: status, Statuses: payoutStatuses}
	for _, o := range list {
		p.Payouts = append(p.Payouts, core.PayoutRow(core.Zone(c), o))
	}
	if p.Run, err = s.PayoutRunView(c.Request().Context(), "", "", "/finance/payouts"); err != nil {
		return err
	}
	if p.Run.Src != "" {
		p.Refresh = 5 // follow a payout run under way without a script
	}
	return s.Render(c, http.StatusOK, templates.FinancePayouts(p))
}

// payoutRunProgress is the progress block of every provider's payouts of a period alone,
// which the page's script polls (docs/progress.md).
func (s *Server) payoutRunProgress(c echo.Context) error {
	v, err := s.PayoutRunView(c.Request().Context(), c.QueryParam("period"), "", "/finance/payouts")
	if err != nil {
		return err
	}
	return s.RenderProgress(c, v)
}

// retryPayoutSubmit retries a failed payout. Whatever the attempt's outcome, finance lands back
// on the list, where the payout's row says it; only an error of the request itself (no such
// payout) is an error page.
func (s *Server) retryPayoutSubmit(c echo.Context) error {
	po, err := s.PayoutsService()
	if err != nil {
		return err
	}
	before, err := po.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	conf := retryConfirmation(before)
	if !core.Confirmed(c, conf) {
		return s.AskToConfirm(c, "Retry a payout", conf)
	}
	p, err := po.Retry(retryContext(c), before.ID)
	switch {
	case err == nil && p.Status == payouts.StatusPaid:
		return c.Redirect(http.StatusSeeOther, "/finance/payouts?flash=payout-paid")
	case p.ID != "" && (err == nil || services.ErrorCode(err) == services.CodeConflict || services.ErrorCode(err) == services.CodeUnavailable):
		return c.Redirect(http.StatusSeeOther, "/finance/payouts?flash=payout-not-paid")
	}
	return err
}

// retryConfirmation says what a retry sends: a Stripe transfer of the payout's amount to its
// provider. It binds the payout's state, so a retry confirmed before the payout was paid (by
// this retry or another) is asked again, and a paid one offers nothing.
func retryConfirmation(p payouts.Payout) core.Confirmation {
	conf := core.Confirmation{ConfirmPage: templates.ConfirmPage{Title: "Retry the payout of statement " + p.StatementNumber,
		Action: "/finance/payouts/" + p.ID + "/retry", Back: "/finance/payouts"},
		Binds: []string{"retry payout", p.ID, string(p.Status), strconv.FormatInt(p.AmountCents, 10), strconv.Itoa(p.Attempts)}}
	if !slices.Contains(p.Actions, payouts.ActionRetry) {
		conf.Consequences = []string{"This payout is " + string(p.Status) + ": it cannot be retried now, and nothing is sent."}
		return conf
	}
	amount := core.CentsText(p.AmountCents)
	conf.Consequences = []string{
		"Retrying sends a Stripe transfer of " + amount + " to " + p.ProviderName + "'s connected Stripe account, at once, for statement " +
			p.StatementNumber + " (" + p.Period + ").",
		"It is sent with the payout's idempotency key: a transfer an earlier attempt already made is not made again.",
	}
	if p.LastError != "" {
		conf.Consequences = append(conf.Consequences, "The last attempt failed: "+p.LastError)
	}
	conf.Button = "Pay " + amount + " to " + p.ProviderName + " through Stripe"
	return conf
}

func (s *Server) apiFinancePayouts(c echo.Context) error {
	po, err := s.PayoutsService()
	if err != nil {
		return err
	}
	list, err := po.List(c.Request().Context(), payouts.ListFilter{Status: payouts.Status(c.QueryParam("status"))})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"payouts": list, "count": len(list)})
}

// apiRetryPayout retries a payout and answers with it: 200 when paid; a refusal is the error,
// with the payout's reason, as Pay returns it.
func (s *Server) apiRetryPayout(c echo.Context) error {
	po, err := s.PayoutsService()
	if err != nil {
		return err
	}
	p, err := po.Retry(retryContext(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, p)
}

// retryContext is the request's context naming the finance user who retries: the statement a
// retry pays is recorded paid by them (see docs/invoicing.md, "Paying statements").
func retryContext(c echo.Context) context.Context {
	sess, _ := core.CurrentSession(c)
	return invoicing.ActingAs(c.Request().Context(), sess.User.ID)
}
