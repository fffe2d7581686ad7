package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/demo/history"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/services/webhooks"
	"github.com/gpumarket/gpumarket/web"
)

// caller is who calls a route in the authorization table, in the order of its columns.
type caller int

const (
	anonymous caller = iota
	developer        // owner of the demo developer's customer account
	provider         // owner of the demo provider's account
	finance
	admin
	// Members, each a login of its own invited into the demo developer's customer account or the
	// demo provider's account with a member role (docs/members.md).
	customerAdmin
	customerDeveloper
	customerBilling
	customerReadOnly
	providerAdmin
	providerDeveloper
	providerBilling
	providerReadOnly
)

var callers = []caller{anonymous, developer, provider, finance, admin,
	customerAdmin, customerDeveloper, customerBilling, customerReadOnly,
	providerAdmin, providerDeveloper, providerBilling, providerReadOnly}

func (c caller) String() string {
	return [...]string{"anonymous", "developer", "provider", "finance", "admin",
		"customer-admin", "customer-developer", "customer-billing", "customer-read-only",
		"provider-admin", "provider-developer", "provider-billing", "provider-read-only"}[c]
}

// email is the user the caller logs in as: a demo user, or for a member its own login;
// anonymous logs in as nobody.
func (c caller) email() string {
	switch {
	case c == anonymous:
		return ""
	case c.isMember():
		return "authz-" + c.String() + "@example.com"
	}
	return c.String() + "@example.com"
}

func (c caller) isMember() bool { return c >= customerAdmin }

// membership is the account owner a member caller is invited by and its role there.
func (c caller) membership() (owner caller, role accounts.MemberRole) {
	roles := []accounts.MemberRole{accounts.MemberAdmin, accounts.MemberDeveloper, accounts.MemberBilling, accounts.MemberReadOnly}
	if c >= providerAdmin {
		return provider, roles[c-providerAdmin]
	}
	return developer, roles[c-customerAdmin]
}

// statuses holds one expected status per caller: anonymous, developer, provider, finance, admin.
type statuses [5]int

func everyone(status int) statuses { return statuses{status, status, status, status, status} }

// memberStatuses holds one expected status per member caller: in the customer account its
// admin, developer, billing and read-only members, then the same in the provider account.
type memberStatuses [8]int

// customerMembers is what the customer account's admin, developer, billing and read-only
// members get; the provider account's members are refused (403).
func customerMembers(adm, dev, billing, readOnly int) memberStatuses {
	return memberStatuses{adm, dev, billing, readOnly, 403, 403, 403, 403}
}

// providerMembers is what the provider account's admin, developer, billing and read-only
// members get; the customer account's members are refused (403).
func providerMembers(adm, dev, billing, readOnly int) memberStatuses {
	return memberStatuses{403, 403, 403, 403, adm, dev, billing, readOnly}
}

// bothMembers is what the admin, developer, billing and read-only members of either account get.
func bothMembers(adm, dev, billing, readOnly int) memberStatuses {
	return memberStatuses{adm, dev, billing, readOnly, adm, dev, billing, readOnly}
}

// csrfRefused is what every caller, logged in or not, gets from a page form posted without
// the CSRF token its page carried.
var csrfRefused = everyone(http.StatusForbidden)

// route is one row of the authorization table.
type route struct {
	// path is the request path when the route has parameters: {offering} stands for an
	// active offering of another provider (Northwind Compute, not the provider caller's
	// Fjord GPU Co-op), {user} for the demo developer's user id, {account} for the demo
	// developer's account id, {purchase} for a purchase of credits by another developer,
	// {key} for an API key of another developer, {webhook} for a webhook endpoint of another
	// developer and {delivery} for a delivery to it.
	// Bodies may hold the same placeholders, and {caller} for the caller's name, so that
	// callers who share a server sign up emails of their own.
	path string
	// method is the request method when it differs from the route's: catch-all routes
	// answer any method.
	method string
	// body is a JSON body, or url.Values for a page form.
	body any
	// want is the status each caller gets; for a page form, with a valid CSRF token.
	want statuses
	// members is the status each member caller gets. A route a customer or a provider may call
	// must say; elsewhere it may be left out, and the members get what the account's owner gets
	// (the developer or provider column).
	members memberStatuses
	// noCSRF is, for a page form, the status each caller gets when the form carries no
	// CSRF token. Every page form must say.
	noCSRF statuses
	// login marks pages behind a login: an anonymous caller is sent (303) to
	// /login?next=<the page>, or next=/ after a POST.
	login bool
	// endsSession marks calls that log the caller out: each gets a session of its own.
	endsSession bool
}

