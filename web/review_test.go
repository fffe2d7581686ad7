package web_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/invoicing"
)

// queueRow is a row of a review queue as the page shows it.
type queueRow struct {
	id, status, party, total, due string
	flags, actions                []string
	selectable                    bool
}

func queueRows(doc *goquery.Document) []queueRow {
	var rows []queueRow
	doc.Find(`[data-testid="queue-row"]`).Each(func(_ int, s *goquery.Selection) {
		r := queueRow{id: s.AttrOr("data-id", ""), status: text(s.Find(`[data-testid="row-status"]`)),
			party: text(s.Find(`[data-testid="row-party"]`)), total: text(s.Find(`[data-testid="row-total"]`)),
			due: text(s.Find(`[data-testid="row-due"]`)), selectable: s.Find(`[data-testid="select"]`).Length() == 1}
		s.Find(`[data-testid="flag"]`).Each(func(_ int, f *goquery.Selection) { r.flags = append(r.flags, f.AttrOr("data-flag", "")) })
		s.Find(`[data-testid="row-action"]`).Each(func(_ int, a *goquery.Selection) { r.actions = append(r.actions, text(a)) })
		rows = append(rows, r)
	})
	return rows
}

func rowIDs(rows []queueRow) []string {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.id
	}
	return ids
}

func flagStrings(flags []invoicing.Flag) []string {
	out := []string{}
	for _, f := range flags {
		out = append(out, string(f))
	}
	return out
}

