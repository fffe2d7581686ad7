package core

import (
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/accounts"
)

// rule says who may call the routes under a prefix: the platform's roles it names (its finance
// and admin, who act only through those roles), and the members of an account in use of one of
// its kinds: change's roles by any method, view's only to read (GET and HEAD). A rule that names
// no one lets in anyone signed in. See docs/members.md.
type rule struct {
	prefix string
	roles  []accounts.Role
	kinds  []accounts.Kind
	change []accounts.MemberRole
	view   []accounts.MemberRole
}

var (
	finance = []accounts.Role{accounts.RoleFinance, accounts.RoleAdmin}
	admin   = []accounts.Role{accounts.RoleAdmin}

	customer    = []accounts.Kind{accounts.KindCustomer}
	provider    = []accounts.Kind{accounts.KindProvider}
	eitherKind  = []accounts.Kind{accounts.KindCustomer, accounts.KindProvider}
	anyMember   = accounts.MemberRoles
	makers      = []accounts.MemberRole{accounts.MemberOwner, accounts.MemberAdmin, accounts.MemberDeveloper}
	payers      = []accounts.MemberRole{accounts.MemberOwner, accounts.MemberAdmin, accounts.MemberBilling}
	managers    = []accounts.MemberRole{accounts.MemberOwner, accounts.MemberAdmin}
	readOnly    = []accounts.MemberRole{accounts.MemberReadOnly}
	billReaders = []accounts.MemberRole{accounts.MemberOwner, accounts.MemberAdmin, accounts.MemberBilling, accounts.MemberReadOnly}
)