// authzTable says who may call what. Keys are "METHOD path" as the router registers them
// (echo_route_not_found is the catch-all a guarded group registers, so that its guard also
// runs for addresses it does not have). A registered route without a row fails the test:
// add the row with the new route.
//
// Provider routes with :id are called with another provider's offering, so a provider gets
// 404: a rig that is not yours does not exist for you. Owners acting on their own rigs are
// tested in api_test.go. Likewise credits routes with a purchase id are called with another
// developer's purchase; a developer's own purchases are tested in credits_test.go.
var authzTable = map[string]route{
	// statuses{anonymous, developer, provider, finance, admin}. API calls carry a bearer
	// token and no CSRF token; page forms are posted by a browser with its session cookie,
	// once without the CSRF token (noCSRF: 403 for everyone, logged in or not) and once with
	// it (want).
	"GET /healthz":     {want: everyone(http.StatusOK)},
	"GET /readyz":      {want: everyone(http.StatusOK)},
	"GET /metrics":     {want: everyone(http.StatusUnauthorized)}, // its bearer token is no session's (edges_test.go)
	"GET /static/*":    {path: "/static/app.css", want: everyone(http.StatusOK)},
	"GET /":            {want: everyone(http.StatusOK)},
	"GET /catalog":     {want: everyone(http.StatusOK)},
	"GET /calculator":  {want: everyone(http.StatusOK)},
	"GET /methodology": {want: everyone(http.StatusOK)},
	"GET /planner":     {want: everyone(http.StatusOK)},
	// What a rig downloads: public. These tests' server publishes no agent binary, so SHA256SUMS is not found.
	"GET /downloads/:name":  {path: "/downloads/gpuagent@.service", want: everyone(http.StatusOK)},
	"HEAD /downloads/:name": {path: "/downloads/SHA256SUMS", want: everyone(http.StatusNotFound)},

	// The home after logging in: every signed-in caller has one, whose panels follow its role
	// (home_test.go); a visitor is sent to log in.
	"GET /home": {want: statuses{303, 200, 200, 200, 200}, members: bothMembers(200, 200, 200, 200), login: true},
	// Logged-in users are sent home from the login page.
	"GET /login": {want: statuses{200, 303, 303, 303, 303}},
	"POST /login": {body: url.Values{"email": {"lisboa@example.com"}, "password": {demo.Password}},
		want: everyone(http.StatusSeeOther), noCSRF: csrfRefused},
	"GET /signup": {want: everyone(http.StatusOK)},
	"POST /signup": {body: url.Values{"email": {"authz-form-{caller}@example.com"}, "password": {"authz-password-1"}, "role": {"developer"}},
		want: everyone(http.StatusSeeOther), noCSRF: csrfRefused},
	"POST /logout": {body: url.Values{}, want: everyone(http.StatusSeeOther), noCSRF: csrfRefused, login: true, endsSession: true},
	// The links e-mailed to a user: public, the token in them the proof; a made-up token is refused.
	"GET /forgot-password": {want: everyone(http.StatusOK)},
	"POST /forgot-password": {body: url.Values{"email": {"lisboa@example.com"}}, want: everyone(http.StatusOK),
		noCSRF: csrfRefused},
	"GET /reset-password": {path: "/reset-password?token=made-up", want: everyone(http.StatusOK)}, // says the link is no good
	"POST /reset-password": {body: url.Values{"token": {"made-up"}, "password": {"authz-password-2"}},
		want: everyone(http.StatusGone), noCSRF: csrfRefused},
	"GET /verify-email": {path: "/verify-email?token=made-up", want: everyone(http.StatusGone)},
	// A signed-in user asks for a new link (the demo users are verified already: nothing is sent).
	"POST /verify-email/resend": {body: url.Values{}, want: everyone(http.StatusSeeOther), noCSRF: csrfRefused, login: true},

	// Provider pages.
	"GET /provider/rigs":     {want: statuses{303, 403, 200, 403, 403}, login: true, members: providerMembers(200, 200, 200, 200)},
	"GET /provider/rigs/new": {want: statuses{303, 403, 200, 403, 403}, login: true, members: providerMembers(200, 200, 200, 200)},
	"POST /provider/rigs":    {body: rigForm(), want: statuses{303, 403, 303, 403, 403}, noCSRF: csrfRefused, login: true, members: providerMembers(303, 303, 403, 403)},
	"GET /provider/rigs/:id/edit": {path: "/provider/rigs/{offering}/edit",
		want: statuses{303, 403, 404, 403, 403}, login: true, members: providerMembers(404, 404, 404, 404)},
	"GET /provider/rigs/:id/connect": {path: "/provider/rigs/{offering}/connect",
		want: statuses{303, 403, 404, 403, 403}, login: true, members: providerMembers(404, 404, 404, 404)},
	"POST /provider/rigs/:id/connect": {path: "/provider/rigs/{offering}/connect", body: url.Values{},
		want: statuses{303, 403, 404, 403, 403}, noCSRF: csrfRefused, login: true, members: providerMembers(404, 404, 403, 403)},
	"POST /provider/rigs/:id": {path: "/provider/rigs/{offering}", body: rigForm(),
		want: statuses{303, 403, 404, 403, 403}, noCSRF: csrfRefused, login: true, members: providerMembers(404, 404, 403, 403)},
	"POST /provider/rigs/:id/:action": {path: "/provider/rigs/{offering}/pause", body: url.Values{},
		want: statuses{303, 403, 404, 403, 403}, noCSRF: csrfRefused, login: true, members: providerMembers(404, 404, 403, 403)},
	"GET /provider/rigs/:id/benchmark": {path: "/provider/rigs/{offering}/benchmark",
		want: statuses{303, 403, 404, 403, 403}, login: true, members: providerMembers(404, 404, 404, 404)},
	"POST /provider/rigs/:id/benchmark": {path: "/provider/rigs/{offering}/benchmark", body: url.Values{"result": {"{}"}},
		want: statuses{303, 403, 404, 403, 403}, noCSRF: csrfRefused, login: true, members: providerMembers(404, 404, 403, 403)},
	"POST /provider/rigs/:id/benchmark/remove": {path: "/provider/rigs/{offering}/benchmark/remove", body: url.Values{},
		want: statuses{303, 403, 404, 403, 403}, noCSRF: csrfRefused, login: true, members: providerMembers(404, 404, 403, 403)},
	// Payouts: the provider's own Stripe account. The GETs sort before the connect form, so
	// they run while the provider has no account: the refresh and return links send it back
	// to its Payouts page, and the test onboarding page is not found; the test onboarding
	// form runs after the connect form and completes the account it created.
	"GET /provider/payouts": {want: statuses{303, 403, 200, 403, 403}, login: true, members: providerMembers(200, 403, 200, 200)},
	"GET /provider/payouts/progress": {path: "/provider/payouts/progress?period=2001-01",
		want: statuses{303, 403, 200, 403, 403}, login: true, members: providerMembers(200, 403, 200, 200)},
	"POST /provider/payouts/connect": {body: url.Values{"country": {"US"}},
		want: statuses{303, 403, 303, 403, 403}, noCSRF: csrfRefused, login: true, members: providerMembers(303, 403, 303, 403)},
	"GET /provider/payouts/onboarding":      {want: statuses{303, 403, 303, 403, 403}, login: true, members: providerMembers(303, 403, 303, 303)},
	"GET /provider/payouts/return":          {want: statuses{303, 403, 303, 403, 403}, login: true, members: providerMembers(303, 403, 303, 303)},
	"GET /provider/payouts/test-onboarding": {want: statuses{303, 403, 404, 403, 403}, login: true, members: providerMembers(404, 403, 404, 404)},
	// Statements: the provider's own.
	"GET /provider/statements": {want: statuses{303, 403, 200, 403, 403}, login: true, members: providerMembers(200, 403, 200, 200)},
	"POST /provider/payouts/test-onboarding": {body: url.Values{},
		want: statuses{303, 403, 303, 403, 403}, noCSRF: csrfRefused, login: true, members: providerMembers(303, 403, 303, 403)},
	"echo_route_not_found /provider": {method: http.MethodGet, path: "/provider",
		want: statuses{303, 403, 404, 403, 403}, login: true, members: providerMembers(404, 404, 404, 404)},
	"echo_route_not_found /provider/*": {method: http.MethodGet, path: "/provider/no-such-page",
		want: statuses{303, 403, 404, 403, 403}, login: true, members: providerMembers(404, 404, 404, 404)},

	// Admin pages. The admin sets the developer's role to what it is, which changes nothing.
	"GET /admin/users": {want: statuses{303, 403, 403, 403, 200}, login: true},
	"POST /admin/users/:id/role": {path: "/admin/users/{user}/role", body: url.Values{"role": {"developer"}},
		want: statuses{303, 403, 403, 403, 303}, noCSRF: csrfRefused, login: true},
	"GET /admin/discrepancies": {want: statuses{303, 403, 403, 403, 200}, login: true},
	// No discrepancy is flagged on the request: the admin is let through to be told so.
	"POST /admin/discrepancies/resolve": {body: url.Values{"request_id": {"req_not_flagged"}, "note": {"looked into"}},
		want: statuses{303, 403, 403, 403, 404}, noCSRF: csrfRefused, login: true},
	"GET /admin/rig-reports":      {want: statuses{303, 403, 403, 403, 200}, login: true},
	"GET /admin/batches":          {want: statuses{303, 403, 403, 403, 200}, login: true},
	"GET /admin/batches/progress": {want: statuses{303, 403, 403, 403, 200}, login: true},
	"GET /admin/usage-stream":     {want: statuses{303, 403, 403, 403, 200}, login: true},
	"echo_route_not_found /admin": {method: http.MethodGet, path: "/admin",
		want: statuses{303, 403, 403, 403, 404}, login: true},
	"echo_route_not_found /admin/*": {method: http.MethodGet, path: "/admin/no-such-page",
		want: statuses{303, 403, 403, 403, 404}, login: true},

	// Credits pages: a developer's own. HEAD reaches the group's catch-all at /credits,
	// whose GET is a page; the check-out posts a valid amount and is sent on to pay.
	"GET /credits": {want: statuses{303, 200, 403, 403, 403}, login: true, members: customerMembers(200, 403, 200, 403)},
	"POST /credits/checkout": {body: url.Values{"amount_usd": {"20"}},
		want: statuses{303, 303, 403, 403, 403}, noCSRF: csrfRefused, login: true, members: customerMembers(303, 403, 303, 403)},
	"GET /credits/return": {path: "/credits/return?purchase={purchase}",
		want: statuses{303, 404, 403, 403, 403}, login: true, members: customerMembers(404, 403, 404, 403)},
	"GET /credits/test-pay/:id": {path: "/credits/test-pay/{purchase}",
		want: statuses{303, 404, 403, 403, 403}, login: true, members: customerMembers(404, 403, 404, 403)},
	"POST /credits/test-pay/:id": {path: "/credits/test-pay/{purchase}", body: url.Values{},
		want: statuses{303, 404, 403, 403, 403}, noCSRF: csrfRefused, login: true, members: customerMembers(404, 403, 404, 403)},
	// Auto top-up: the settings (off, so no card is needed), saving a card (the local test
	// page in test mode) and removing it (nothing to remove is no error).
	"POST /credits/auto-topup": {body: url.Values{"topup_threshold_usd": {"10"}, "topup_amount_usd": {"20"}},
		want: statuses{303, 303, 403, 403, 403}, noCSRF: csrfRefused, login: true, members: customerMembers(303, 403, 303, 403)},
	"POST /credits/card": {body: url.Values{},
		want: statuses{303, 303, 403, 403, 403}, noCSRF: csrfRefused, login: true, members: customerMembers(303, 403, 303, 403)},
	"POST /credits/card/remove": {body: url.Values{},
		want: statuses{303, 303, 403, 403, 403}, noCSRF: csrfRefused, login: true, members: customerMembers(303, 403, 303, 403)},
	"GET /credits/test-card": {want: statuses{303, 200, 403, 403, 403}, login: true, members: customerMembers(200, 403, 200, 403)},
	"POST /credits/test-card": {body: url.Values{},
		want: statuses{303, 303, 403, 403, 403}, noCSRF: csrfRefused, login: true, members: customerMembers(303, 403, 303, 403)},
	"echo_route_not_found /credits": {method: http.MethodHead, path: "/credits",
		want: statuses{303, 404, 403, 403, 403}, login: true, members: customerMembers(404, 403, 404, 403)},
	"echo_route_not_found /credits/*": {method: http.MethodGet, path: "/credits/no-such-page",
		want: statuses{303, 404, 403, 403, 403}, login: true, members: customerMembers(404, 403, 404, 403)},

	// Invoices: a developer's own; the one asked for does not exist. Billing details: a
	// developer's for its invoices, a provider's for its statements (without a PO number).
	"GET /invoices":            {want: statuses{303, 200, 403, 403, 403}, login: true, members: customerMembers(200, 403, 200, 200)},
	"GET /reports":             {want: statuses{303, 200, 403, 403, 403}, login: true, members: customerMembers(200, 200, 200, 200)},
	"GET /reports/savings.csv": {want: statuses{303, 200, 403, 403, 403}, login: true, members: customerMembers(200, 200, 200, 200)},
	"GET /reports/carbon.csv":  {want: statuses{303, 200, 403, 403, 403}, login: true, members: customerMembers(200, 200, 200, 200)},
	// A login's own settings: its time zone, whatever its role or membership.
	"GET /settings/profile": {want: statuses{303, 200, 200, 200, 200}, login: true, members: bothMembers(200, 200, 200, 200)},
	"POST /settings/profile": {body: url.Values{"time_zone": {"UTC"}},
		want: statuses{303, 303, 303, 303, 303}, noCSRF: csrfRefused, login: true, members: bothMembers(303, 303, 303, 303)},
	"GET /settings/billing": {want: statuses{303, 200, 200, 403, 403}, login: true, members: bothMembers(200, 403, 200, 403)},
	"POST /settings/billing": {body: billingForm(),
		want: statuses{303, 303, 303, 403, 403}, noCSRF: csrfRefused, login: true, members: bothMembers(303, 403, 303, 403)},
	// Webhooks: each account's own; owners and admins manage them, every member sees them.
	// Another developer's endpoint and delivery are not found.
	"GET /settings/webhooks": {want: statuses{303, 200, 200, 403, 403}, login: true, members: bothMembers(200, 200, 200, 200)},
	"POST /settings/webhooks": {body: url.Values{"url": {"http://127.0.0.1:9/authz"}},
		want: statuses{303, 200, 200, 403, 403}, noCSRF: csrfRefused, login: true, members: bothMembers(200, 403, 403, 403)},
	"POST /settings/webhooks/:id/enable": {path: "/settings/webhooks/{webhook}/enable", body: url.Values{},
		want: statuses{303, 404, 404, 403, 403}, noCSRF: csrfRefused, login: true, members: bothMembers(404, 403, 403, 403)},
	"POST /settings/webhooks/:id/disable": {path: "/settings/webhooks/{webhook}/disable", body: url.Values{},
		want: statuses{303, 404, 404, 403, 403}, noCSRF: csrfRefused, login: true, members: bothMembers(404, 403, 403, 403)},
	"POST /settings/webhooks/:id/delete": {path: "/settings/webhooks/{webhook}/delete", body: url.Values{},
		want: statuses{303, 404, 404, 403, 403}, noCSRF: csrfRefused, login: true, members: bothMembers(404, 403, 403, 403)},
	"POST /settings/webhooks/:id/test": {path: "/settings/webhooks/{webhook}/test", body: url.Values{},
		want: statuses{303, 404, 404, 403, 403}, noCSRF: csrfRefused, login: true, members: bothMembers(404, 403, 403, 403)},
	"POST /settings/webhooks/deliveries/:id/replay": {path: "/settings/webhooks/deliveries/{delivery}/replay", body: url.Values{},
		want: statuses{303, 404, 404, 403, 403}, noCSRF: csrfRefused, login: true, members: bothMembers(404, 403, 403, 403)},
	"GET /api/webhooks": {want: statuses{401, 200, 200, 403, 403}, members: bothMembers(200, 200, 200, 200)},
	"POST /api/webhooks": {body: map[string]any{"url": "http://127.0.0.1:9/authz-api"},
		want: statuses{401, 201, 201, 403, 403}, members: bothMembers(201, 403, 403, 403)},
	"PATCH /api/webhooks/:id": {path: "/api/webhooks/{webhook}", body: map[string]any{"enabled": false},
		want: statuses{401, 404, 404, 403, 403}, members: bothMembers(404, 403, 403, 403)},
	"DELETE /api/webhooks/:id": {path: "/api/webhooks/{webhook}", want: statuses{401, 404, 404, 403, 403},
		members: bothMembers(404, 403, 403, 403)},
	"POST /api/webhooks/:id/test": {path: "/api/webhooks/{webhook}/test", want: statuses{401, 404, 404, 403, 403},
		members: bothMembers(404, 403, 403, 403)},
	"GET /api/webhooks/deliveries": {want: statuses{401, 200, 200, 403, 403}, members: bothMembers(200, 200, 200, 200)},
	"GET /api/webhooks/deliveries/:id": {path: "/api/webhooks/deliveries/{delivery}",
		want: statuses{401, 404, 404, 403, 403}, members: bothMembers(404, 404, 404, 404)},
	"POST /api/webhooks/deliveries/:id/replay": {path: "/api/webhooks/deliveries/{delivery}/replay",
		want: statuses{401, 404, 404, 403, 403}, members: bothMembers(404, 403, 403, 403)},

	// Stripe's webhook proves itself by its signature, not by a session or a CSRF token:
	// unsigned, it is refused whoever sends it.
	"POST /webhooks/stripe": {body: map[string]string{"id": "evt_authz", "type": "checkout.session.completed"},
		want: everyone(http.StatusBadRequest), noCSRF: everyone(http.StatusBadRequest)},

	// Finance pages, for finance and admins. The adjustment asks to confirm granting the demo developer $5;
	// the price change is for a far future.
	"GET /finance/balances": {want: statuses{303, 403, 403, 200, 200}, login: true},
	"POST /finance/adjustments": {body: url.Values{"account_id": {"{account}"}, "amount_usd": {"5.00"}, "reason": {"authz test"}},
		want: statuses{303, 403, 403, 200, 200}, noCSRF: csrfRefused, login: true}, // 200: the confirmation page
	"GET /finance/prices": {want: statuses{303, 403, 403, 200, 200}, login: true},
	"POST /finance/prices": {body: priceForm(),
		want: statuses{303, 403, 403, 303, 303}, noCSRF: csrfRefused, login: true},
	"GET /finance/stripe-events":    {want: statuses{303, 403, 403, 200, 200}, login: true},
	"GET /finance/usage-rejections": {want: statuses{303, 403, 403, 200, 200}, login: true},
	// Payouts for finance; the retry names a payout that does not exist.
	"GET /finance/payouts": {want: statuses{303, 403, 403, 200, 200}, login: true},
	"GET /finance/payouts/progress": {path: "/finance/payouts/progress?period=2001-01",
		want: statuses{303, 403, 403, 200, 200}, login: true},
	"POST /finance/payouts/:id/retry": {path: "/finance/payouts/" + noSuchPayout + "/retry", body: url.Values{},
		want: statuses{303, 403, 403, 404, 404}, noCSRF: csrfRefused, login: true},
	"GET /finance/payouts/:id/retry": {path: "/finance/payouts/" + noSuchPayout + "/retry",
		want: statuses{303, 403, 403, 404, 404}, login: true},
	"echo_route_not_found /finance": {method: http.MethodGet, path: "/finance",
		want: statuses{303, 403, 403, 404, 404}, login: true},
	"echo_route_not_found /finance/*": {method: http.MethodGet, path: "/finance/no-such-page",
		want: statuses{303, 403, 403, 404, 404}, login: true},

	// Documents: {invoice} is an invoice of another developer's account (Brightline Studio),
	// {creditnote} its credit note, {statement} a statement of another provider (Northwind
	// Compute); each is not found for the developer or provider caller, whose own are tested in
	// documents_routes_test.go, and refused to a role that has no such documents.
	"GET /invoices/:id":         {path: "/invoices/{invoice}", want: statuses{303, 404, 403, 200, 200}, login: true, members: customerMembers(404, 403, 404, 404)},
	"GET /invoices/:id/pdf":     {path: "/invoices/{invoice}/pdf", want: statuses{303, 404, 403, 200, 200}, login: true, members: customerMembers(404, 403, 404, 404)},
	"GET /invoices/:id/csv":     {path: "/invoices/{invoice}/csv", want: statuses{303, 404, 403, 200, 200}, login: true, members: customerMembers(404, 403, 404, 404)},
	"GET /credit-notes/:id":     {path: "/credit-notes/{creditnote}", want: statuses{303, 404, 403, 200, 200}, login: true, members: customerMembers(404, 403, 404, 404)},
	"GET /credit-notes/:id/pdf": {path: "/credit-notes/{creditnote}/pdf", want: statuses{303, 404, 403, 200, 200}, login: true, members: customerMembers(404, 403, 404, 404)},
	"GET /credit-notes/:id/csv": {path: "/credit-notes/{creditnote}/csv", want: statuses{303, 404, 403, 200, 200}, login: true, members: customerMembers(404, 403, 404, 404)},
	"GET /statements/:id":       {path: "/statements/{statement}", want: statuses{303, 403, 404, 200, 200}, login: true, members: providerMembers(404, 403, 404, 404)},
	"GET /statements/:id/pdf":   {path: "/statements/{statement}/pdf", want: statuses{303, 403, 404, 200, 200}, login: true, members: providerMembers(404, 403, 404, 404)},
	"GET /statements/:id/csv":   {path: "/statements/{statement}/csv", want: statuses{303, 403, 404, 200, 200}, login: true, members: providerMembers(404, 403, 404, 404)},
	"GET /api/invoices/:id/pdf": {path: "/api/invoices/{invoice}.pdf", want: statuses{401, 404, 403, 200, 200}, members: customerMembers(404, 403, 404, 404)},

	// Finance's review, close and audit log. Actions name a document that does not exist, so
	// that each caller's table runs in any order; the actions themselves are tested in
	// review_test.go and confirm_test.go. Approving many asks to confirm what it would do: of
	// no draft, nothing (409 when posted; the GET shows it); the close is of a month that has
	// not ended.
	"GET /finance/invoices": {want: statuses{303, 403, 403, 200, 200}, login: true},
	"POST /finance/invoices/approve": {body: url.Values{"id": {noSuchDocument}},
		want: statuses{303, 403, 403, 409, 409}, noCSRF: csrfRefused, login: true},
	"GET /finance/invoices/approve": {path: "/finance/invoices/approve?id=" + noSuchDocument,
		want: statuses{303, 403, 403, 200, 200}, login: true},
	"GET /finance/invoices/:id/approve": {path: "/finance/invoices/" + noSuchDocument + "/approve",
		want: statuses{303, 403, 403, 404, 404}, login: true},
	"GET /finance/invoices/:id/void": {path: "/finance/invoices/" + noSuchDocument + "/void?reason=wrong_details",
		want: statuses{303, 403, 403, 404, 404}, login: true},
	"GET /finance/invoices/:id/paid": {path: "/finance/invoices/" + noSuchDocument + "/paid",
		want: statuses{303, 403, 403, 404, 404}, login: true},
	"GET /finance/statements/approve": {path: "/finance/statements/approve?id=" + noSuchDocument,
		want: statuses{303, 403, 403, 200, 200}, login: true},
	"GET /finance/statements/:id/approve": {path: "/finance/statements/" + noSuchDocument + "/approve",
		want: statuses{303, 403, 403, 404, 404}, login: true},
	"GET /finance/statements/:id/void": {path: "/finance/statements/" + noSuchDocument + "/void?reason=wrong_details",
		want: statuses{303, 403, 403, 404, 404}, login: true},
	"GET /finance/statements/:id/paid": {path: "/finance/statements/" + noSuchDocument + "/paid",
		want: statuses{303, 403, 403, 404, 404}, login: true},
	"GET /finance/invoices/:id": {path: "/finance/invoices/{invoice}", want: statuses{303, 403, 403, 200, 200}, login: true},
	"POST /finance/invoices/:id/approve": {path: "/finance/invoices/" + noSuchDocument + "/approve", body: url.Values{},
		want: statuses{303, 403, 403, 404, 404}, noCSRF: csrfRefused, login: true},
	"POST /finance/invoices/:id/void": {path: "/finance/invoices/" + noSuchDocument + "/void", body: url.Values{"reason": {"wrong_details"}},
		want: statuses{303, 403, 403, 404, 404}, noCSRF: csrfRefused, login: true},
	"POST /finance/invoices/:id/paid": {path: "/finance/invoices/" + noSuchDocument + "/paid", body: url.Values{},
		want: statuses{303, 403, 403, 404, 404}, noCSRF: csrfRefused, login: true},
	"GET /finance/statements": {want: statuses{303, 403, 403, 200, 200}, login: true},
	"POST /finance/statements/approve": {body: url.Values{"id": {noSuchDocument}},
		want: statuses{303, 403, 403, 409, 409}, noCSRF: csrfRefused, login: true},
	"GET /finance/statements/:id": {path: "/finance/statements/{statement}", want: statuses{303, 403, 403, 200, 200}, login: true},
	"POST /finance/statements/:id/approve": {path: "/finance/statements/" + noSuchDocument + "/approve", body: url.Values{},
		want: statuses{303, 403, 403, 404, 404}, noCSRF: csrfRefused, login: true},
	"POST /finance/statements/:id/void": {path: "/finance/statements/" + noSuchDocument + "/void", body: url.Values{"reason": {"wrong_details"}},
		want: statuses{303, 403, 403, 404, 404}, noCSRF: csrfRefused, login: true},
	"POST /finance/statements/:id/paid": {path: "/finance/statements/" + noSuchDocument + "/paid", body: url.Values{},
		want: statuses{303, 403, 403, 404, 404}, noCSRF: csrfRefused, login: true},
	"GET /finance/close": {want: statuses{303, 403, 403, 200, 200}, login: true},
	// A month never closed has no close to follow.
	"GET /finance/close/progress": {path: "/finance/close/progress?period=2001-01",
		want: statuses{303, 403, 403, 404, 404}, login: true},
	"POST /finance/close": {body: url.Values{"period": {"2099-01"}},
		want: statuses{303, 403, 403, 422, 422}, noCSRF: csrfRefused, login: true},
	"GET /finance/audit": {want: statuses{303, 403, 403, 200, 200}, login: true},
	// Flagged requests: finance reads them and resolves them; the resolution names a request
	// that is not flagged.
	"GET /finance/flags":         {want: statuses{303, 403, 403, 200, 200}, login: true},
	"GET /finance/discrepancies": {want: statuses{303, 403, 403, 200, 200}, login: true},
	"POST /finance/flags/resolve": {body: url.Values{"request_id": {"req_not_flagged"}, "resolution": {"released"}},
		want: statuses{303, 403, 403, 404, 404}, noCSRF: csrfRefused, login: true},
	"GET /api/finance/flags": {want: statuses{401, 403, 403, 200, 200}},
	"POST /api/finance/flags/resolve": {body: map[string]string{"request_id": "req_not_flagged", "resolution": "released"},
		want: statuses{401, 403, 403, 404, 404}},
	"GET /api/finance/invoices": {want: statuses{401, 403, 403, 200, 200}},
	"POST /api/finance/invoices/approve": {body: map[string]any{"ids": []string{noSuchDocument}},
		want: statuses{401, 403, 403, 200, 200}},
	"GET /api/finance/invoices/:id":          {path: "/api/finance/invoices/{invoice}", want: statuses{401, 403, 403, 200, 200}},
	"POST /api/finance/invoices/:id/approve": {path: "/api/finance/invoices/" + noSuchDocument + "/approve", want: statuses{401, 403, 403, 404, 404}},
	"POST /api/finance/invoices/:id/void": {path: "/api/finance/invoices/" + noSuchDocument + "/void",
		body: map[string]string{"reason": "wrong_details"}, want: statuses{401, 403, 403, 404, 404}},
	"POST /api/finance/invoices/:id/paid": {path: "/api/finance/invoices/" + noSuchDocument + "/paid", want: statuses{401, 403, 403, 404, 404}},
	"GET /api/finance/credit-notes/:id":   {path: "/api/finance/credit-notes/{creditnote}", want: statuses{401, 403, 403, 200, 200}},
	"GET /api/finance/statements":         {want: statuses{401, 403, 403, 200, 200}},
	"POST /api/finance/statements/approve": {body: map[string]any{"ids": []string{noSuchDocument}},
		want: statuses{401, 403, 403, 200, 200}},
	"GET /api/finance/statements/:id":          {path: "/api/finance/statements/{statement}", want: statuses{401, 403, 403, 200, 200}},
	"POST /api/finance/statements/:id/approve": {path: "/api/finance/statements/" + noSuchDocument + "/approve", want: statuses{401, 403, 403, 404, 404}},
	"POST /api/finance/statements/:id/void": {path: "/api/finance/statements/" + noSuchDocument + "/void",
		body: map[string]string{"reason": "wrong_details"}, want: statuses{401, 403, 403, 404, 404}},
	"POST /api/finance/statements/:id/paid": {path: "/api/finance/statements/" + noSuchDocument + "/paid", want: statuses{401, 403, 403, 404, 404}},
	"POST /api/finance/close":               {body: map[string]string{"period": "2099-01"}, want: statuses{401, 403, 403, 422, 422}},
	"GET /api/finance/closes":               {want: statuses{401, 403, 403, 200, 200}},
	"GET /api/finance/closes/:period":       {path: "/api/finance/closes/{period}", want: statuses{401, 403, 403, 200, 200}},
	"GET /api/finance/audit":                {want: statuses{401, 403, 403, 200, 200}},
	"GET /api/finance/journal.csv":          {path: "/api/finance/journal.csv?period={period}", want: statuses{401, 403, 403, 200, 200}},

	// Public API.
	"POST /api/auth/signup": {body: map[string]string{"email": "authz-api-{caller}@example.com", "password": "authz-password-1", "role": "provider"},
		want: everyone(http.StatusCreated)},
	"POST /api/auth/login": {body: map[string]string{"email": "lisboa@example.com", "password": demo.Password},
		want: everyone(http.StatusOK)},
	"POST /api/auth/logout":  {want: statuses{401, 204, 204, 204, 204}, endsSession: true},
	"GET /api/me":            {want: statuses{401, 200, 200, 200, 200}},
	"GET /api/offerings":     {want: everyone(http.StatusOK)},
	"GET /api/offerings/:id": {path: "/api/offerings/{offering}", want: everyone(http.StatusOK)},
	"GET /api/prices":        {want: everyone(http.StatusOK)},
	"GET /api/calculator": {path: "/api/calculator?usd_per_gpu_hour=0.25&gpu_count=4&tokens_per_second=1994.82",
		want: everyone(http.StatusOK)},
	"GET /api/reference": {want: everyone(http.StatusOK)},
	"GET /api/planner":   {path: "/api/planner?tokens_per_day=1000000", want: everyone(http.StatusOK)},

	// No benchmark is attached to the offering: anyone may ask, and is told so.
	"GET /api/offerings/:id/benchmark": {path: "/api/offerings/{offering}/benchmark", want: everyone(http.StatusNotFound)},

	// Provider API.
	"GET /api/provider/offerings":  {want: statuses{401, 403, 200, 403, 403}, members: providerMembers(200, 200, 200, 200)},
	"POST /api/provider/offerings": {body: rigJSON(), want: statuses{401, 403, 201, 403, 403}, members: providerMembers(201, 201, 403, 403)},
	"GET /api/provider/offerings/:id": {path: "/api/provider/offerings/{offering}",
		want: statuses{401, 403, 404, 403, 403}, members: providerMembers(404, 404, 404, 404)},
	"PUT /api/provider/offerings/:id": {path: "/api/provider/offerings/{offering}", body: rigJSON(),
		want: statuses{401, 403, 404, 403, 403}, members: providerMembers(404, 404, 403, 403)},
	"DELETE /api/provider/offerings/:id": {path: "/api/provider/offerings/{offering}",
		want: statuses{401, 403, 404, 403, 403}, members: providerMembers(404, 404, 403, 403)},
	"POST /api/provider/offerings/:id/pause": {path: "/api/provider/offerings/{offering}/pause",
		want: statuses{401, 403, 404, 403, 403}, members: providerMembers(404, 404, 403, 403)},
	"POST /api/provider/offerings/:id/resume": {path: "/api/provider/offerings/{offering}/resume",
		want: statuses{401, 403, 404, 403, 403}, members: providerMembers(404, 404, 403, 403)},
	"GET /api/provider/offerings/:id/benchmark": {path: "/api/provider/offerings/{offering}/benchmark",
		want: statuses{401, 403, 404, 403, 403}, members: providerMembers(404, 404, 404, 404)},
	"PUT /api/provider/offerings/:id/benchmark": {path: "/api/provider/offerings/{offering}/benchmark", body: map[string]any{},
		want: statuses{401, 403, 404, 403, 403}, members: providerMembers(404, 404, 403, 403)},
	"DELETE /api/provider/offerings/:id/benchmark": {path: "/api/provider/offerings/{offering}/benchmark",
		want: statuses{401, 403, 404, 403, 403}, members: providerMembers(404, 404, 403, 403)},
	"GET /api/provider/payouts": {want: statuses{401, 403, 200, 403, 403}, members: providerMembers(200, 403, 200, 200)},
	"echo_route_not_found /api/provider/offerings": {method: http.MethodPatch, path: "/api/provider/offerings",
		want: statuses{401, 403, 404, 403, 403}, members: providerMembers(404, 404, 403, 403)},
	"echo_route_not_found /api/provider/offerings/*": {method: http.MethodGet, path: "/api/provider/offerings/{offering}/no-such-action",
		want: statuses{401, 403, 404, 403, 403}, members: providerMembers(404, 404, 404, 404)},

	// Credits API, for developers.
	"POST /api/credits/checkout": {body: map[string]any{"amount_usd": 20}, want: statuses{401, 201, 403, 403, 403}, members: customerMembers(201, 403, 201, 403)},
	"GET /api/credits/purchases/:id": {path: "/api/credits/purchases/{purchase}",
		want: statuses{401, 404, 403, 403, 403}, members: customerMembers(404, 403, 404, 403)},
	"GET /api/credits/history":    {want: statuses{401, 200, 403, 403, 403}, members: customerMembers(200, 403, 200, 403)},
	"GET /api/balance":            {want: statuses{401, 200, 403, 403, 403}, members: customerMembers(200, 200, 200, 200)},
	"GET /api/credits/auto-topup": {want: statuses{401, 200, 403, 403, 403}, members: customerMembers(200, 403, 200, 403)},
	"PUT /api/credits/auto-topup": {body: map[string]any{"enabled": false, "threshold_usd": "10", "amount_usd": 20},
		want: statuses{401, 200, 403, 403, 403}, members: customerMembers(200, 403, 200, 403)},
	"POST /api/credits/card":   {body: map[string]any{}, want: statuses{401, 201, 403, 403, 403}, members: customerMembers(201, 403, 201, 403)},
	"DELETE /api/credits/card": {want: statuses{401, 204, 403, 403, 403}, members: customerMembers(204, 403, 204, 403)},

	// Invoices and billing details API.
	"GET /api/invoices":         {want: statuses{401, 200, 403, 403, 403}, members: customerMembers(200, 403, 200, 200)},
	"GET /api/invoices/:id":     {path: "/api/invoices/" + noSuchInvoice, want: statuses{401, 404, 403, 403, 403}, members: customerMembers(404, 403, 404, 404)},
	"GET /api/settings/billing": {want: statuses{401, 200, 200, 403, 403}, members: bothMembers(200, 403, 200, 403)},
	"PUT /api/settings/billing": {body: map[string]string{"legal_name": "Authz Ltd", "address": "1 Road", "country": "IE"},
		want: statuses{401, 200, 200, 403, 403}, members: bothMembers(200, 403, 200, 403)},
	"GET /api/provider/statements": {want: statuses{401, 403, 200, 403, 403}, members: providerMembers(200, 403, 200, 200)},

	// Finance API, for finance and admins.
	"GET /api/finance/balances":         {want: statuses{401, 403, 403, 200, 200}},
	"GET /api/finance/usage-rejections": {want: statuses{401, 403, 403, 200, 200}},
	"POST /api/finance/adjustments": {body: map[string]string{"account_id": "{account}", "amount_usd": "5.00", "reason": "authz test"},
		want: statuses{401, 403, 403, 201, 201}},
	"GET /api/finance/prices": {want: statuses{401, 403, 403, 200, 200}},
	"POST /api/finance/prices": {body: map[string]string{"tier": "batch", "input_usd_per_mtok": "0.09",
		"output_usd_per_mtok": "0.18", "effective_from": "2099-01-01T00:00:00Z"}, want: statuses{401, 403, 403, 201, 201}},
	"GET /api/finance/payouts": {want: statuses{401, 403, 403, 200, 200}},
	"POST /api/finance/payouts/:id/retry": {path: "/api/finance/payouts/" + noSuchPayout + "/retry",
		want: statuses{401, 403, 403, 404, 404}},
	"echo_route_not_found /api/finance": {method: http.MethodPatch, path: "/api/finance",
		want: statuses{401, 403, 403, 404, 404}},
	"echo_route_not_found /api/finance/*": {method: http.MethodGet, path: "/api/finance/no-such-report",
		want: statuses{401, 403, 403, 404, 404}},

	// Usage: a developer's requests and their export, a provider's earnings; each the
	// caller's own, so a role without usage of that kind is refused rather than shown nothing.
	"GET /usage":                    {want: statuses{303, 200, 403, 403, 403}, login: true, members: customerMembers(200, 200, 200, 200)},
	"GET /usage.csv":                {want: statuses{303, 200, 403, 403, 403}, login: true, members: customerMembers(200, 200, 200, 200)},
	"GET /provider/earnings":        {want: statuses{303, 403, 200, 403, 403}, login: true, members: providerMembers(200, 200, 200, 200)},
	"GET /provider/performance":     {want: statuses{303, 403, 200, 403, 403}, login: true, members: providerMembers(200, 200, 200, 200)},
	"GET /api/usage":                {want: statuses{401, 200, 403, 403, 403}, members: customerMembers(200, 200, 200, 200)},
	"GET /api/usage.csv":            {want: statuses{401, 200, 403, 403, 403}, members: customerMembers(200, 200, 200, 200)},
	"GET /api/provider/earnings":    {want: statuses{401, 403, 200, 403, 403}, members: providerMembers(200, 200, 200, 200)},
	"GET /api/provider/performance": {want: statuses{401, 403, 200, 403, 403}, members: providerMembers(200, 200, 200, 200)},
	"GET /api/reports/savings":      {want: statuses{401, 200, 403, 403, 403}, members: customerMembers(200, 200, 200, 200)},
	"GET /api/reports/carbon":       {want: statuses{401, 200, 403, 403, 403}, members: customerMembers(200, 200, 200, 200)},

	// API keys: a developer's own. Revoking and changing a limit are tried on another
	// developer's key, which does not exist for the caller; a developer's own keys are tested
	// in keys_test.go. The page form answers 201 with the new key's secret rather than
	// redirecting.
	"GET /keys":    {want: statuses{303, 200, 403, 403, 403}, login: true, members: customerMembers(200, 200, 403, 200)},
	"GET /batches": {want: statuses{303, 200, 403, 403, 403}, login: true, members: customerMembers(200, 200, 403, 200)},
	// Another account's batch, like one that does not exist, is not found.
	"GET /batches/:id": {path: "/batches/batch_none", want: statuses{303, 404, 403, 403, 403}, login: true,
		members: customerMembers(404, 404, 403, 404)},
	"GET /batches/:id/progress": {path: "/batches/batch_none/progress", want: statuses{303, 404, 403, 403, 403}, login: true,
		members: customerMembers(404, 404, 403, 404)},
	"POST /batches": {body: url.Values{"endpoint": {"/v1/chat/completions"}},
		want: statuses{303, 422, 403, 403, 403}, noCSRF: csrfRefused, login: true, members: customerMembers(422, 422, 403, 403)},
	"POST /batches/:id/cancel": {path: "/batches/batch_none/cancel", body: url.Values{},
		want: statuses{303, 404, 403, 403, 403}, noCSRF: csrfRefused, login: true, members: customerMembers(404, 404, 403, 403)},
	"GET /batches/files/:id": {path: "/batches/files/file-none", want: statuses{303, 404, 403, 403, 403}, login: true, members: customerMembers(404, 404, 403, 404)},
	"POST /keys": {body: url.Values{"name": {"authz form"}},
		want: statuses{303, 201, 403, 403, 403}, noCSRF: csrfRefused, login: true, members: customerMembers(201, 201, 403, 403)},
	"POST /keys/:id/revoke": {path: "/keys/{key}/revoke", body: url.Values{},
		want: statuses{303, 404, 403, 403, 403}, noCSRF: csrfRefused, login: true, members: customerMembers(404, 404, 403, 403)},
	"GET /keys/:id/revoke": {path: "/keys/{key}/revoke", want: statuses{303, 404, 403, 403, 403}, login: true, members: customerMembers(404, 404, 403, 403)},
	"POST /keys/:id/limit": {path: "/keys/{key}/limit", body: url.Values{"limit_usd": {"12.50"}},
		want: statuses{303, 404, 403, 403, 403}, noCSRF: csrfRefused, login: true, members: customerMembers(404, 404, 403, 403)},
	// Budgets: a developer's own account; who pays sets them, every member sees them and chooses
	// their own alert e-mails. A member limit for a person of another account is not found; an
	// empty budget or balance alert removes none there is.
	"GET /budgets": {want: statuses{303, 200, 403, 403, 403}, login: true, members: customerMembers(200, 200, 200, 200)},
	"POST /budgets/members": {body: url.Values{"user_id": {"00000000-0000-0000-0000-000000000000"}, "limit_usd": {"5"}},
		want: statuses{303, 404, 403, 403, 403}, noCSRF: csrfRefused, login: true, members: customerMembers(404, 403, 404, 403)},
	"POST /budgets/account": {body: url.Values{"budget_usd": {""}},
		want: statuses{303, 303, 403, 403, 403}, noCSRF: csrfRefused, login: true, members: customerMembers(303, 403, 303, 403)},
	"POST /budgets/alerts": {body: url.Values{"credit_low_usd": {""}},
		want: statuses{303, 303, 403, 403, 403}, noCSRF: csrfRefused, login: true, members: customerMembers(303, 403, 303, 403)},
	"POST /budgets/subscriptions": {body: url.Values{"budget": {"on"}, "credit_low": {"on"}},
		want: statuses{303, 303, 403, 403, 403}, noCSRF: csrfRefused, login: true, members: customerMembers(303, 303, 303, 303)},
	// The same in JSON: a member limit for a person of another account is not found; removing a
	// budget or a balance alert there is none of succeeds.
	"GET /api/budgets": {want: statuses{401, 200, 403, 403, 403}, members: customerMembers(200, 200, 200, 200)},
	"PUT /api/budgets/members/:id": {path: "/api/budgets/members/{otheruser}", body: map[string]any{"limit_usd": "5"},
		want: statuses{401, 404, 403, 403, 403}, members: customerMembers(404, 403, 404, 403)},
	"PUT /api/budgets/account": {body: map[string]any{"budget_usd": nil},
		want: statuses{401, 204, 403, 403, 403}, members: customerMembers(204, 403, 204, 403)},
	"GET /api/budgets/alerts": {want: statuses{401, 200, 403, 403, 403}, members: customerMembers(200, 200, 200, 200)},
	"PUT /api/budgets/alerts": {body: map[string]any{"credit_low_usd": nil},
		want: statuses{401, 200, 403, 403, 403}, members: customerMembers(200, 403, 200, 403)},
	"PUT /api/budgets/subscriptions": {body: map[string]any{"budget_mail": true},
		want: statuses{401, 200, 403, 403, 403}, members: customerMembers(200, 200, 200, 200)},
	"GET /api/keys":  {want: statuses{401, 200, 403, 403, 403}, members: customerMembers(200, 200, 403, 200)},
	"POST /api/keys": {body: map[string]any{"name": "authz api"}, want: statuses{401, 201, 403, 403, 403}, members: customerMembers(201, 201, 403, 403)},
	"DELETE /api/keys/:id": {path: "/api/keys/{key}",
		want: statuses{401, 404, 403, 403, 403}, members: customerMembers(404, 404, 403, 403)},
	"PATCH /api/keys/:id": {path: "/api/keys/{key}", body: map[string]any{"limit_usd": "12.50"},
		want: statuses{401, 404, 403, 403, 403}, members: customerMembers(404, 404, 403, 403)},

	// The OpenAI-compatible gateway authenticates with API keys only, never with a session: a
	// session token sent as the bearer token is not an API key, so every caller is refused
	// with 401 in OpenAI's error shape (code invalid_api_key), and no CSRF check applies (a
	// page's cookies authenticate nothing here). Calls with API keys are tested on a whole
	// platform in cmd/gpumarket/gateway_test.go. An address the gateway does not serve is
	// 404 for anyone, as OpenAI answers it.
	"POST /v1/chat/completions": {body: map[string]any{"model": "m", "messages": []any{}}, want: everyone(http.StatusUnauthorized)},
	"POST /v1/completions":      {body: map[string]any{"model": "m", "prompt": "hi"}, want: everyone(http.StatusUnauthorized)},
	"POST /v1/embeddings":       {body: map[string]any{"model": "m", "input": "hi"}, want: everyone(http.StatusUnauthorized)},
	"GET /v1/models":            {want: everyone(http.StatusUnauthorized)},
	// A key reads its own limit and spend: the key is the credential, at OpenRouter's address too.
	"GET /v1/key":     {want: everyone(http.StatusUnauthorized)},
	"GET /api/v1/key": {want: everyone(http.StatusUnauthorized)},
	// The OpenAI Responses API, translated to chat completions: an API key, in OpenAI's error shape.
	"POST /v1/responses": {body: map[string]any{"model": "m", "input": "hi"}, want: everyone(http.StatusUnauthorized)},
	// The Anthropic Messages API takes API keys as X-Api-Key or a bearer token.
	"POST /v1/messages": {body: map[string]any{"model": "m", "max_tokens": 1, "messages": []any{}},
		want: everyone(http.StatusUnauthorized)},
	"POST /v1/messages/count_tokens": {body: map[string]any{"model": "m", "messages": []any{}},
		want: everyone(http.StatusUnauthorized)},
	// The Batch API takes API keys too: a session is no credential for it.
	"POST /v1/files":              {want: everyone(http.StatusUnauthorized)},
	"GET /v1/files":               {want: everyone(http.StatusUnauthorized)},
	"GET /v1/files/:id":           {want: everyone(http.StatusUnauthorized)},
	"GET /v1/files/:id/content":   {want: everyone(http.StatusUnauthorized)},
	"DELETE /v1/files/:id":        {want: everyone(http.StatusUnauthorized)},
	"POST /v1/batches":            {body: map[string]any{"input_file_id": "file-x"}, want: everyone(http.StatusUnauthorized)},
	"GET /v1/batches":             {want: everyone(http.StatusUnauthorized)},
	"GET /v1/batches/:id":         {want: everyone(http.StatusUnauthorized)},
	"POST /v1/batches/:id/cancel": {want: everyone(http.StatusUnauthorized)},
	"echo_route_not_found /v1/*": {method: http.MethodPost, path: "/v1/no-such-endpoint",
		want: everyone(http.StatusNotFound)},

	// An account's members (web/account): everyone in it sees them, its owners and admins change
	// them, and the platform's finance and admin, who act only through their platform roles, are
	// refused. Changes name a login of another account, which is no member here; the invitation
	// revoked names none. Members are changed and removed for real in members_test.go.
	"GET /account/members": {want: statuses{303, 200, 200, 403, 403}, members: bothMembers(200, 200, 200, 200), login: true},
	"POST /account/members/invite": {body: url.Values{"email": {"authz-invitee@example.com"}, "role": {"read-only"}},
		want: statuses{303, 200, 200, 403, 403}, members: bothMembers(200, 403, 403, 403), noCSRF: csrfRefused, login: true},
	"POST /account/members/invitations/:id/revoke": {path: "/account/members/invitations/" + noSuchDocument + "/revoke",
		body: url.Values{}, want: statuses{303, 404, 404, 403, 403}, members: bothMembers(404, 403, 403, 403),
		noCSRF: csrfRefused, login: true},
	"POST /account/members/:id/role": {path: "/account/members/{otheruser}/role", body: url.Values{"role": {"read-only"}},
		want: statuses{303, 404, 404, 403, 403}, members: bothMembers(404, 403, 403, 403), noCSRF: csrfRefused, login: true},
	"GET /account/members/:id/remove": {path: "/account/members/{otheruser}/remove",
		want: statuses{303, 404, 404, 403, 403}, members: bothMembers(404, 403, 403, 403), login: true},
	"POST /account/members/:id/remove": {path: "/account/members/{otheruser}/remove", body: url.Values{},
		want: statuses{303, 404, 404, 403, 403}, members: bothMembers(404, 403, 403, 403), noCSRF: csrfRefused, login: true},
	// The same in JSON: every member lists the members, owners and admins change them and alone
	// see, send and revoke invitations.
	"GET /api/account/members": {want: statuses{401, 200, 200, 403, 403}, members: bothMembers(200, 200, 200, 200)},
	"PATCH /api/account/members/:id": {path: "/api/account/members/{otheruser}", body: map[string]string{"role": "read-only"},
		want: statuses{401, 404, 404, 403, 403}, members: bothMembers(404, 403, 403, 403)},
	"DELETE /api/account/members/:id": {path: "/api/account/members/{otheruser}",
		want: statuses{401, 404, 404, 403, 403}, members: bothMembers(404, 403, 403, 403)},
	"GET /api/account/invitations": {want: statuses{401, 200, 200, 403, 403}, members: bothMembers(200, 403, 403, 403)},
	"POST /api/account/invitations": {body: map[string]string{"email": "authz-api-invitee-{caller}@example.com", "role": "read-only"},
		want: statuses{401, 201, 201, 403, 403}, members: bothMembers(201, 403, 403, 403)},
	"DELETE /api/account/invitations/:id": {path: "/api/account/invitations/" + noSuchDocument,
		want: statuses{401, 404, 404, 403, 403}, members: bothMembers(404, 403, 403, 403)},
	// Switching to the demo developer's account: its owner and members switch to where they
	// are (and stay there), anyone else is no member of it.
	"POST /account/switch": {body: url.Values{"account_id": {"{account}"}},
		want: statuses{303, 303, 403, 403, 403}, members: customerMembers(303, 303, 303, 303), noCSRF: csrfRefused, login: true},
	"POST /api/account/switch": {body: map[string]string{"account_id": "{account}"},
		want: statuses{401, 200, 403, 403, 403}, members: customerMembers(200, 200, 200, 200)},
	// An invitation's link is open to whoever holds it; a token that names none is not found.
	"GET /invitations": {path: "/invitations?token=no-such-token", want: everyone(http.StatusNotFound)},
	"POST /invitations": {body: url.Values{"token": {"no-such-token"}, "password": {"authz-password-1"}},
		want: everyone(http.StatusNotFound), noCSRF: csrfRefused},

	// Admin API.
	"GET /api/admin/users":         {want: statuses{401, 403, 403, 403, 200}},
	"GET /api/admin/discrepancies": {want: statuses{401, 403, 403, 403, 200}},
	"POST /api/admin/discrepancies/resolve": {body: map[string]string{"request_id": "req_not_flagged", "note": "looked into"},
		want: statuses{401, 403, 403, 403, 404}},
	"GET /api/admin/rig-reports":  {want: statuses{401, 403, 403, 403, 200}},
	"GET /api/admin/batches":      {want: statuses{401, 403, 403, 403, 200}},
	"GET /api/admin/usage-stream": {want: statuses{401, 403, 403, 403, 200}},
	"POST /api/admin/users/:id/role": {path: "/api/admin/users/{user}/role", body: map[string]string{"role": "developer"},
		want: statuses{401, 403, 403, 403, 200}},
}