// The invoice queue lists every invoice with its flags and the actions its status allows, a
// checkbox on each draft; each filter (period, customer by name or id, flag, least and most
// total, status) keeps exactly the invoices that match it; a filter that does not parse is
// named. After approval, an invoice with something due allows marking it paid and voiding,
// one prepaid only voiding. The statement queue filters by provider.
func TestReviewQueueFiltersFlagsAndActions(t *testing.T) {
	t.Parallel()
	w := newFinanceWorld(t)
	w.closeBoth(t)
	ctx := context.Background()
	client, csrf := loginBrowser(t, w.env, "finance@example.com")
	all, err := w.invoicing.Invoices(ctx, invoicing.InvoiceFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Invoices) < 4 {
		t.Fatalf("%d invoices after closing two months of the demo's traffic, want at least 4", len(all.Invoices))
	}
	rows := queueRows(getPage(t, client, w.srv.URL+"/finance/invoices"))
	if len(rows) != len(all.Invoices) {
		t.Fatalf("the queue shows %d invoices, want %d", len(rows), len(all.Invoices))
	}
	for i, inv := range all.Invoices {
		r := rows[i]
		if r.id != inv.ID || r.status != "draft" || r.party != inv.AccountName || r.total != inv.Total.String() ||
			!slices.Equal(r.flags, flagStrings(inv.Flags)) || !slices.Equal(r.actions, []string{"approve"}) || !r.selectable {
			t.Errorf("row %d: %+v, want %s of %s, %s, flags %v, approve only, with a checkbox", i, r, inv.ID, inv.AccountName,
				inv.Total, inv.Flags)
		}
	}
	juniper := w.invoiceOf(t, w.juniper, w.before)
	if !slices.Contains(juniper.Flags, invoicing.FlagNegativeBalance) || juniper.AmountDue <= 0 {
		t.Fatalf("Juniper's refund took back credit it had spent: flags %v, due %s", juniper.Flags, juniper.AmountDue)
	}

	for _, c := range []struct {
		name, query string
		keep        func(invoicing.InvoiceSummary) bool
	}{
		{"period", "period=" + w.before.String(), func(s invoicing.InvoiceSummary) bool { return s.Period == w.before }},
		{"customer by name", "party=brightLINE", func(s invoicing.InvoiceSummary) bool { return s.AccountName == "Brightline Studio" }},
		{"customer by id", "party=" + w.acme, func(s invoicing.InvoiceSummary) bool { return s.AccountID == w.acme }},
		{"flag", "flag=negative_balance", func(s invoicing.InvoiceSummary) bool {
			return slices.Contains(s.Flags, invoicing.FlagNegativeBalance)
		}},
		{"least total", "min_total=2.00", func(s invoicing.InvoiceSummary) bool { return s.Total >= 2_00 }},
		{"most total", "max_total=1", func(s invoicing.InvoiceSummary) bool { return s.Total <= 1_00 }},
		{"both", "period=" + w.last.String() + "&min_total=1", func(s invoicing.InvoiceSummary) bool {
			return s.Period == w.last && s.Total >= 1_00
		}},
		{"status", "status=issued", func(s invoicing.InvoiceSummary) bool { return s.Status == invoicing.StatusIssued }},
	} {
		var want []string
		for _, s := range all.Invoices {
			if c.keep(s) {
				want = append(want, s.ID)
			}
		}
		doc := getPage(t, client, w.srv.URL+"/finance/invoices?"+c.query)
		got := rowIDs(queueRows(doc))
		if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("%s (%s): rows %v, want %v", c.name, c.query, got, want)
		}
		if c.name == "status" && doc.Find(`[data-testid="queue-empty"]`).Length() != 1 {
			t.Errorf("no issued invoice yet, and the page does not say nothing matches")
		}
		if c.name == "flag" && (len(want) == 0 || !strings.Contains(text(doc.Find(`[data-flag="negative_balance"]`)), "negative balance")) {
			t.Errorf("the negative-balance flag is not shown in words: %q", text(doc.Find(`[data-flag="negative_balance"]`)))
		}
	}
	res, body := fetch(t, client, w.srv.URL+"/finance/invoices?min_total=abc&period=2026-13")
	if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(body), `data-testid="error-min_total"`) ||
		!strings.Contains(string(body), `data-testid="error-period"`) {
		t.Errorf("bad filters: status %d, want 422 naming min_total and period", res.StatusCode)
	}

	acme := w.invoiceOf(t, w.acme, w.last)
	w.approve(t, juniper.ID, acme.ID)
	for _, r := range queueRows(getPage(t, client, w.srv.URL+"/finance/invoices")) {
		want, selectable := []string{"approve"}, true
		switch r.id {
		case juniper.ID:
			want, selectable = []string{"mark paid", "void"}, false
		case acme.ID:
			want, selectable = []string{"void"}, false
		}
		if !slices.Equal(r.actions, want) || r.selectable != selectable {
			t.Errorf("%s (%s): allows %v (checkbox %v), want %v (%v)", r.party, r.status, r.actions, r.selectable, want, selectable)
		}
	}
	// Juniper pays what it owes outside Stripe: finance records it, and a paid invoice allows
	// only a void.
	// The first POST asks to confirm, with the amount due, and records nothing; the
	// confirmation records it, once.
	juniperDue := w.invoiceOf(t, w.juniper, w.before).AmountDue
	ask := askedToConfirm(t, client, w.srv.URL+"/finance/invoices/"+juniper.ID+"/paid", url.Values{"_csrf": {csrf}, "reference": {"bank transfer 4471"}})
	if c := consequences(ask); !strings.Contains(c, "paid the "+cents(juniperDue)+" due") || !strings.Contains(c, "cannot be undone") {
		t.Errorf("marking paid says %q, want the %s due and that it cannot be undone", c, cents(juniperDue))
	}
	if st := w.invoiceOf(t, w.juniper, w.before).Status; st != invoicing.StatusIssued {
		t.Fatalf("after the first POST the invoice is %s, want still issued", st)
	}
	res = confirmation(t, client, w.srv.URL, ask)
	wantStatus(t, res, http.StatusSeeOther)
	if again := confirmation(t, client, w.srv.URL, ask); again.StatusCode != http.StatusConflict {
		t.Errorf("the same confirmation again: status %d, want 409", again.StatusCode)
	}
	doc := getPage(t, client, w.srv.URL+res.Header.Get("Location"))
	if s, facts := text(doc.Find(`[data-testid="doc-status"]`)), text(doc.Find(`[data-testid="doc-facts"]`)); s != "paid" ||
		!strings.Contains(facts, "by finance@example.com, reference bank transfer 4471") || doc.Find(`[data-testid="paid-form"]`).Length() != 0 ||
		doc.Find(`[data-testid="void-form"]`).Length() != 1 {
		t.Errorf("after marking paid: %s, %q", s, facts)
	}
	if paid := queueRows(getPage(t, client, w.srv.URL+"/finance/invoices?status=paid")); len(paid) != 1 || paid[0].id != juniper.ID ||
		!slices.Equal(paid[0].actions, []string{"void"}) {
		t.Errorf("the paid queue: %+v", paid)
	}

	statements, err := w.invoicing.Statements(ctx, invoicing.StatementFilter{})
	if err != nil {
		t.Fatal(err)
	}
	doc = getPage(t, client, w.srv.URL+"/finance/statements")
	if got := queueRows(doc); len(got) != len(statements.Statements) || len(got) < 4 {
		t.Errorf("the statement queue shows %d, want %d", len(got), len(statements.Statements))
	}
	if head := text(doc.Find(`[data-testid="queue"] thead`)); !strings.Contains(head, "Provider") || !strings.Contains(head, "Net") ||
		!strings.Contains(head, "Payout") {
		t.Errorf("the statement queue's head: %q", head)
	}
	var northwind []string
	for _, s := range statements.Statements {
		if s.ProviderAccountID == w.northwind {
			northwind = append(northwind, s.ID)
		}
	}
	if got := rowIDs(queueRows(getPage(t, client, w.srv.URL+"/finance/statements?party=Northwind"))); !slices.Equal(got, northwind) || len(got) != 2 {
		t.Errorf("Northwind's statements: %v, want %v", got, northwind)
	}
}

