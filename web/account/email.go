package account

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// The links e-mailed to a user: setting a new password, and proving the address given at sign-up
// (docs/email.md).

func (s *Server) forgotPage(c echo.Context) error {
	return s.Render(c, http.StatusOK, templates.ForgotPassword(templates.AuthPage{Page: s.Page(c, "Forgot your password?")}, false))
}

// forgotSubmit answers the same whether or not the address has an account.
func (s *Server) forgotSubmit(c echo.Context) error {
	email := c.FormValue("email")
	err := s.Accounts.RequestPasswordReset(c.Request().Context(), email, c.RealIP())
	form := templates.Form{Values: map[string]string{"email": email}}
	page := templates.AuthPage{Page: s.Page(c, "Forgot your password?")}
	if err != nil {
		switch services.ErrorCode(err) {
		case services.CodeInvalid, services.CodeRateLimited, services.CodeUnavailable:
			status, body := s.Describe(err)
			page.Form = templates.Form{Values: form.Values, Errors: body.Fields, Error: body.Message}
			return s.Render(c, status, templates.ForgotPassword(page, false))
		}
		return err
	}
	page.Form = form
	return s.Render(c, http.StatusOK, templates.ForgotPassword(page, true))
}

func (s *Server) resetPage(c echo.Context) error {
	token := c.QueryParam("token")
	err := s.Accounts.PasswordResetValid(c.Request().Context(), token)
	if err != nil && services.ErrorCode(err) != services.CodeNotFound {
		return err
	}
	// The token is in the address: keep it out of the Referer of anything the page loads.
	c.Response().Header().Set("Referrer-Policy", "no-referrer")
	return s.Render(c, http.StatusOK, templates.ResetPassword(templates.AuthPage{Page: s.Page(c, "Set a new password")}, token, err == nil))
}

func (s *Server) resetSubmit(c echo.Context) error {
	token := c.FormValue("token")
	sess, err := s.Accounts.ResetPassword(c.Request().Context(), token, c.FormValue("password"))
	switch services.ErrorCode(err) {
	case "":
	case services.CodeNotFound:
		return s.Render(c, http.StatusGone, templates.ResetPassword(templates.AuthPage{Page: s.Page(c, "Set a new password")}, "", false))
	case services.CodeInvalid, services.CodeUnavailable:
		return s.FormError(c, err, func(f templates.Form) error {
			return s.Render(c, core.StatusFor(err), templates.ResetPassword(templates.AuthPage{Page: s.Page(c, "Set a new password"), Form: f}, token, true))
		})
	default:
		return err
	}
	s.SetSessionCookie(c, sess)
	return c.Redirect(http.StatusSeeOther, core.HomePath+"?flash=password-set")
}

func (s *Server) verifyEmail(c echo.Context) error {
	c.Response().Header().Set("Referrer-Policy", "no-referrer")
	_, err := s.Accounts.VerifyEmail(c.Request().Context(), c.QueryParam("token"))
	if services.ErrorCode(err) == services.CodeNotFound {
		return s.Render(c, http.StatusGone, templates.VerifyEmailFailed(s.Page(c, "Confirm your e-mail address")))
	}
	if err != nil {
		return err
	}
	next := "/?flash=email-verified"
	if _, ok := core.CurrentSession(c); ok {
		next = core.HomePath + "?flash=email-verified"
	}
	return c.Redirect(http.StatusSeeOther, next)
}

func (s *Server) verifyResend(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	if err := s.Accounts.ResendVerification(c.Request().Context(), sess.User.ID); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, core.HomePath+"?flash=verify-sent")
}