// TestAuthz calls every registered route as an anonymous visitor and as each role and checks
// the status against authzTable.
func TestAuthz(t *testing.T) {
	t.Parallel()
	// Each caller gets a server and database of its own, so that one caller's calls (a login,
	// a new rig, a role set) neither change what another sees nor spend another's login
	// attempts: the limiter allows 5 a client address and 5 an email.
	// The members of an account share one: each is refused what would change another's
	// calls (another's role, its removal), and what they may change they change alike.
	envs := make([]*authzEnv, len(callers))
	shared := map[caller]*authzEnv{}
	for _, c := range callers {
		if !c.isMember() {
			envs[c] = newAuthzEnv(t, c)
			continue
		}
		owner, _ := c.membership()
		if shared[owner] == nil {
			shared[owner] = newAuthzEnv(t, anonymous)
		}
		envs[c] = shared[owner].as(t, c)
	}

	var keys []string
	// The pages' and the API's routes, and the /v1 gateway's, mounted beside them.
	routes := append(envs[0].server.Echo().Routes(), envs[0].gateway.Echo().Routes()...)
	for _, r := range routes {
		key := r.Method + " " + r.Path
		keys = append(keys, key)
		row, ok := authzTable[key]
		if !ok {
			t.Errorf("route %q has no row in authzTable: add one that says who may call it", key)
			continue
		}
		method := r.Method
		if row.method != "" {
			method = row.method
		}
		if isPageForm(method, r.Path) && row.noCSRF == (statuses{}) {
			t.Errorf("page form %q must say in noCSRF what a post without a CSRF token gets", key)
		}
		ownerMayCall := row.want[developer] != http.StatusForbidden || row.want[provider] != http.StatusForbidden
		sameForAll := row.want[developer] == row.want[provider] && row.want[provider] == row.want[finance] &&
			row.want[finance] == row.want[admin]
		if ownerMayCall && !sameForAll && row.members == (memberStatuses{}) {
			t.Errorf("route %q, which an account's owner may call, must say in members what each member role gets", key)
		}
	}
	for key := range authzTable {
		if !slices.Contains(keys, key) {
			t.Errorf("authzTable row %q names no registered route: remove it", key)
		}
	}
	slices.Sort(keys)

	for _, key := range keys {
		row, ok := authzTable[key]
		if !ok {
			continue
		}
		for _, c := range callers {
			if row.noCSRF != (statuses{}) {
				t.Run(fmt.Sprintf("%s as %s without CSRF token", key, c), func(t *testing.T) {
					envs[c].check(t, c, key, row, false, row.noCSRF[min(c, admin)])
				})
			}
			t.Run(fmt.Sprintf("%s as %s", key, c), func(t *testing.T) {
				envs[c].check(t, c, key, row, true, row.status(c))
			})
		}
	}
}

