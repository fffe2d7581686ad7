package web_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/invoicing"
)

// In the demo's two closed months only one invoice carries the discrepancy flag: Brightline's
// of last month, whose rig over-reported one request. The canceled requests, billed within
// their bounds with no excess, flag nothing. The flag says how much and links to the flagged
// requests, which finance opens (a developer may not) and resolves there with a CSRF-protected
// form: clawed back, the provider's statement no longer holds it, the audit log records it.
func TestFinanceResolvesTheDemosOneFlag(t *testing.T) {
	t.Parallel()
	w := newFinanceWorld(t)
	w.closeBoth(t)
	ctx := context.Background()
	all, err := w.invoicing.Invoices(ctx, invoicing.InvoiceFilter{Flag: invoicing.FlagDiscrepancy})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Invoices) != 1 || all.Invoices[0].AccountID != w.brightline || all.Invoices[0].Period != w.last {
		t.Fatalf("invoices flagged with a discrepancy: %+v; want Brightline's of %s alone", all.Invoices, w.last)
	}
	inv := all.Invoices[0]
	if len(inv.FlagNotes) != len(inv.Flags) || !strings.Contains(inv.FlagNotes[slices.Index(inv.Flags, invoicing.FlagDiscrepancy)], "1 request flagged with an excess") {
		t.Errorf("the invoice's flag notes: %q", inv.FlagNotes)
	}
	list, err := w.invoicing.FlaggedRequests(ctx, invoicing.FlagFilter{})
	if err != nil || len(list) != 1 || list[0].AccountID != w.brightline || list[0].ExcessOutput <= 0 || list[0].Payable.Sign() <= 0 {
		t.Fatalf("the flagged requests: %+v, %v", list, err)
	}
	flagged := list[0]
	stmt, err := w.invoicing.Statements(ctx, invoicing.StatementFilter{Period: w.last, ProviderAccountID: flagged.ProviderID})
	if err != nil || len(stmt.Statements) != 1 || stmt.Statements[0].Held != -flagged.Earned ||
		!slices.Contains(stmt.Statements[0].Flags, invoicing.FlagDiscrepancy) {
		t.Fatalf("the provider's statement of %s: %+v, %v; want %s held", w.last, stmt.Statements, err, flagged.Earned)
	}

	// The developer may not open the flags page.
	dev, _ := loginBrowser(t, w.env, "developer@example.com")
	if res, err := dev.Get(w.srv.URL + "/finance/flags"); err != nil || res.StatusCode != http.StatusForbidden {
		t.Fatalf("the developer opening /finance/flags: %v, %v; want 403", res, err)
	}

	// Finance follows the invoice's flag to the flagged request.
	client, _ := loginBrowser(t, w.env, "finance@example.com")
	doc := getPage(t, client, w.srv.URL+"/finance/invoices/"+inv.ID)
	link := doc.Find(`[data-testid="doc-flags"] [data-flag="discrepancy"]`)
	href, _ := link.Attr("href")
	if !strings.HasPrefix(href, "/finance/flags?") || !strings.Contains(href, "account="+w.brightline) ||
		!strings.Contains(text(link), "usage in excess: 1 request flagged with an excess") {
		t.Fatalf("the invoice's discrepancy flag: %q linking to %q", text(link), href)
	}
	page := getPage(t, client, w.srv.URL+href)
	rows := page.Find(`[data-testid="flag-row"]`)
	if rows.Length() != 1 || rows.AttrOr("data-request", "") != flagged.RequestID ||
		text(rows.Find(`[data-testid="earned"]`)) != invoicing.RequestDollars(flagged.Payable) {
		t.Fatalf("the flags page: %d rows, %q", rows.Length(), text(rows))
	}
	claw := text(rows.Find(`[data-testid="claw-back"]`))
	if !strings.Contains(claw, "Claw back "+invoicing.RequestDollars(flagged.Payable)) ||
		!strings.Contains(claw, "credit "+invoicing.RequestDollars(flagged.Charge)) {
		t.Errorf("the claw-back button says %q", claw)
	}
	csrf := page.Find(`[data-testid="resolve-form"] input[name="_csrf"]`).AttrOr("value", "")
	form := url.Values{"request_id": {flagged.RequestID}, "resolution": {"clawed_back"}, "note": {"over-reported"},
		"account": {w.brightline}, "period": {w.last.String()}}
	wantStatus(t, postForm(t, client, w.srv.URL+"/finance/flags/resolve", form), http.StatusForbidden) // no CSRF token
	form.Set("_csrf", csrf)
	res := postForm(t, client, w.srv.URL+"/finance/flags/resolve", form)
	wantStatus(t, res, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); !strings.Contains(loc, "flash=flag-clawback") {
		t.Errorf("the resolution redirects to %q", loc)
	}
	page = getPage(t, client, w.srv.URL+href)
	if got := text(page.Find(`[data-testid="resolution"]`)); !strings.HasPrefix(got, "clawed back by finance@example.com") {
		t.Errorf("the resolved row says %q", got)
	}
	entries, err := w.audit.List(ctx, audit.Filter{SubjectKind: "request", SubjectID: flagged.RequestID})
	if err != nil || len(entries.Entries) != 1 || entries.Entries[0].Action != audit.ActionResolveFlag {
		t.Errorf("the audit log of the request: %+v, %v", entries.Entries, err)
	}
	// The invoice, recomputed as it is approved, carries no discrepancy flag any more.
	if _, err := w.invoicing.ApproveInvoices(ctx, w.finance, []string{inv.ID}); err != nil {
		t.Fatal(err)
	}
	if got, err := w.invoicing.Invoice(ctx, inv.ID); err != nil || slices.Contains(got.Flags, invoicing.FlagDiscrepancy) {
		t.Errorf("the approved invoice's flags: %v, %v", got.Flags, err)
	}
}
