package developer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

func (s *Server) startPurchase(c echo.Context, amountText string) (credits.Purchase, credits.CheckoutSession, error) {
	cents, err := credits.ParseAmountUSD(amountText)
	if err != nil {
		return credits.Purchase{}, credits.CheckoutSession{}, err
	}
	sess, _ := core.CurrentSession(c)
	base := s.BaseURL(c)
	p, checkout, err := s.Payments.Credits.Start(c.Request().Context(), credits.StartInput{
		AccountID: sess.User.AccountID, UserID: sess.User.ID, AmountCents: cents,
		ReturnURL: base + "/credits/return", CancelURL: base + "/credits",
	})
	if err == nil && s.Payments.TestMode() {
		// stripe-mock cannot host a payment page: the buyer pays on the local test page.
		checkout.URL = base + "/credits/test-pay/" + p.ID
	}
	return p, checkout, err
}

func (s *Server) creditsPage(c echo.Context) error {
	return s.renderCredits(c, http.StatusOK, templates.Form{Values: map[string]string{"amount_usd": "20"}})
}

// creditsForms are the credits page's two forms as submitted: buying credits, and auto
// top-up's settings (a zero Form shows the stored settings).
type creditsForms struct {
	buy, topup templates.Form
}

func (s *Server) renderCredits(c echo.Context, status int, form templates.Form) error {
	return s.renderCreditsPage(c, status, creditsForms{buy: form})
}

func (s *Server) renderCreditsPage(c echo.Context, status int, forms creditsForms) error {
	form := forms.buy
	if form.Values == nil {
		form.Values = map[string]string{"amount_usd": "20"}
	}
	ctx := c.Request().Context()
	sess, _ := core.CurrentSession(c)
	bal, err := s.Payments.Credits.Balance(ctx, sess.User.AccountID)
	if err != nil {
		return err
	}
	var before ledger.PostingID
	if v := c.QueryParam("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return services.Errorf(services.CodeNotFound, "No such page of history.")
		}
		before = ledger.PostingID(n)
	}
	hist, err := s.Payments.Credits.History(ctx, sess.User.AccountID, 20, before)
	if err != nil {
		return err
	}
	purchases, err := s.Payments.Credits.Purchases(ctx, sess.User.AccountID, 10)
	if err != nil {
		return err
	}
	p := templates.CreditsPage{Page: s.Page(c, "Credits"), Balance: money.FormatBigCents(bal.Pico), Negative: bal.Negative,
		Form: form, TestMode: s.Payments.TestMode()}
	for _, pu := range purchases {
		p.Purchases = append(p.Purchases, templates.PurchaseRow{ID: pu.ID, Amount: core.CentsText(pu.AmountCents),
			Status: purchaseStatusText(pu), Created: core.Moment(c, pu.CreatedAt)})
	}
	for _, h := range hist.Entries {
		p.History = append(p.History, templates.HistoryRow{When: core.Moment(c, h.OccurredAt),
			Kind: string(h.Kind), Memo: h.Memo, Amount: signedAmount(h.Amount), Negative: h.Amount.Sign() < 0})
	}
	if hist.Next != 0 {
		p.NextPage = "/credits?before=" + strconv.FormatInt(int64(hist.Next), 10)
	}
	if p.Topup, err = s.topupView(c, forms.topup); err != nil {
		return err
	}
	return s.Render(c, status, templates.Credits(p))
}

func (s *Server) checkoutSubmit(c echo.Context) error {
	_, sess, err := s.startPurchase(c, c.FormValue("amount_usd"))
	if err == nil && !s.Payments.AllowsCheckout(sess.URL, c.Scheme()+"://"+c.Request().Host) {
		// The browser would refuse the redirect (the CSP's form-action) and show nothing: say
		// what is wrong instead. The payment page's origin belongs in Payments.CheckoutOrigins.
		s.Log.Error("the payment page is on an origin the pages' CSP does not allow: the buy form cannot reach it",
			"checkout_url", core.Clip(sess.URL, 200), "allowed", s.Payments.CheckoutOrigins)
		err = services.Errorf(services.CodeUnavailable, "The payment page cannot be opened from here. Nothing was charged; please try again later.")
	}
	if err != nil {
		switch services.ErrorCode(err) {
		case services.CodeInvalid, services.CodeUnavailable, services.CodeConflict:
			_, body := s.Describe(err)
			return s.renderCredits(c, core.StatusFor(err), templates.Form{Values: map[string]string{"amount_usd": c.FormValue("amount_usd")},
				Errors: body.Fields, Error: body.Message})
		}
		return err
	}
	return c.Redirect(http.StatusSeeOther, sess.URL)
}

func (s *Server) purchaseReturnPage(c echo.Context) error {
	ctx := c.Request().Context()
	sess, _ := core.CurrentSession(c)
	p, err := s.Payments.Credits.Purchase(ctx, sess.User.AccountID, c.QueryParam("purchase"))
	if err != nil {
		return err
	}
	view := templates.PurchaseReturnPage{Page: s.Page(c, "Payment"), PurchaseID: p.ID, Amount: core.CentsText(p.AmountCents), Status: string(p.Status)}
	if p.Status == credits.PurchasePaid {
		bal, err := s.Payments.Credits.Balance(ctx, sess.User.AccountID)
		if err != nil {
			return err
		}
		view.Balance = money.FormatBigCents(bal.Pico)
	} else if p.Status != credits.PurchaseFailed && p.Status != credits.PurchaseExpired {
		c.Response().Header().Set("Refresh", "2")
	}
	return s.Render(c, http.StatusOK, templates.PurchaseReturn(view))
}