// status is what the caller gets from the row's route: its column of want, or of members; a
// row that leaves members out gives each member what its account's owner gets.
func (row route) status(c caller) int {
	if !c.isMember() {
		return row.want[c]
	}
	if row.members != (memberStatuses{}) {
		return row.members[c-customerAdmin]
	}
	owner, _ := c.membership()
	return row.want[owner]
}

// isPageForm reports whether a request changes state through a page rather than the API.
func isPageForm(method, path string) bool {
	return method != http.MethodGet && method != http.MethodHead && !isAPIPath(path)
}

// isAPIPath reports whether a path is called with a bearer token rather than a page's cookies:
// the JSON API and the /v1 gateway.
func isAPIPath(path string) bool {
	return strings.HasPrefix(path, "/api/") || strings.HasPrefix(path, "/v1/")
}

// authzEnv is a server as one caller sees it.
type authzEnv struct {
	*env
	caller    caller
	token     string // the caller's session; empty for anonymous
	csrf      string // the CSRF token (and cookie value) the login page gave the caller
	offering  string // an active offering of Northwind Compute
	user      string // the demo developer's user id
	account   string // the demo developer's account id
	otherUser string // a login of another customer account (Other Labs)
	purchase  string // a purchase of credits by another developer
	key       string // an API key of another developer
	// webhook is a webhook endpoint of another developer, delivery a delivery to it.
	webhook, delivery string
	// The documents of last month, closed over the demo's past traffic: another developer's
	// invoice (issued, then voided) and its credit note, another provider's issued statement.
	invoice, creditNote, statement, period string
}

