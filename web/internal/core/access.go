package core

import (
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/accounts"
)

// rule says who may call the routes under a prefix.
type rule struct {
	prefix string
	// roles may call the routes; none means any signed-in user.
	roles []accounts.Role
}

var (
	developer         = []accounts.Role{accounts.RoleDeveloper}
	provider          = []accounts.Role{accounts.RoleProvider}
	finance           = []accounts.Role{accounts.RoleFinance, accounts.RoleAdmin}
	admin             = []accounts.Role{accounts.RoleAdmin}
	customerDocuments = []accounts.Role{accounts.RoleDeveloper, accounts.RoleFinance, accounts.RoleAdmin}
	providerDocuments = []accounts.Role{accounts.RoleProvider, accounts.RoleFinance, accounts.RoleAdmin}
	billed            = []accounts.Role{accounts.RoleDeveloper, accounts.RoleProvider}
)

// access is who may call each part of the site: the one table of role rules. A route is guarded
// by the rule whose prefix is the longest that begins its pattern as registered ("/invoices/:id"
// begins with "/invoices/" and "/invoices"; the first wins); a route no rule covers is public.
// A page's guard sends an anonymous visitor to log in and refuses another role (403); an API
// route's (under /api/) answers 401 and 403.
var access = []rule{
	// Anyone signed in: logging out, and who the caller is.
	{"/logout", nil},
	{"/api/auth/logout", nil},
	{"/verify-email/resend", nil},
	{"/api/me", nil},
	{"/settings/billing", billed},
	{"/api/settings/billing", billed},

	// A customer's own account (web/developer).
	{"/credits", developer},
	{"/api/credits/", developer},
	{"/api/balance", developer},
	{"/keys", developer},
	{"/api/keys", developer},
	{"/usage", developer},
	{"/api/usage", developer},
	{"/batches", developer},
	{"/reports", developer},
	{"/api/reports/", developer},
	{"/invoices", developer},
	{"/api/invoices", developer},

	// A provider's own account (web/provider).
	{"/provider", provider},
	{"/api/provider/", provider},

	// The documents (web/finance): a customer's own, a provider's own, and every one for finance.
	{"/invoices/", customerDocuments},
	{"/credit-notes/", customerDocuments},
	{"/api/invoices/:id/pdf", customerDocuments},
	{"/statements/", providerDocuments},

	// Finance (web/ledger, web/finance) and the administrators (web/admin).
	{"/finance", finance},
	{"/api/finance/", finance},
	{"/admin", admin},
	{"/api/admin/", admin},
}

// ruleFor is the rule that guards a route's pattern, if any.
func ruleFor(pattern string) (rule, bool) {
	var best rule
	found := false
	for _, r := range access {
		if strings.HasPrefix(pattern, r.prefix) && (!found || len(r.prefix) > len(best.prefix)) {
			best, found = r, true
		}
	}
	return best, found
}

// guard is the middleware that enforces the rule of a route's pattern, nil for a public route.
func (s *Core) guard(pattern string) echo.MiddlewareFunc {
	r, ok := ruleFor(pattern)
	if !ok {
		return nil
	}
	if strings.HasPrefix(pattern, "/api/") {
		return s.requireAPI(r.roles...)
	}
	return s.requirePage(r.roles...)
}

// Mux registers an audience's routes on the router, each behind the guard the access table
// gives its pattern, before the route's own middleware.
type Mux struct {
	core *Core
	e    *echo.Echo
}

// Mount is a Mux on e.
func (s *Core) Mount(e *echo.Echo) Mux { return Mux{core: s, e: e} }

// Add registers h for method and pattern, guarded by the access table, then m.
func (x Mux) Add(method, pattern string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	if g := x.core.guard(pattern); g != nil {
		m = append([]echo.MiddlewareFunc{g}, m...)
	}
	x.e.Add(method, pattern, h, m...)
}

// GET registers a GET route (see Add).
func (x Mux) GET(pattern string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	x.Add(echo.GET, pattern, h, m...)
}

// POST registers a POST route (see Add).
func (x Mux) POST(pattern string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	x.Add(echo.POST, pattern, h, m...)
}

// PUT registers a PUT route (see Add).
func (x Mux) PUT(pattern string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	x.Add(echo.PUT, pattern, h, m...)
}

// PATCH registers a PATCH route (see Add).
func (x Mux) PATCH(pattern string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	x.Add(echo.PATCH, pattern, h, m...)
}

// DELETE registers a DELETE route (see Add).
func (x Mux) DELETE(pattern string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	x.Add(echo.DELETE, pattern, h, m...)
}

// Guarded makes every path under prefix that no route matches answer as the prefix's guard
// says, before its 404: an anonymous visitor to /provider/no-such-page is sent to log in, as on
// every provider's page, rather than told what the site does not have.
func (x Mux) Guarded(prefix string) {
	if g := x.core.guard(prefix + "/"); g != nil {
		x.e.Group(prefix, g)
	}
}
