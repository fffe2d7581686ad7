package developer

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// Auto top-up on the credits page and in JSON (docs/auto-topup.md): the saved card, and
// "when the balance falls below, add".

// topups is the auto top-up service, or a 404 where it does not run.
func (s *Server) topups() (*credits.AutoTopup, error) {
	if s.Payments.Topups == nil {
		return nil, echo.ErrNotFound
	}
	return s.Payments.Topups, nil
}

// topupView is the credits page's section; form, when it has values, is what was submitted.
func (s *Server) topupView(c echo.Context, form templates.Form) (*templates.TopupView, error) {
	if s.Payments.Topups == nil {
		return nil, nil
	}
	ctx := c.Request().Context()
	sess, _ := core.CurrentSession(c)
	set, err := s.Payments.Topups.Settings(ctx, sess.User.AccountID)
	if err != nil {
		return nil, err
	}
	attempts, err := s.Payments.Topups.Attempts(ctx, sess.User.AccountID, 5)
	if err != nil {
		return nil, err
	}
	v := &templates.TopupView{Enabled: set.Enabled, Stopped: set.StoppedReason, Form: form}
	if set.Card != nil {
		v.Card = cardText(*set.Card)
	}
	if set.StoppedAt != nil {
		v.StoppedAt = core.Moment(c, *set.StoppedAt)
	}
	if p := set.Pending; p != nil {
		v.Pending = "A top-up of " + core.CentsText(p.AmountCents) + " started " + core.Moment(c, p.CreatedAt) +
			" is waiting for the payment provider's confirmation. No other top-up is charged until it is settled."
	}
	if form.Values == nil {
		v.Form.Values = map[string]string{"topup_threshold_usd": dollarsText(set.ThresholdCents),
			"topup_amount_usd": dollarsText(set.AmountCents)}
		if set.Enabled {
			v.Form.Values["topup_enabled"] = "on"
		}
	}
	for _, a := range attempts {
		status := string(a.Status)
		switch a.Status {
		case credits.AttemptCreated, credits.AttemptPending:
			status = "waiting for confirmation"
		case credits.AttemptSucceeded:
			status = "added"
		case credits.AttemptFailed:
			status = "failed: " + a.Failure
		case credits.AttemptUnanswered:
			status = "no answer: " + a.Failure
		}
		v.Attempts = append(v.Attempts, templates.TopupAttemptRow{When: core.Moment(c, a.CreatedAt),
			Amount: core.CentsText(a.AmountCents), Status: status})
	}
	return v, nil
}

func cardText(c credits.SavedCard) string {
	if c.Last4 == "" {
		return "Card " + c.PaymentMethodID
	}
	brand := "Card"
	if c.Brand != "" {
		brand = strings.ToUpper(c.Brand[:1]) + c.Brand[1:]
	}
	return brand + " ending " + c.Last4
}

// dollarsText writes cents as the form's dollars: "20.00".
func dollarsText(cents int64) string { return strings.TrimPrefix(core.CentsText(cents), "$") }

// topupInput reads the settings from their text, as the form and the JSON give them.
func topupInput(c echo.Context, enabled bool, threshold, amount string) (credits.SettingsInput, error) {
	sess, _ := core.CurrentSession(c)
	in := credits.SettingsInput{AccountID: sess.User.AccountID, Email: sess.User.Email, Enabled: enabled}
	fe := services.FieldErrors{}
	var err error
	// Each field's own problem, so that both are told at once.
	keep := func(err error) {
		var se *services.Error
		if errors.As(err, &se) {
			for k, v := range se.Fields {
				fe.Add(k, v)
			}
		}
	}
	if in.ThresholdCents, err = credits.ParseThresholdUSD(threshold); err != nil {
		keep(err)
	}
	if in.AmountCents, err = credits.ParseTopupUSD(amount); err != nil {
		keep(err)
	}
	if len(fe) > 0 {
		// The bounds of a field that was read (a parse error is kept first).
		keep(in.Validate())
	}
	return in, fe.Err()
}

func (s *Server) topupSubmit(c echo.Context) error {
	t, err := s.topups()
	if err != nil {
		return err
	}
	in, err := topupInput(c, c.FormValue("topup_enabled") != "", c.FormValue("topup_threshold_usd"), c.FormValue("topup_amount_usd"))
	if err == nil {
		_, err = t.Save(c.Request().Context(), in)
	}
	if err != nil {
		if services.ErrorCode(err) != services.CodeInvalid {
			return err
		}
		_, body := s.Describe(err)
		form := templates.Form{Values: map[string]string{"topup_threshold_usd": c.FormValue("topup_threshold_usd"),
			"topup_amount_usd": c.FormValue("topup_amount_usd"), "topup_enabled": c.FormValue("topup_enabled")},
			Errors: map[string]string{}, Error: body.Message}
		for k, v := range body.Fields {
			form.Errors["topup_"+k] = v
		}
		if len(form.Errors) > 0 {
			form.Error = ""
		}
		return s.renderCreditsPage(c, core.StatusFor(err), creditsForms{topup: form})
	}
	return c.Redirect(http.StatusSeeOther, "/credits#auto-topup")
}