func newAuthzEnv(t *testing.T, c caller) *authzEnv {
	t.Helper()
	ctx := context.Background()
	// The reports pages answer from reports made here: who may see them is under test.
	sav, car := sampleReports(t)
	a := &authzEnv{env: setupWith(t, func(cfg *web.Config, pool *pgxpool.Pool) {
		cfg.Reports = &fixedReports{savings: sav, carbon: car}
		cfg.Requests = requestlog.NewRequestLog(pool, metering.GatewayReads{}, nil, nil)
	}), caller: c}
	a.token = a.session(t)
	northwind, err := a.accounts.UserByEmail(ctx, "northwind@example.com")
	if err != nil {
		t.Fatal(err)
	}
	rigs, err := a.catalog.ListOwn(ctx, northwind.AccountID)
	if err != nil || len(rigs) == 0 {
		t.Fatalf("Northwind's rigs: %v, %d", err, len(rigs))
	}
	a.offering = rigs[0].ID
	dev, err := a.accounts.UserByEmail(ctx, "developer@example.com")
	if err != nil {
		t.Fatal(err)
	}
	a.user, a.account = dev.ID, dev.AccountID
	other, err := a.accounts.SignUp(ctx, accounts.SignUpInput{Email: "authz-other-dev@example.com", Password: demo.Password,
		Role: accounts.RoleDeveloper, AccountName: "Other Labs"})
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := a.credits.Start(ctx, credits.StartInput{AccountID: other.AccountID, UserID: other.ID, AmountCents: 2000,
		ReturnURL: a.srv.URL + "/credits/return", CancelURL: a.srv.URL + "/credits"})
	if err != nil {
		t.Fatal(err)
	}
	a.purchase, a.otherUser = p.ID, other.ID
	k, _, err := a.accounts.CreateKey(ctx, other, accounts.NewKeyInput{Name: "other's app"})
	if err != nil {
		t.Fatal(err)
	}
	a.key = k.ID
	e, _, err := a.webhooks.CreateEndpoint(ctx, other.AccountID, other.ID, webhooks.EndpointInput{URL: "http://127.0.0.1:9/hooks"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.webhooks.SendTest(ctx, other.AccountID, e.ID); err != nil {
		t.Fatal(err)
	}
	deliveries, err := a.webhooks.Deliveries(ctx, other.AccountID, "", 1)
	if err != nil || len(deliveries) != 1 {
		t.Fatalf("the other developer's delivery: %v, %v", deliveries, err)
	}
	a.webhook, a.delivery = e.ID, deliveries[0].ID
	a.seedDocuments(t)
	a.csrf = csrfFromPage(t, browserClient(t), a.srv.URL+"/login")
	return a
}

// as is the same server and data as a, called by the member caller, who joins its account.
func (a *authzEnv) as(t *testing.T, c caller) *authzEnv {
	t.Helper()
	m := *a
	m.caller = c
	m.join(t, c)
	m.token = m.session(t)
	return &m
}

// join makes the member caller's login through the way a person takes: its account's owner
// invites its email with its role, and it accepts the link the e-mail carries with a password.
func (a *authzEnv) join(t *testing.T, c caller) {
	t.Helper()
	ctx := context.Background()
	ownerCaller, role := c.membership()
	owner, err := a.accounts.Login(ctx, accounts.LoginInput{Email: ownerCaller.email(), Password: demo.Password, ClientIP: "authz-join"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.accounts.Invite(ctx, owner, accounts.InviteInput{Email: c.email(), Role: role, LinkBase: a.srv.URL}); err != nil {
		t.Fatal(err)
	}
	token := strings.TrimPrefix(a.mail.inviteLink(t, c.email()), accounts.InvitationPath)
	if _, err := a.accounts.AcceptInvitation(ctx, accounts.AcceptInput{Token: token, Password: demo.Password}); err != nil {
		t.Fatal(err)
	}
}

// seedDocuments closes last month over the demo's past traffic and issues the documents the
// table's rows name.
func (a *authzEnv) seedDocuments(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if _, err := history.Seed(ctx, history.Config{Pool: a.pool}, time.Now()); err != nil {
		t.Fatal(err)
	}
	fin, err := a.accounts.UserByEmail(ctx, "finance@example.com")
	if err != nil {
		t.Fatal(err)
	}
	last := invoicing.PeriodOf(time.Now()).Prev()
	if _, err := a.invoicing.Close(ctx, invoicing.CloseInput{Period: last, By: fin.ID}); err != nil {
		t.Fatal(err)
	}
	a.period = last.String()
	ofAccount := func(email string) string {
		u, err := a.accounts.UserByEmail(ctx, email)
		if err != nil {
			t.Fatal(err)
		}
		return u.AccountID
	}
	invoices, err := a.invoicing.Invoices(ctx, invoicing.InvoiceFilter{Period: last, AccountID: ofAccount("studio@example.com")})
	if err != nil || len(invoices.Invoices) != 1 {
		t.Fatalf("Brightline's invoice of %s: %v, %v", last, invoices, err)
	}
	statements, err := a.invoicing.Statements(ctx, invoicing.StatementFilter{Period: last, ProviderAccountID: ofAccount("northwind@example.com")})
	if err != nil || len(statements.Statements) != 1 {
		t.Fatalf("Northwind's statement of %s: %v, %v", last, statements, err)
	}
	a.invoice, a.statement = invoices.Invoices[0].ID, statements.Statements[0].ID
	if res, err := a.invoicing.ApproveInvoices(ctx, fin.ID, []string{a.invoice}); err != nil || res[0].Err != nil {
		t.Fatalf("approve: %v %v", err, res)
	}
	if res, err := a.invoicing.ApproveStatements(ctx, fin.ID, []string{a.statement}); err != nil || res[0].Err != nil {
		t.Fatalf("approve: %v %v", err, res)
	}
	v, err := a.invoicing.VoidInvoice(ctx, invoicing.VoidInput{ID: a.invoice, By: fin.ID, Reason: invoicing.VoidWrongDetails})
	if err != nil {
		t.Fatal(err)
	}
	a.creditNote = v.CreditNoteID
}

// session logs the caller in through the service rather than the API, under a client address
// of its own, so that the login routes under test keep their attempts.
func (a *authzEnv) session(t *testing.T) string {
	t.Helper()
	if a.caller == anonymous {
		return ""
	}
	sess, err := a.accounts.Login(context.Background(),
		accounts.LoginInput{Email: a.caller.email(), Password: demo.Password, ClientIP: "authz-test"})
	if err != nil {
		t.Fatal(err)
	}
	return sess.Token
}

// check sends the row's request as the caller, the way the caller would: API routes with a
// bearer token, pages with the session and CSRF cookies, and checks the status and where a
// redirect goes.
func (a *authzEnv) check(t *testing.T, c caller, key string, row route, withCSRF bool, want int) {
	method, path, _ := strings.Cut(key, " ")
	if row.method != "" {
		method = row.method
	}
	if row.path != "" {
		path = row.path
	}
	ids := strings.NewReplacer("{offering}", a.offering, "{user}", a.user, "{account}", a.account, "{purchase}", a.purchase,
		"{key}", a.key, "{otheruser}", a.otherUser, "{caller}", c.String(), "{webhook}", a.webhook, "{delivery}", a.delivery,
		"{invoice}", a.invoice, "{creditnote}", a.creditNote, "{statement}", a.statement, "{period}", a.period)
	path = ids.Replace(path)
	api := isAPIPath(path)

	var body io.Reader
	contentType := ""
	switch b := row.body.(type) {
	case nil:
	case url.Values:
		form := url.Values{}
		for k, vs := range b {
			for _, v := range vs {
				form.Add(k, ids.Replace(v))
			}
		}
		if withCSRF {
			form.Set("_csrf", a.csrf)
		}
		body, contentType = strings.NewReader(form.Encode()), "application/x-www-form-urlencoded"
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		body, contentType = strings.NewReader(ids.Replace(string(raw))), "application/json"
	}
	req, err := http.NewRequest(method, a.srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	token := a.token
	if row.endsSession {
		token = a.session(t)
	}
	if api {
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
	} else {
		req.AddCookie(&http.Cookie{Name: csrfCookieName, Value: a.csrf})
		if token != "" {
			req.AddCookie(&http.Cookie{Name: sessionCookieName, Value: token})
		}
	}
	res, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)

	if res.StatusCode != want {
		t.Fatalf("%s %s as %s: status %d, want %d\n%.300s", method, path, c, res.StatusCode, want, raw)
	}
	switch {
	case res.StatusCode == http.StatusSeeOther && c == anonymous && row.login:
		next := req.URL.RequestURI()
		if method != http.MethodGet {
			next = "/"
		}
		if got, wantLoc := res.Header.Get("Location"), "/login?next="+url.QueryEscape(next); got != wantLoc {
			t.Errorf("redirect to %q, want %q", got, wantLoc)
		}
	case res.StatusCode == http.StatusSeeOther:
		// A logged-in caller is never sent to log in: its session counted.
		if loc := res.Header.Get("Location"); loc == "" || (c != anonymous && strings.HasPrefix(loc, "/login")) {
			t.Errorf("redirect to %q", loc)
		}
	case strings.HasPrefix(path, "/v1/messages") && res.StatusCode == http.StatusUnauthorized:
		var e struct {
			Type  string `json:"type"`
			Error struct {
				Type string `json:"type"`
			} `json:"error"`
		}
		if err := json.Unmarshal(raw, &e); err != nil || e.Type != "error" || e.Error.Type != "authentication_error" {
			t.Errorf("a /v1/messages refusal in Anthropic's shape, an authentication_error, got %s (%v)", raw, err)
		}
	case (strings.HasPrefix(path, "/v1/") || path == "/api/v1/key") && res.StatusCode == http.StatusUnauthorized:
		var e struct {
			Error struct {
				Type string `json:"type"`
				Code string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(raw, &e); err != nil || e.Error.Type != "invalid_request_error" || e.Error.Code != "invalid_api_key" {
			t.Errorf("a /v1 refusal in OpenAI's shape with code invalid_api_key, got %s (%v)", raw, err)
		}
	case api && (res.StatusCode == http.StatusUnauthorized || res.StatusCode == http.StatusForbidden):
		var e apiErrorJSON
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatalf("decode %q: %v", raw, err)
		}
		wantCode := map[int]string{http.StatusUnauthorized: "unauthorized", http.StatusForbidden: "forbidden"}[res.StatusCode]
		if e.Error.Code != wantCode {
			t.Errorf("error code %q, want %q", e.Error.Code, wantCode)
		}
	}
}

// noSuchPayout is a payout id that names no payout, noSuchDocument one that names no invoice
// or statement.
const (
	noSuchPayout   = "00000000-0000-4000-8000-000000000000"
	noSuchDocument = "00000000-0000-4000-8000-00000000000d"
)

// noSuchInvoice is an invoice id that names no invoice.
const noSuchInvoice = "00000000-0000-4000-8000-00000000000a"

// billingForm is valid billing details as the billing details page posts them.
func billingForm() url.Values {
	return url.Values{"legal_name": {"Authz Ltd"}, "address": {"1 Road\nDublin"}, "country": {"IE"}, "vat_id": {""}}
}

// noRedirects is a client that shows a redirect rather than following it.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// priceForm is a valid price change as the price book page posts it, for a far future.
func priceForm() url.Values {
	return url.Values{"tier": {"standard"}, "input_usd_per_mtok": {"0.2"}, "output_usd_per_mtok": {"0.4"},
		"effective_from": {"2099-01-01T00:00"}}
}
