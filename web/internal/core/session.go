package core

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/httpx"
)

const (
	sessionCookie = "gpumarket_session"
	csrfCookie    = "gpumarket_csrf"
	sessionKey    = "session"
)

// Authenticate reads a bearer token or the session cookie and, when it proves a live
// session, puts the session on the context. It never refuses: routes decide what they need.
func (s *Core) Authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		token := bearerToken(c.Request())
		if token == "" {
			if ck, err := c.Cookie(sessionCookie); err == nil {
				token = ck.Value
			}
		}
		if token != "" {
			if sess, err := s.Accounts.Authenticate(c.Request().Context(), token); err == nil {
				c.Set(sessionKey, sess)
			} else if services.ErrorCode(err) != services.CodeUnauthorized {
				return err
			}
		}
		return next(c)
	}
}

func bearerToken(r *http.Request) string { return httpx.BearerToken(r) }

// CurrentSession returns the session on the context, if any.
func CurrentSession(c echo.Context) (accounts.Session, bool) {
	sess, ok := c.Get(sessionKey).(accounts.Session)
	return sess, ok
}

// requireAPI refuses API calls without a session (401) or that the rule does not allow (403).
func (s *Core) requireAPI(r rule) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			sess, ok := CurrentSession(c)
			if !ok {
				return services.Errorf(services.CodeUnauthorized, "Log in, or send a bearer token from POST /api/auth/login.")
			}
			if !r.allows(sess, c.Request().Method) {
				return services.Errorf(services.CodeForbidden, "Your role cannot do this.")
			}
			return next(c)
		}
	}
}

// requirePage sends anonymous visitors to the login page and refuses what the rule does not
// allow (403).
func (s *Core) requirePage(r rule) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			sess, ok := CurrentSession(c)
			if !ok {
				next := c.Request().URL.RequestURI()
				if c.Request().Method != http.MethodGet {
					next = "/"
				}
				return c.Redirect(http.StatusSeeOther, "/login?next="+url.QueryEscape(next))
			}
			if !r.allows(sess, c.Request().Method) {
				return services.Errorf(services.CodeForbidden, "Your role cannot open this page.")
			}
			return next(c)
		}
	}
}

// CSRF protects every state-changing request that a browser's cookies authenticate. Calls
// that carry a bearer token, and API calls with no session cookie, carry no ambient
// credentials for a forged request to ride on, so they are not checked.
func (s *Core) CSRF() echo.MiddlewareFunc {
	return middleware.CSRFWithConfig(middleware.CSRFConfig{
		TokenLookup:    "header:X-CSRF-Token,form:_csrf",
		CookieName:     csrfCookie,
		CookiePath:     "/",
		CookieHTTPOnly: true,
		CookieSameSite: http.SameSiteLaxMode,
		Skipper: func(c echo.Context) bool {
			r := c.Request()
			// Stripe's webhook carries no cookie and proves itself by its signature.
			if r.URL.Path == "/webhooks/stripe" {
				return true
			}
			// What a rig downloads takes no form and is the same for everyone: no cookie that would keep a
			// cache from sharing it.
			if strings.HasPrefix(r.URL.Path, "/downloads/") {
				return true
			}
			if bearerToken(r) != "" {
				return true
			}
			if strings.HasPrefix(r.URL.Path, "/api/") {
				_, err := r.Cookie(sessionCookie)
				return err != nil
			}
			return false
		},
		ErrorHandler: func(err error, c echo.Context) error {
			return services.Errorf(services.CodeForbidden, "This form has expired. Reload the page and try again.")
		},
	})
}

func csrfToken(c echo.Context) string {
	t, _ := c.Get("csrf").(string)
	return t
}

// SetSessionCookie gives the browser the session.
func (s *Core) SetSessionCookie(c echo.Context, sess accounts.Session) {
	c.SetCookie(&http.Cookie{
		Name: sessionCookie, Value: sess.Token, Path: "/", Expires: sess.ExpiresAt,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: c.Scheme() == "https",
	})
}

// ClearSessionCookie makes the browser forget its session.
func (s *Core) ClearSessionCookie(c echo.Context) {
	c.SetCookie(&http.Cookie{
		Name: sessionCookie, Value: "", Path: "/", Expires: time.Unix(0, 0), MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: c.Scheme() == "https",
	})
}