// Approving many from the queue: the checked drafts are each numbered, in one series without
// gaps, and the page says per document the number or why not; an id that names no draft is
// refused on its own without stopping the others. Nothing selected is refused.
func TestApproveManyFromTheQueue(t *testing.T) {
	t.Parallel()
	w := newFinanceWorld(t)
	w.closeBoth(t)
	ctx := context.Background()
	client, csrf := loginBrowser(t, w.env, "finance@example.com")
	page, err := w.invoicing.Invoices(ctx, invoicing.InvoiceFilter{Period: w.before})
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{"_csrf": {csrf}}
	for _, s := range page.Invoices {
		form.Add("id", s.ID)
	}
	if len(form["id"]) != 3 {
		t.Fatalf("%d drafts for %s, want Acme's, Brightline's and Juniper's", len(form["id"]), w.before)
	}
	const noSuch = "00000000-0000-4000-8000-000000000001"
	form.Add("id", noSuch)
	queue := getPage(t, client, w.srv.URL+"/finance/invoices?period="+w.before.String())
	action := queue.Find(`[data-testid="approve-many-form"]`).AttrOr("action", "")
	if action != "/finance/invoices/approve?period="+w.before.String() {
		t.Fatalf("the queue's approval goes to %q, want its filters kept", action)
	}
	ask := askedToConfirm(t, client, w.srv.URL+action, form)
	var total invoicing.Cents
	for _, s := range page.Invoices {
		total += s.Total
		if a := text(ask.Find(`[data-testid="confirm-item"][data-id="` + s.ID + `"] [data-testid="confirm-amount"]`)); a != cents(s.Total) {
			t.Errorf("the confirmation shows %s's invoice at %q, want %s", s.AccountName, a, cents(s.Total))
		}
	}
	if got := text(ask.Find(testID("confirm-total"))); got != cents(total) {
		t.Errorf("the confirmation's total %q, want %s", got, cents(total))
	}
	if n := countRows(t, w.env, `SELECT count(*) FROM invoices WHERE period = $1 AND status = 'draft'`, w.before.Start()); n != 3 {
		t.Fatalf("after the first POST %d drafts, want all 3 still drafts", n)
	}
	res, err := client.PostForm(w.srv.URL+ask.Find(testID("confirm-form")).AttrOr("action", ""), formOf(ask))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := goqueryFrom(res)
	if err != nil {
		t.Fatal(err)
	}
	var numbers []string
	doc.Find(`[data-testid="approved-number"]`).Each(func(_ int, s *goquery.Selection) { numbers = append(numbers, text(s)) })
	slices.Sort(numbers)
	year := time.Now().UTC().Format("2006")
	want := []string{"GPM-" + year + "-000001", "GPM-" + year + "-000002", "GPM-" + year + "-000003"}
	if !slices.Equal(numbers, want) {
		t.Errorf("numbers %v, want %v", numbers, want)
	}
	if p := text(doc.Find(`[data-id="` + noSuch + `"] [data-testid="approval-problem"]`)); !strings.Contains(p, "No such invoice.") {
		t.Errorf("the id of no invoice: %q", p)
	}
	for _, r := range queueRows(doc) {
		if r.status != "issued" {
			t.Errorf("after the approval the queue of %s shows %s %s", w.before, r.party, r.status)
		}
	}
	if n := countRows(t, w.env, `SELECT count(*) FROM invoices WHERE period = $1 AND status = 'issued' AND number IS NOT NULL`,
		w.before.Start()); n != 3 {
		t.Errorf("%d issued invoices in the database, want 3", n)
	}
	if again := confirmation(t, client, w.srv.URL, ask); again.StatusCode != http.StatusConflict {
		t.Errorf("the same confirmation again: status %d, want 409", again.StatusCode)
	}
	entries, err := w.audit.List(ctx, audit.Filter{Action: audit.ActionApprove})
	if err != nil || len(entries.Entries) != 3 || entries.Entries[0].Actor != "finance@example.com" {
		t.Errorf("approvals in the audit log: %+v, %v", entries.Entries, err)
	}

	res, err = client.PostForm(w.srv.URL+"/finance/invoices/approve", url.Values{"_csrf": {csrf}})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, res, http.StatusUnprocessableEntity)
	doc, _ = goqueryFrom(res)
	if p := text(doc.Find(`[data-testid="approval-problem"]`)); !strings.Contains(p, "Select the drafts to approve.") {
		t.Errorf("approving nothing: %q", p)
	}
}