// startSaveCard opens the page that saves a card: Stripe Checkout in setup mode, or in test
// mode the local page that stands in for it.
func (s *Server) startSaveCard(c echo.Context) (string, error) {
	t, err := s.topups()
	if err != nil {
		return "", err
	}
	sess, _ := core.CurrentSession(c)
	base := s.BaseURL(c)
	page, err := t.StartSaveCard(c.Request().Context(), credits.SaveCardInput{AccountID: sess.User.AccountID,
		ReturnURL: base + "/credits?card=saved", CancelURL: base + "/credits", RandomPart: core.RandomHex(8)})
	if err != nil {
		return "", err
	}
	if s.Payments.TestMode() {
		return base + "/credits/test-card?session=" + page.ID, nil
	}
	if !s.Payments.AllowsCheckout(page.URL, c.Scheme()+"://"+c.Request().Host) {
		s.Log.Error("the save-card page is on an origin the pages' CSP does not allow", "url", core.Clip(page.URL, 200))
		return "", services.Errorf(services.CodeUnavailable, "The card page cannot be opened from here. Please try again later.")
	}
	return page.URL, nil
}

func (s *Server) saveCardSubmit(c echo.Context) error {
	url, err := s.startSaveCard(c)
	if err != nil {
		if services.ErrorCode(err) == services.CodeUnavailable {
			_, body := s.Describe(err)
			return s.renderCreditsPage(c, core.StatusFor(err), creditsForms{topup: templates.Form{Error: body.Message}})
		}
		return err
	}
	return c.Redirect(http.StatusSeeOther, url)
}

func (s *Server) removeCardSubmit(c echo.Context) error {
	t, err := s.topups()
	if err != nil {
		return err
	}
	sess, _ := core.CurrentSession(c)
	if err := t.RemoveCard(c.Request().Context(), sess.User.AccountID); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/credits#auto-topup")
}

func (s *Server) testSaveCardPage(c echo.Context) error {
	if !s.Payments.TestMode() || s.Payments.Topups == nil {
		return echo.ErrNotFound
	}
	return s.Render(c, http.StatusOK, templates.TestSaveCard(templates.TestPaymentPage{Page: s.Page(c, "Test card"),
		SessionID: c.QueryParam("session"), CancelURL: "/credits"}))
}

// testSaveCardSubmit saves the test card as Stripe would: a signed setup_intent.succeeded for
// the account's own Stripe customer, posted to the platform's own webhook.
func (s *Server) testSaveCardSubmit(c echo.Context) error {
	if !s.Payments.TestMode() || s.Payments.Topups == nil {
		return echo.ErrNotFound
	}
	ctx := c.Request().Context()
	sess, _ := core.CurrentSession(c)
	customer, err := s.Payments.Topups.EnsureCustomer(ctx, sess.User.AccountID)
	if err != nil {
		return err
	}
	now := s.Now()
	payload := credits.SetupSucceededEvent("evt_local_"+core.RandomHex(12), sess.User.AccountID, customer, "pm_card_visa", now)
	if err := s.deliverWebhook(ctx, payload, credits.SignEvent(payload, s.Payments.LocalWebhookSecret, now)); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/credits?card=saved#auto-topup")
}

// JSON API.

func (s *Server) apiTopup(c echo.Context) error {
	t, err := s.topups()
	if err != nil {
		return err
	}
	sess, _ := core.CurrentSession(c)
	set, err := t.Settings(c.Request().Context(), sess.User.AccountID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, set)
}

func (s *Server) apiPutTopup(c echo.Context) error {
	t, err := s.topups()
	if err != nil {
		return err
	}
	var body struct {
		Enabled      bool            `json:"enabled"`
		ThresholdUSD json.RawMessage `json:"threshold_usd"`
		AmountUSD    json.RawMessage `json:"amount_usd"`
	}
	if err := core.DecodeJSON(c, &body); err != nil {
		return err
	}
	in, err := topupInput(c, body.Enabled, core.JSONText(body.ThresholdUSD), core.JSONText(body.AmountUSD))
	if err != nil {
		return err
	}
	set, err := t.Save(c.Request().Context(), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, set)
}

func (s *Server) apiSaveCard(c echo.Context) error {
	url, err := s.startSaveCard(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, map[string]string{"url": url})
}

func (s *Server) apiRemoveCard(c echo.Context) error {
	t, err := s.topups()
	if err != nil {
		return err
	}
	sess, _ := core.CurrentSession(c)
	if err := t.RemoveCard(c.Request().Context(), sess.User.AccountID); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
