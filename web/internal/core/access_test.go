package core

import (
	"slices"
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
		public  bool
		roles   []accounts.Role
	}{
		{"/invoices", false, developer},
		{"/invoices/:id", false, customerDocuments},
		{"/invoices/:id/pdf", false, customerDocuments},
		{"/api/invoices", false, developer},
		{"/api/invoices/:id", false, developer},
		{"/api/invoices/:id/pdf", false, customerDocuments},
		{"/statements/:id/csv", false, providerDocuments},
		{"/provider/statements", false, provider},
		{"/api/provider/offerings/:id/benchmark", false, provider},
		{"/api/offerings/:id/benchmark", true, nil},
		{"/finance/discrepancies", false, finance},
		{"/admin/discrepancies", false, admin},
		{"/logout", false, nil},
		{"/login", true, nil},
		{"/webhooks/stripe", true, nil},
	} {
		r, ok := ruleFor(c.pattern)
		if ok == c.public {
			t.Errorf("%s: guarded = %v, want %v", c.pattern, ok, !c.public)
			continue
		}
		if !slices.Equal(r.roles, c.roles) {
			t.Errorf("%s: roles %v, want %v", c.pattern, r.roles, c.roles)
		}
	}
}