var invoiceNumber = regexp.MustCompile(`^GPM-\d{4}-\d{6}$`)

// An invoice's page shows its lines, totals, flags, billing details and history, and offers
// only what its state allows: a draft approval; once issued with nothing due, a void. A void
// without the note its reason needs is refused on the field. A void for wrong details issues
// a credit note and a regenerated draft with the new PO number, each linked from the voided
// invoice's page, which keeps its number and allows nothing more.
func TestInvoicePageApproveAndVoid(t *testing.T) {
	t.Parallel()
	w := newFinanceWorld(t)
	w.closeBoth(t)
	client, csrf := loginBrowser(t, w.env, "finance@example.com")
	inv := w.invoiceOf(t, w.acme, w.last)
	path := "/finance/invoices/" + inv.ID
	doc := getPage(t, client, w.srv.URL+path)
	if n := text(doc.Find(`[data-testid="doc-number"]`)); n != "DRAFT" {
		t.Errorf("a draft's number reads %q", n)
	}
	lines := doc.Find(`[data-testid="doc-line"]`)
	if lines.Length() != len(inv.Lines) || len(inv.Lines) == 0 {
		t.Fatalf("%d lines shown, want %d", lines.Length(), len(inv.Lines))
	}
	lines.Each(func(i int, s *goquery.Selection) {
		l := inv.Lines[i]
		if a, e := text(s.Find(`[data-testid="line-amount"]`)), text(s.Find(`[data-testid="line-exact"]`)); a != l.Amount.String() || e != l.Charge.String() {
			t.Errorf("line %d: %s (exact %s), want %s (%s)", i+1, a, e, l.Amount, l.Charge)
		}
	})
	if total := text(doc.Find(`[data-label="Total"] td`)); total != inv.Total.String() {
		t.Errorf("total %q, want %s", total, inv.Total)
	}
	var flags []string
	doc.Find(`[data-testid="doc-flags"] [data-testid="flag"]`).Each(func(_ int, s *goquery.Selection) { flags = append(flags, s.AttrOr("data-flag", "")) })
	if !slices.Equal(flags, flagStrings(inv.Flags)) {
		t.Errorf("flags %v, want %v", flags, inv.Flags)
	}
	if details := text(doc.Find(`[data-testid="doc-party-details"]`)); !strings.Contains(details, "Acme Labs") ||
		!strings.Contains(details, testSeller.LegalName) || !strings.Contains(details, "VAT ID IE1234567FA") {
		t.Errorf("billing details: %q", details)
	}
	if doc.Find(`[data-testid="approve-form"]`).Length() != 1 || doc.Find(`[data-testid="void-form"]`).Length() != 0 ||
		doc.Find(`[data-testid="paid-form"]`).Length() != 0 || doc.Find(`[data-testid="no-history"]`).Length() != 1 {
		t.Errorf("a draft's page offers approve %d, void %d, paid %d; no history %d", doc.Find(`[data-testid="approve-form"]`).Length(),
			doc.Find(`[data-testid="void-form"]`).Length(), doc.Find(`[data-testid="paid-form"]`).Length(),
			doc.Find(`[data-testid="no-history"]`).Length())
	}
	if href := doc.Find(`[data-testid="doc-pdf"]`).AttrOr("href", ""); href != "/invoices/"+inv.ID+"/pdf" {
		t.Errorf("PDF link %q", href)
	}

	ask := askedToConfirm(t, client, w.srv.URL+path+"/approve", url.Values{"_csrf": {csrf}})
	if c := consequences(ask); !strings.Contains(c, "No money moves") || text(ask.Find(testID("confirm-amount"))) != cents(inv.Total) {
		t.Errorf("approving an invoice says %q at %q, want no money moved and its total %s", c, text(ask.Find(testID("confirm-amount"))), cents(inv.Total))
	}
	if st := w.invoiceOf(t, w.acme, w.last).Status; st != invoicing.StatusDraft {
		t.Fatalf("after the first POST the invoice is %s", st)
	}
	res := confirmation(t, client, w.srv.URL, ask)
	wantStatus(t, res, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); loc != path+"?flash=approved" {
		t.Errorf("after approval: %s", loc)
	}
	doc = getPage(t, client, w.srv.URL+path+"?flash=approved")
	number := text(doc.Find(`[data-testid="doc-number"]`))
	issued := w.invoiceOf(t, w.acme, w.last)
	if !invoiceNumber.MatchString(number) || number != issued.Number || text(doc.Find(`[data-testid="doc-status"]`)) != "issued" {
		t.Fatalf("after approval the page shows %q %q, the invoice is %s %s", number, text(doc.Find(`[data-testid="doc-status"]`)),
			issued.Number, issued.Status)
	}
	if doc.Find(`[data-testid="approve-form"]`).Length() != 0 || doc.Find(`[data-testid="void-form"]`).Length() != 1 ||
		doc.Find(`[data-testid="paid-form"]`).Length() != 0 {
		t.Errorf("an issued invoice with nothing due offers approve %d, void %d, paid %d", doc.Find(`[data-testid="approve-form"]`).Length(),
			doc.Find(`[data-testid="void-form"]`).Length(), doc.Find(`[data-testid="paid-form"]`).Length())
	}
	if h := doc.Find(`[data-testid="audit-entry"]`); h.Length() != 1 || h.AttrOr("data-action", "") != "approve" ||
		text(h.Find(`[data-testid="audit-actor"]`)) != "finance@example.com" {
		t.Errorf("history after approval: %d entries, %q by %q", h.Length(), h.AttrOr("data-action", ""), text(h.Find(`[data-testid="audit-actor"]`)))
	}
	var reasons []string
	doc.Find(`[data-testid="void-form"] select[name="reason"] option`).Each(func(_ int, s *goquery.Selection) {
		reasons = append(reasons, s.AttrOr("value", ""))
	})
	if !slices.Equal(reasons, []string{"", "not_delivered", "wrong_details", "other"}) {
		t.Errorf("void reasons offered: %v", reasons)
	}

	res, err := client.PostForm(w.srv.URL+path+"/void", url.Values{"_csrf": {csrf}, "reason": {"other"}})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, res, http.StatusUnprocessableEntity)
	doc, _ = goqueryFrom(res)
	if doc.Find(`[data-testid="error-note"]`).Length() != 1 {
		t.Errorf("a void for another reason without a note is not refused on the note")
	}
	// Voiding for a service not delivered would put the total back on the balance: its
	// confirmation (a GET shows it too) says so with the amount.
	notDelivered := getPage(t, client, w.srv.URL+path+"/void?reason=not_delivered")
	if c := consequences(notDelivered); !strings.Contains(c, "cannot be undone") ||
		!strings.Contains(c, "puts "+cents(inv.Total)+" back on Acme Labs's prepaid balance") {
		t.Errorf("voiding for a service not delivered says %q", c)
	}
	ask = askedToConfirm(t, client, w.srv.URL+path+"/void", url.Values{"_csrf": {csrf}, "reason": {"wrong_details"},
		"note": {"The customer's legal name changed"}, "po_number": {"PO-NEW-7"}})
	if c := consequences(ask); !strings.Contains(c, "cannot be undone") || !strings.Contains(c, "No money moves") {
		t.Errorf("voiding for wrong details says %q", c)
	}
	if st := w.invoiceOf(t, w.acme, w.last).Status; st != invoicing.StatusIssued {
		t.Fatalf("after the void's first POST the invoice is %s, want still issued", st)
	}
	res = confirmation(t, client, w.srv.URL, ask)
	wantStatus(t, res, http.StatusSeeOther)
	if again := confirmation(t, client, w.srv.URL, ask); again.StatusCode != http.StatusConflict {
		t.Errorf("the void's confirmation again: status %d, want 409", again.StatusCode)
	}
	doc = getPage(t, client, w.srv.URL+res.Header.Get("Location"))
	voided, err := w.invoicing.Invoice(context.Background(), inv.ID)
	if err != nil {
		t.Fatal(err)
	}
	if voided.Status != invoicing.StatusVoid || len(voided.CreditNotes) != 1 || voided.ReplacedByInvoiceID == "" {
		t.Fatalf("after the void: %s, %d credit notes, replaced by %q", voided.Status, len(voided.CreditNotes), voided.ReplacedByInvoiceID)
	}
	cn := voided.CreditNotes[0]
	if s := text(doc.Find(`[data-testid="doc-status"]`)); s != "void" || text(doc.Find(`[data-testid="doc-number"]`)) != number {
		t.Errorf("the voided invoice's page: %s %s", s, text(doc.Find(`[data-testid="doc-number"]`)))
	}
	if l := doc.Find(`[data-testid="credit-note-link"]`); l.AttrOr("href", "") != "/credit-notes/"+cn.ID || text(l) != "Credit note "+number+"-CN01" {
		t.Errorf("credit note link %q %q, want /credit-notes/%s and %s-CN01", l.AttrOr("href", ""), text(l), cn.ID, number)
	}
	if l := doc.Find(`[data-testid="replaced-by-link"]`); l.AttrOr("href", "") != "/finance/invoices/"+voided.ReplacedByInvoiceID {
		t.Errorf("regenerated draft link %q", l.AttrOr("href", ""))
	}
	if doc.Find(`[data-testid="doc-actions"]`).Length() != 0 {
		t.Errorf("a void invoice offers actions")
	}
	if h := doc.Find(`[data-testid="audit-entry"]`); h.Length() != 2 || h.First().AttrOr("data-action", "") != "void" {
		t.Errorf("the voided invoice's history: %d entries, the latest %q", h.Length(), h.First().AttrOr("data-action", ""))
	}

	doc = getPage(t, client, w.srv.URL+"/finance/invoices/"+voided.ReplacedByInvoiceID)
	if s := text(doc.Find(`[data-testid="doc-status"]`)); s != "draft" {
		t.Errorf("the regenerated invoice is %s", s)
	}
	if l := doc.Find(`[data-testid="replaces-link"]`); l.AttrOr("href", "") != path || text(l) != "Replaces "+number {
		t.Errorf("the regenerated invoice's link to the voided one: %q %q", l.AttrOr("href", ""), text(l))
	}
	if d := text(doc.Find(`[data-testid="doc-party-details"]`).First()); !strings.Contains(d, "PO number PO-NEW-7") {
		t.Errorf("the regenerated invoice's buyer: %q, want the new PO number", d)
	}
	doc = getPage(t, client, w.srv.URL+"/credit-notes/"+cn.ID)
	if title, n := text(doc.Find(`[data-testid="document-title"]`)), text(doc.Find(`[data-testid="document-number"]`)); title != "Credit note" || n != number+"-CN01" {
		t.Errorf("the credit note's page: %q %q", title, n)
	}
	if notes := text(doc.Find(`[data-testid="document-notes"]`)); !strings.Contains(notes, "cancels invoice "+number) ||
		!strings.Contains(notes, "The customer's legal name changed") || !strings.Contains(notes, "No money moves") {
		t.Errorf("the credit note's notes: %q", notes)
	}
}