// Page fills the layout's view model for the request.
func (s *Core) Page(c echo.Context, title string) templates.Page {
	p := templates.Page{Title: title, CSRF: csrfToken(c), Path: c.Request().URL.Path, Flash: flashes[c.QueryParam("flash")],
		TestMode: s.Payments.TestMode()}
	sess, ok := CurrentSession(c)
	// A visitor's zero session may view what no rule guards.
	p.MayView = func(path string) bool { return MayView(sess, path) }
	if ok {
		p.User = &templates.User{Email: sess.User.Email, Role: string(sess.User.Role), AccountID: sess.User.AccountID,
			AccountName: sess.Account.Name, Member: string(sess.Member), EmailVerified: sess.User.EmailVerifiedAt != nil}
		// The account menu lists the login's accounts; a page still renders, without them, when they cannot be read.
		ms, err := s.Accounts.Memberships(c.Request().Context(), sess.User.ID)
		if err != nil {
			s.Log.Error("listing the login's accounts for the menu failed", "err", err)
		}
		for _, m := range ms {
			p.User.Accounts = append(p.User.Accounts, templates.AccountChoice{ID: m.Account.ID, Name: m.Account.Name,
				Kind: string(m.Account.Kind), Member: string(m.Role), Current: m.Account.ID == sess.Account.ID})
		}
	}
	return p
}

// flashes are the notices a redirect can ask a page to show, by key, so that a link cannot
// make the site say anything else.
var flashes = map[string]string{
	"signed-up":            "Welcome to gpumarket. Your account is ready.",
	"logged-out":           "You are logged out.",
	"password-set":         "Your new password is set, and every other session is logged out.",
	"email-verified":       "Your e-mail address is confirmed.",
	"verify-sent":          "We sent a new link to your e-mail address.",
	"listed":               "Your rig is listed.",
	"saved":                "Your changes are saved.",
	"paused":               "The rig is paused: it takes no traffic until you resume it.",
	"resumed":              "The rig is active again.",
	"delisted":             "The rig is delisted.",
	"bench-attached":       "Your benchmark is attached: the catalog shows it beside the offering as your own claim.",
	"bench-removed":        "Your benchmark is removed from the listing.",
	"rig-reissued":         "The rig has a new NATS password: its earlier one no longer works. Put the new one on the rig and restart its agent.",
	"role-set":             "The role is changed.",
	"discrepancy-resolved": "The discrepancy is marked resolved, with your note, and recorded in the audit log.",
	"adjusted":             "The adjustment is recorded.",
	"flag-released":        "The flag is resolved: the held earnings are paid on the provider's next statement.",
	"flag-clawback":        "The flag is resolved: the earnings are taken back from the provider and the customer is credited.",
	"price-scheduled":      "The price change is scheduled.",
	"key-revoked":          "The API key is revoked: calls with it are refused from now on.",
	"key-limit-set":        "The key's monthly limit is changed: the gateway applies it from its next request.",
	// Batches (web/developer).
	"batch-started":    "The batch is started: its lines are checked first, then run at the batch tier.",
	"batch-cancelling": "The batch is cancelling: no more of its lines are sent, and those in flight finish.",

	// Payouts (web/provider, web/ledger).
	"onboarded":             "Your Stripe account is connected and can receive payouts.",
	"onboarding-unfinished": "Stripe cannot send payouts to your account yet: continue onboarding when you are ready.",
	"payout-paid":           "The payout is paid.",
	"payout-not-paid":       "The payout was not paid; its row says why.",

	// Members and invitations (web/account).
	"switched":           "You are now working in this account.",
	"member-role-set":    "The member's role is changed.",
	"member-removed":     "The member is removed: their sessions in this account ended and their API keys here were revoked.",
	"member-keys-moved":  "The member is removed: their sessions in this account ended and their API keys passed to the member you chose.",
	"invitation-revoked": "The invitation is revoked: its link no longer works.",
	"joined":             "Welcome: you are now a member of this account.",

	// Billing details (web/account).
	"billing-saved": "Your billing details are saved: documents issued from now on carry them.",
	// Webhooks (web/account).
	"webhook-enabled":   "The endpoint is enabled: events are sent to it again, and those waiting go now.",
	"webhook-disabled":  "The endpoint is disabled: no events are sent to it until you enable it.",
	"webhook-deleted":   "The endpoint is deleted, with its deliveries.",
	"webhook-test-sent": "A test event is on its way: its delivery is at the top of the list below.",
	"webhook-replayed":  "The delivery is sent again, with the same webhook-id.",
	// Finance's review of invoices and statements (web/finance).
	"approved":    "Approved: the document is numbered and issued.",
	"voided":      "Voided: the credit note and the regenerated draft are linked below.",
	"marked-paid": "The payment is recorded.",
}

// ProviderAccount is the account of the user the session is of.
func ProviderAccount(c echo.Context) string {
	sess, _ := CurrentSession(c)
	return sess.User.AccountID
}

// userID is the logged-in user's id: who takes a finance action.
func UserID(c echo.Context) string {
	sess, _ := CurrentSession(c)
	return sess.User.ID
}