// access is who may call each part of the site: the one table of role rules. A route is guarded
// by the rule whose prefix is the longest that begins its pattern as registered ("/invoices/:id"
// begins with "/invoices/" and "/invoices"; the first wins); a route no rule covers is public.
// A page's guard sends an anonymous visitor to log in and refuses another role (403); an API
// route's (under /api/) answers 401 and 403.
var access = []rule{
	// Anyone signed in: logging out, who the caller is, switching to another of its accounts, and
	// the home, whose panels follow the role in use (web/home).
	{prefix: "/logout"},
	{prefix: "/home"},
	{prefix: "/api/auth/logout"},
	{prefix: "/verify-email/resend"},
	{prefix: "/api/me"},
	{prefix: "/account/switch"},
	{prefix: "/api/account/switch"},
	// A login's own settings (web/account): its time zone, whatever its role.
	{prefix: "/settings/profile"},
	// An account's members, both kinds (web/account): everyone sees them, owners and admins change them.
	{prefix: "/account/members", kinds: eitherKind, change: managers, view: anyMember},
	{prefix: "/account/members/:id/remove", kinds: eitherKind, change: managers},
	{prefix: "/api/account/members", kinds: eitherKind, change: managers, view: anyMember},
	// Pending invitations are shown to who may send them, as on the members page.
	{prefix: "/api/account/invitations", kinds: eitherKind, change: managers},
	{prefix: "/settings/billing", kinds: eitherKind, change: payers},
	{prefix: "/api/settings/billing", kinds: eitherKind, change: payers},
	// Webhooks (web/account): owners and admins manage the endpoints, every member sees them and their log.
	{prefix: "/settings/webhooks", kinds: eitherKind, change: managers, view: anyMember},
	{prefix: "/api/webhooks", kinds: eitherKind, change: managers, view: anyMember},

	// A customer's own account (web/developer; keys and budgets, web/developer/keys): credits
	// and invoices for who pays, keys and batches for who builds, usage and reports for everyone;
	// read-only members see keys, batches and invoices too.
	{prefix: "/credits", kinds: customer, change: payers},
	{prefix: "/api/credits/", kinds: customer, change: payers},
	{prefix: "/api/balance", kinds: customer, view: anyMember},
	{prefix: "/keys", kinds: customer, change: makers, view: readOnly},
	{prefix: "/keys/:id/revoke", kinds: customer, change: makers},
	{prefix: "/api/keys", kinds: customer, change: makers, view: readOnly},
	{prefix: "/budgets", kinds: customer, change: payers, view: anyMember},
	{prefix: "/budgets/subscriptions", kinds: customer, change: anyMember},
	{prefix: "/api/budgets", kinds: customer, change: payers, view: anyMember},
	{prefix: "/api/budgets/subscriptions", kinds: customer, change: anyMember},
	{prefix: "/usage", kinds: customer, view: anyMember},
	{prefix: "/api/usage", kinds: customer, view: anyMember},
	{prefix: "/batches", kinds: customer, change: makers, view: readOnly},
	{prefix: "/batches/:id", kinds: customer, change: makers, view: readOnly},
	{prefix: "/batches/:id/progress", kinds: customer, change: makers, view: readOnly},
	{prefix: "/reports", kinds: customer, view: anyMember},
	{prefix: "/api/reports/", kinds: customer, view: anyMember},
	{prefix: "/invoices", kinds: customer, view: billReaders},
	{prefix: "/api/invoices", kinds: customer, view: billReaders},

	// A provider's own account (web/provider): rigs for who builds, payouts for who is paid,
	// statements for who reads bills; everyone sees the rest.
	{prefix: "/provider", kinds: provider, change: makers, view: anyMember},
	{prefix: "/api/provider/", kinds: provider, change: makers, view: anyMember},
	{prefix: "/provider/payouts", kinds: provider, change: payers, view: readOnly},
	{prefix: "/provider/payouts/progress", kinds: provider, change: payers, view: readOnly},
	{prefix: "/api/provider/payouts", kinds: provider, change: payers, view: readOnly},
	{prefix: "/provider/statements", kinds: provider, view: billReaders},
	{prefix: "/api/provider/statements", kinds: provider, view: billReaders},

	// The documents (web/finance): a customer's own, a provider's own, and every one for finance.
	{prefix: "/invoices/", roles: finance, kinds: customer, view: billReaders},
	{prefix: "/credit-notes/", roles: finance, kinds: customer, view: billReaders},
	{prefix: "/api/invoices/:id/pdf", roles: finance, kinds: customer, view: billReaders},
	{prefix: "/statements/", roles: finance, kinds: provider, view: billReaders},

	// Finance (web/ledger, web/finance) and the administrators (web/admin).
	{prefix: "/finance", roles: finance},
	{prefix: "/finance/close/progress", roles: finance},
	{prefix: "/finance/payouts/progress", roles: finance},
	{prefix: "/api/finance/", roles: finance},
	{prefix: "/admin", roles: admin},
	{prefix: "/admin/batches/progress", roles: admin},
	{prefix: "/api/admin/", roles: admin},
}

// allows reports whether the session may call a route of the rule by the method.
func (r rule) allows(sess accounts.Session, method string) bool {
	if len(r.roles) == 0 && len(r.kinds) == 0 {
		return true
	}
	if slices.Contains(r.roles, sess.User.Role) {
		return true
	}
	// The platform's finance and admin act only through their platform roles.
	if sess.User.Role == accounts.RoleFinance || sess.User.Role == accounts.RoleAdmin {
		return false
	}
	if !slices.Contains(r.kinds, sess.Account.Kind) {
		return false
	}
	if slices.Contains(r.change, sess.Member) {
		return true
	}
	return (method == http.MethodGet || method == http.MethodHead) && slices.Contains(r.view, sess.Member)
}

// MayView reports whether the session may read the page at path, by the rule that guards it: the
// navigation links only the pages its reader may open, from this same table.
func MayView(sess accounts.Session, path string) bool {
	r, ok := ruleFor(path)
	return !ok || r.allows(sess, http.MethodGet)
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
		return s.requireAPI(r)
	}
	return s.requirePage(r)
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