// A statement's page: its lines at the provider's asks, its net and payout, and the actions of
// its state; one under the minimum payout, once issued, can be voided but not marked paid.
func TestStatementPage(t *testing.T) {
	t.Parallel()
	w := newFinanceWorld(t)
	w.closeBoth(t)
	client, csrf := loginBrowser(t, w.env, "finance@example.com")
	st := w.statementOf(t, w.northwind, w.before)
	path := "/finance/statements/" + st.ID
	doc := getPage(t, client, w.srv.URL+path)
	if doc.Find(`[data-testid="doc-line"]`).Length() != len(st.Lines) || text(doc.Find(`[data-testid="doc-party"]`)) != "Northwind Compute" ||
		text(doc.Find(`[data-label="Net"] td`)) != st.Net.String() || text(doc.Find(`[data-label="Payout"] td`)) != st.Payout.String() {
		t.Errorf("statement page: %d lines (want %d), party %q, net %q (want %s)", doc.Find(`[data-testid="doc-line"]`).Length(),
			len(st.Lines), text(doc.Find(`[data-testid="doc-party"]`)), text(doc.Find(`[data-label="Net"] td`)), st.Net)
	}
	if b := text(doc.Find(testID("approve"))); b != "Approve and issue (pays nothing now)…" {
		t.Errorf("a statement that pays nothing: approve button %q", b)
	}
	ask := askedToConfirm(t, client, w.srv.URL+path+"/approve", url.Values{"_csrf": {csrf}})
	if c := consequences(ask); !strings.Contains(c, "carried over") || strings.Contains(c, "Stripe transfer") {
		t.Errorf("approving a statement under the minimum says %q", c)
	}
	res := confirmation(t, client, w.srv.URL, ask)
	wantStatus(t, res, http.StatusSeeOther)
	doc = getPage(t, client, w.srv.URL+path)
	if n := text(doc.Find(`[data-testid="doc-number"]`)); !regexp.MustCompile(`^GPS-\d{4}-\d{6}$`).MatchString(n) {
		t.Errorf("the approved statement's number %q", n)
	}
	if st.Payout != 0 || doc.Find(`[data-testid="paid-form"]`).Length() != 0 || doc.Find(`[data-testid="void-form"]`).Length() != 1 {
		t.Errorf("a statement under the minimum (payout %s) offers paid %d, void %d", st.Payout,
			doc.Find(`[data-testid="paid-form"]`).Length(), doc.Find(`[data-testid="void-form"]`).Length())
	}
	res, err := client.PostForm(w.srv.URL+path+"/paid", url.Values{"_csrf": {csrf}, "reference": {"tr_1"}})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, res, http.StatusConflict)
	doc, _ = goqueryFrom(res)
	if e := text(doc.Find(`[data-testid="form-error"]`)); !strings.Contains(e, "not mark paid") {
		t.Errorf("marking paid a statement that pays nothing: %q", e)
	}

	// Voiding it asks first, says it cannot be undone and moves no money; confirmed, it voids
	// it once.
	ask = askedToConfirm(t, client, w.srv.URL+path+"/void", url.Values{"_csrf": {csrf}, "reason": {"wrong_details"}})
	if c := consequences(ask); !strings.Contains(c, "cannot be undone") || !strings.Contains(c, "No money moves") {
		t.Errorf("voiding the statement says %q", c)
	}
	if now, err := w.invoicing.Statement(context.Background(), st.ID); err != nil || now.Status != invoicing.StatusIssued {
		t.Fatalf("after the void's first POST the statement is %s (%v), want issued", now.Status, err)
	}
	wantStatus(t, confirmation(t, client, w.srv.URL, ask), http.StatusSeeOther)
	if again := confirmation(t, client, w.srv.URL, ask); again.StatusCode != http.StatusConflict {
		t.Errorf("the void's confirmation again: status %d, want 409", again.StatusCode)
	}
	if now, err := w.invoicing.Statement(context.Background(), st.ID); err != nil || now.Status != invoicing.StatusVoid {
		t.Fatalf("after the void's confirmation the statement is %s (%v), want void", now.Status, err)
	}
}