func (s *Server) testPaymentPage(c echo.Context) error {
	if !s.Payments.TestMode() {
		return echo.ErrNotFound
	}
	sess, _ := core.CurrentSession(c)
	p, err := s.Payments.Credits.Purchase(c.Request().Context(), sess.User.AccountID, c.Param("id"))
	if err != nil {
		return err
	}
	return s.Render(c, http.StatusOK, templates.TestPayment(templates.TestPaymentPage{Page: s.Page(c, "Test payment"),
		PurchaseID: p.ID, SessionID: p.StripeSessionID, Amount: core.CentsText(p.AmountCents), CancelURL: "/credits"}))
}

// testPaymentSubmit pays a purchase on the local test page: it sends a correctly signed
// checkout.session.completed event to the platform's own webhook endpoint, over HTTP, so the
// credit takes exactly the path a real Stripe payment takes.
func (s *Server) testPaymentSubmit(c echo.Context) error {
	if !s.Payments.TestMode() {
		return echo.ErrNotFound
	}
	sess, _ := core.CurrentSession(c)
	p, err := s.Payments.Credits.Purchase(c.Request().Context(), sess.User.AccountID, c.Param("id"))
	if err != nil {
		return err
	}
	now := s.Now()
	payload := credits.CheckoutEvent("evt_local_"+core.RandomHex(12), "checkout.session.completed", p, "paid",
		credits.LocalPaymentIntent(p.ID), now)
	if err := s.deliverWebhook(c.Request().Context(), payload, credits.SignEvent(payload, s.Payments.LocalWebhookSecret, now)); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/credits/return?purchase="+p.ID)
}

// deliverWebhook posts the event to the platform's own webhook route, in process: through the
// whole middleware stack and the same handler as Stripe's deliveries, and never to whatever
// host a request claimed to be.
func (s *Server) deliverWebhook(ctx context.Context, payload []byte, signature string) error {
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/webhooks/stripe", bytes.NewReader(payload))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Stripe-Signature", signature)
	rec := httptest.NewRecorder()
	s.echo.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return fmt.Errorf("test payment: webhook answered %d: %s", rec.Code, rec.Body.String())
	}
	return nil
}

// stripeWebhook verifies and applies a Stripe event. It reads the raw body and hands it on
// untouched: the signature is over those exact bytes.
func (s *Server) stripeWebhook(c echo.Context) error {
	payload, err := io.ReadAll(io.LimitReader(c.Request().Body, 1<<20))
	if err != nil {
		return err
	}
	outcome, err := s.Payments.Webhook.Handle(c.Request().Context(), payload, c.Request().Header.Get("Stripe-Signature"))
	if err == credits.ErrBadSignature {
		s.Log.Warn("stripe webhook refused: bad signature", "remote", c.RealIP())
		return c.JSON(http.StatusBadRequest, core.APIError{Error: core.APIErrorBody{Code: "bad_signature", Message: "The Stripe-Signature header does not verify."}})
	}
	if err != nil {
		return err
	}
	s.Log.Info("stripe webhook", "outcome", outcome)
	return c.JSON(http.StatusOK, map[string]string{"received": "true", "outcome": outcome})
}

// JSON API.

func (s *Server) apiCheckout(c echo.Context) error {
	var in struct {
		// A string or a number, read as its exact text, so that an unreadable or negative
		// amount is refused beside the field like one out of bounds.
		AmountUSD json.RawMessage `json:"amount_usd"`
	}
	if err := core.DecodeJSON(c, &in); err != nil {
		return err
	}
	p, sess, err := s.startPurchase(c, core.JSONText(in.AmountUSD))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, map[string]any{"id": p.ID, "url": sess.URL, "checkout_session_id": sess.ID,
		"amount_cents": p.AmountCents, "status": p.Status})
}

func (s *Server) apiPurchase(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	p, err := s.Payments.Credits.Purchase(c.Request().Context(), sess.User.AccountID, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, p)
}

func (s *Server) apiBalance(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	b, err := s.Payments.Credits.Balance(c.Request().Context(), sess.User.AccountID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"account_id": sess.User.AccountID, "balance_pico": b.Pico,
		"balance_usd": b.USD, "negative": b.Negative, "unit": "picodollar (1e-12 USD)"})
}

func (s *Server) apiHistory(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	limit, _ := strconv.Atoi(c.QueryParam("limit"))
	before, _ := strconv.ParseInt(c.QueryParam("before"), 10, 64)
	page, err := s.Payments.Credits.History(c.Request().Context(), sess.User.AccountID, limit, ledger.PostingID(before))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}

// signedAmount writes a movement of credit in cents with its sign: "+$20.00", "-$0.20"; a
// movement smaller than half a cent reads "$0.00", and its exact amount is in the JSON.
func signedAmount(p money.BigPico) string {
	s := money.FormatBigCents(p)
	if p.Sign() > 0 && s != "$0.00" {
		return "+" + s
	}
	return s
}

func purchaseStatusText(p credits.Purchase) string {
	switch {
	case p.RefundedCents == p.AmountCents && p.RefundedCents > 0:
		return "refunded"
	case p.RefundedCents > 0:
		return "partly refunded (" + core.CentsText(p.RefundedCents) + ")"
	case p.Status == credits.PurchaseAwaitingPayment:
		return "awaiting payment"
	}
	return string(p.Status)
}
