package core

import (
	"net/http"
	"testing"

	"github.com/gpumarket/gpumarket/services/accounts"
)

// TestTheLongestPrefixGuardsARoute checks the access table where rules nest: a customer's list
// of invoices beside the document every reader of it may open, and the public routes beside
// the guarded ones that share their first letters.
func TestTheLongestPrefixGuardsARoute(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		pattern string
		rule    string // the prefix of the rule that guards it; "" for a public route
	}{
		{"/invoices", "/invoices"},
		{"/invoices/:id", "/invoices/"},
		{"/invoices/:id/pdf", "/invoices/"},
		{"/api/invoices", "/api/invoices"},
		{"/api/invoices/:id", "/api/invoices"},
		{"/api/invoices/:id/pdf", "/api/invoices/:id/pdf"},
		{"/statements/:id/csv", "/statements/"},
		{"/provider/statements", "/provider/statements"},
		{"/keys/:id/revoke", "/keys/:id/revoke"},
		{"/keys/:id/limit", "/keys"},
		{"/api/provider/offerings/:id/benchmark", "/api/provider/"},
		{"/api/offerings/:id/benchmark", ""},
		{"/finance/discrepancies", "/finance"},
		{"/admin/discrepancies", "/admin"},
		{"/account/members/:id/remove", "/account/members/:id/remove"},
		{"/account/members/:id/role", "/account/members"},
		{"/logout", "/logout"},
		{"/login", ""},
		{"/invitations", ""},
		{"/webhooks/stripe", ""},
	} {
		r, ok := ruleFor(c.pattern)
		if ok != (c.rule != "") || r.prefix != c.rule {
			t.Errorf("%s: guarded by %q (%v), want %q", c.pattern, r.prefix, ok, c.rule)
		}
	}
}

// TestAMemberRoleReadsOrChanges checks the rules of members against the platform's roles: a
// read-only member reads the keys but changes nothing, a billing member pays but sees no keys,
// a provider's member has no customer's pages, and the platform's finance acts only as finance.
func TestAMemberRoleReadsOrChanges(t *testing.T) {
	t.Parallel()
	customerAs := func(m accounts.MemberRole) accounts.Session {
		return accounts.Session{User: accounts.User{Role: accounts.RoleDeveloper},
			Account: accounts.Account{Kind: accounts.KindCustomer}, Member: m}
	}
	providerOwner := accounts.Session{User: accounts.User{Role: accounts.RoleProvider},
		Account: accounts.Account{Kind: accounts.KindProvider}, Member: accounts.MemberOwner}
	staff := accounts.Session{User: accounts.User{Role: accounts.RoleFinance},
		Account: accounts.Account{Kind: accounts.KindCustomer}, Member: accounts.MemberOwner}
	for _, c := range []struct {
		pattern, method string
		sess            accounts.Session
		want            bool
	}{
		{"/keys", http.MethodGet, customerAs(accounts.MemberReadOnly), true},
		{"/keys", http.MethodPost, customerAs(accounts.MemberReadOnly), false},
		{"/keys/:id/revoke", http.MethodGet, customerAs(accounts.MemberReadOnly), false},
		{"/keys", http.MethodPost, customerAs(accounts.MemberDeveloper), true},
		{"/keys", http.MethodGet, customerAs(accounts.MemberBilling), false},
		{"/credits/checkout", http.MethodPost, customerAs(accounts.MemberBilling), true},
		{"/credits", http.MethodGet, customerAs(accounts.MemberDeveloper), false},
		{"/invoices", http.MethodGet, customerAs(accounts.MemberReadOnly), true},
		{"/account/members", http.MethodGet, customerAs(accounts.MemberReadOnly), true},
		{"/account/members/:id/remove", http.MethodPost, customerAs(accounts.MemberDeveloper), false},
		{"/account/members/:id/remove", http.MethodPost, customerAs(accounts.MemberAdmin), true},
		{"/keys", http.MethodGet, providerOwner, false},
		{"/provider/rigs", http.MethodGet, providerOwner, true},
		{"/keys", http.MethodGet, staff, false},
		{"/invoices/:id", http.MethodGet, staff, true},
	} {
		r, _ := ruleFor(c.pattern)
		if got := r.allows(c.sess, c.method); got != c.want {
			t.Errorf("%s %s as %s %s: allowed %v, want %v", c.method, c.pattern, c.sess.Account.Kind, c.sess.Member, got, c.want)
		}
	}
}

// TestMayViewFollowsTheMemberRole checks the navigation's question against the table: a billing
// member of a customer account may not view the keys but may view the invoices, a visitor only
// what no rule guards, and finance its own pages only.
func TestMayViewFollowsTheMemberRole(t *testing.T) {
	t.Parallel()
	customerAs := func(m accounts.MemberRole) accounts.Session {
		return accounts.Session{User: accounts.User{Role: accounts.RoleDeveloper},
			Account: accounts.Account{Kind: accounts.KindCustomer}, Member: m}
	}
	staff := accounts.Session{User: accounts.User{Role: accounts.RoleFinance},
		Account: accounts.Account{Kind: accounts.KindCustomer}, Member: accounts.MemberOwner}
	for _, c := range []struct {
		path string
		sess accounts.Session
		want bool
	}{
		{"/keys", customerAs(accounts.MemberBilling), false},
		{"/invoices", customerAs(accounts.MemberBilling), true},
		{"/credits", customerAs(accounts.MemberBilling), true},
		{"/credits", customerAs(accounts.MemberDeveloper), false},
		{"/keys", customerAs(accounts.MemberDeveloper), true},
		{"/invoices", customerAs(accounts.MemberDeveloper), false},
		{"/usage", customerAs(accounts.MemberReadOnly), true},
		{"/catalog", accounts.Session{}, true},
		{"/usage", accounts.Session{}, false},
		{"/finance/invoices", staff, true},
		{"/invoices", staff, false},
		{"/admin/users", staff, false},
	} {
		if got := MayView(c.sess, c.path); got != c.want {
			t.Errorf("%s as %s %s %s: %v, want %v", c.path, c.sess.User.Role, c.sess.Account.Kind, c.sess.Member, got, c.want)
		}
	}
}
