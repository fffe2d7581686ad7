package account

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

func (s *Server) loginPage(c echo.Context) error {
	if _, ok := core.CurrentSession(c); ok {
		return c.Redirect(http.StatusSeeOther, core.HomePath)
	}
	return s.Render(c, http.StatusOK, templates.Login(templates.AuthPage{Page: s.Page(c, "Log in"), Next: safeNext(c.QueryParam("next"))}))
}

func (s *Server) loginSubmit(c echo.Context) error {
	in := accounts.LoginInput{Email: c.FormValue("email"), Password: c.FormValue("password"), ClientIP: c.RealIP()}
	next := safeNext(c.FormValue("next"))
	sess, err := s.Accounts.Login(c.Request().Context(), in)
	if code := services.ErrorCode(err); code == services.CodeUnauthorized || code == services.CodeRateLimited ||
		code == services.CodeUnavailable {
		status, body := s.Describe(err)
		form := templates.Form{Values: map[string]string{"email": in.Email}, Error: body.Message}
		return s.Render(c, status, templates.Login(templates.AuthPage{Page: s.Page(c, "Log in"), Form: form, Next: next}))
	}
	if err != nil {
		return err
	}
	s.SetSessionCookie(c, sess)
	if next == "" {
		next = core.HomePath
	}
	return c.Redirect(http.StatusSeeOther, next)
}

func (s *Server) signupPage(c echo.Context) error {
	form := templates.Form{Values: map[string]string{"role": c.QueryParam("role")}}
	return s.Render(c, http.StatusOK, templates.Signup(templates.AuthPage{Page: s.Page(c, "Sign up"), Form: form}))
}

func (s *Server) signupSubmit(c echo.Context) error {
	in := accounts.SignUpInput{Email: c.FormValue("email"), Password: c.FormValue("password"),
		Role: accounts.Role(c.FormValue("role")), AccountName: c.FormValue("account_name"), ClientIP: c.RealIP()}
	ctx := c.Request().Context()
	if _, err := s.Accounts.SignUp(ctx, in); err != nil {
		values := map[string]string{"email": in.Email, "role": string(in.Role), "account_name": in.AccountName}
		if code := services.ErrorCode(err); code == services.CodeRateLimited || code == services.CodeUnavailable {
			status, body := s.Describe(err)
			form := templates.Form{Values: values, Error: body.Message}
			return s.Render(c, status, templates.Signup(templates.AuthPage{Page: s.Page(c, "Sign up"), Form: form}))
		}
		return s.FormError(c, err, func(f templates.Form) error {
			f.Values = values
			return s.Render(c, core.StatusFor(err), templates.Signup(templates.AuthPage{Page: s.Page(c, "Sign up"), Form: f}))
		})
	}
	sess, err := s.Accounts.Login(ctx, accounts.LoginInput{Email: in.Email, Password: in.Password, ClientIP: c.RealIP()})
	if err != nil {
		return err
	}
	s.SetSessionCookie(c, sess)
	return c.Redirect(http.StatusSeeOther, core.HomePath+"?flash=signed-up")
}

func (s *Server) logoutSubmit(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	if err := s.Accounts.Logout(c.Request().Context(), sess.ID); err != nil {
		return err
	}
	s.ClearSessionCookie(c)
	return c.Redirect(http.StatusSeeOther, "/?flash=logged-out")
}

// safeNext keeps a post-login redirect on this site. Browsers drop tabs and newlines from a
// URL and read \ as /, so a next holding any of them could turn into "//elsewhere".
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\t\r\n") {
		return ""
	}
	return next
}

// JSON API.

func (s *Server) apiSignup(c echo.Context) error {
	var in accounts.SignUpInput
	if err := core.DecodeJSON(c, &in); err != nil {
		return err
	}
	in.ClientIP = c.RealIP()
	u, err := s.Accounts.SignUp(c.Request().Context(), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, u)
}

func (s *Server) apiLogin(c echo.Context) error {
	var in accounts.LoginInput
	if err := core.DecodeJSON(c, &in); err != nil {
		return err
	}
	in.ClientIP = c.RealIP()
	sess, err := s.Accounts.Login(c.Request().Context(), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{
		"token": sess.Token, "token_type": "Bearer", "expires_at": sess.ExpiresAt, "user": sess.User,
		"account": sess.Account, "member_role": sess.Member,
	})
}

func (s *Server) apiLogout(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	if err := s.Accounts.Logout(c.Request().Context(), sess.ID); err != nil {
		return err
	}
	s.ClearSessionCookie(c)
	return c.NoContent(http.StatusNoContent)
}

// apiMe is who the caller is, the account its session works in with its role there, and every
// account it belongs to.
func (s *Server) apiMe(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	ms, err := s.Accounts.Memberships(c.Request().Context(), sess.User.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"user": sess.User, "account_id": sess.User.AccountID,
		"account": sess.Account, "member_role": sess.Member, "memberships": ms})
}
