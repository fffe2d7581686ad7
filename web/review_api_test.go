package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/invoicing"
)

// documentJSON is an invoice or a statement as finance's API shows it, with the fields these
// tests read.
type documentJSON struct {
	ID          string   `json:"id"`
	Status      string   `json:"status"`
	Number      string   `json:"number"`
	TotalCents  int64    `json:"total_cents"`
	NetCents    int64    `json:"net_cents"`
	AmountDue   int64    `json:"amount_due_cents"`
	Actions     []string `json:"actions"`
	Flags       []string `json:"flags"`
	AccountName string   `json:"account_name"`
	Lines       []struct {
		Kind        string `json:"kind"`
		AmountCents int64  `json:"amount_cents"`
		Description string `json:"description"`
	} `json:"lines"`
	Links struct {
		Page, PDF, CSV, Finance string
	} `json:"links"`
	History []struct {
		Action string `json:"action"`
		Actor  string `json:"actor"`
	} `json:"history"`
}

// Finance's JSON: the queue filtered by period and status; an invoice with its lines (which
// add up to total_cents), status, number, actions, links and history; approval that answers
// with the number; a void for a service not delivered that answers with the credit note and
// the regenerated draft; the credit note itself; refusals as errors with their fields or a
// conflict. The same for statements, whose total_cents is their net.
func TestFinanceJSON(t *testing.T) {
	t.Parallel()
	w := newFinanceWorld(t)
	w.closeBoth(t)
	token := w.token(t, "finance@example.com", demo.Password)
	var page struct {
		Invoices []documentJSON `json:"invoices"`
		More     bool           `json:"more"`
	}
	res := w.call(t, token, http.MethodGet, "/api/finance/invoices?period="+w.last.String()+"&status=draft", nil, &page)
	wantStatus(t, res, http.StatusOK)
	if len(page.Invoices) != 2 || page.More {
		t.Fatalf("%d drafts of %s, want Acme's and Brightline's", len(page.Invoices), w.last)
	}
	for _, inv := range page.Invoices {
		if inv.Status != "draft" || inv.Number != "" || !slices.Equal(inv.Actions, []string{"approve"}) || inv.TotalCents <= 0 {
			t.Errorf("a draft in the queue: %+v", inv)
		}
	}
	acme := w.invoiceOf(t, w.acme, w.last)
	var got documentJSON
	wantStatus(t, w.call(t, token, http.MethodGet, "/api/finance/invoices/"+acme.ID, nil, &got), http.StatusOK)
	var sum int64
	for _, l := range got.Lines {
		sum += l.AmountCents
	}
	if len(got.Lines) != len(acme.Lines) || sum != got.TotalCents || got.TotalCents != int64(acme.Total) || got.Status != "draft" ||
		got.Links.PDF != "/invoices/"+acme.ID+"/pdf" || got.Links.Finance != "/finance/invoices/"+acme.ID || len(got.History) != 0 {
		t.Errorf("the invoice: %d lines summing to %d, total_cents %d (want %s), links %+v, history %d", len(got.Lines), sum,
			got.TotalCents, acme.Total, got.Links, len(got.History))
	}

	wantStatus(t, w.call(t, token, http.MethodPost, "/api/finance/invoices/"+acme.ID+"/approve", nil, &got), http.StatusOK)
	if !invoiceNumber.MatchString(got.Number) || got.Status != "issued" || !slices.Equal(got.Actions, []string{"void"}) ||
		len(got.History) != 1 || got.History[0].Action != "approve" || got.History[0].Actor != "finance@example.com" {
		t.Errorf("after approval: %q %s %v, history %+v", got.Number, got.Status, got.Actions, got.History)
	}
	var e apiErrorJSON
	res = w.call(t, token, http.MethodPost, "/api/finance/invoices/"+acme.ID+"/approve", nil, &e)
	if res.StatusCode != http.StatusConflict || !strings.Contains(e.Error.Message, "it can be: void") {
		t.Errorf("approving an issued invoice: %d %q", res.StatusCode, e.Error.Message)
	}
	res = w.call(t, token, http.MethodPost, "/api/finance/invoices/"+acme.ID+"/void", map[string]any{"reason": "lost"}, &e)
	if res.StatusCode != http.StatusUnprocessableEntity || e.Error.Fields["reason"] == "" {
		t.Errorf("a reason not on the list: %d %+v", res.StatusCode, e)
	}
	var voided struct {
		CreditNoteID     string                         `json:"credit_note_id"`
		CreditNoteNumber string                         `json:"credit_note_number"`
		CreditedPico     json.Number                    `json:"credited_pico"`
		RegeneratedID    string                         `json:"regenerated_id"`
		CreditNote       struct{ Page, PDF string }     `json:"credit_note"`
		Regenerated      struct{ Page, Finance string } `json:"regenerated"`
	}
	wantStatus(t, w.call(t, token, http.MethodPost, "/api/finance/invoices/"+acme.ID+"/void",
		map[string]any{"reason": "not_delivered", "note": "the rig was down"}, &voided), http.StatusOK)
	if voided.CreditNoteNumber != got.Number+"-CN01" || voided.CreditedPico.String() != strconv.FormatInt(got.TotalCents, 10)+"0000000000" ||
		voided.CreditNote.PDF != "/credit-notes/"+voided.CreditNoteID+"/pdf" || voided.Regenerated.Finance != "/finance/invoices/"+voided.RegeneratedID {
		t.Errorf("the void: %+v (total %d)", voided, got.TotalCents)
	}
	var cn struct {
		Number        string `json:"number"`
		InvoiceNumber string `json:"invoice_number"`
		AmountCents   int64  `json:"amount_cents"`
		Reason        string `json:"reason"`
		Lines         []any  `json:"lines"`
		Links         struct{ Page string }
	}
	wantStatus(t, w.call(t, token, http.MethodGet, "/api/finance/credit-notes/"+voided.CreditNoteID, nil, &cn), http.StatusOK)
	if cn.Number != voided.CreditNoteNumber || cn.InvoiceNumber != got.Number || cn.AmountCents != got.TotalCents ||
		cn.Reason != "not_delivered" || len(cn.Lines) != len(got.Lines) || cn.Links.Page != "/credit-notes/"+voided.CreditNoteID {
		t.Errorf("the credit note: %+v", cn)
	}
	var regen documentJSON
	wantStatus(t, w.call(t, token, http.MethodGet, "/api/finance/invoices/"+voided.RegeneratedID, nil, &regen), http.StatusOK)
	if regen.Status != "draft" || regen.TotalCents != 0 || regen.Lines[len(regen.Lines)-1].Kind != "credit" ||
		regen.Lines[len(regen.Lines)-1].AmountCents != -got.TotalCents {
		t.Errorf("the regenerated draft: %+v", regen)
	}
	if res := w.call(t, token, http.MethodPost, "/api/finance/invoices/approve", map[string]any{"ids": []string{}}, &e); res.StatusCode != http.StatusUnprocessableEntity ||
		e.Error.Fields["ids"] == "" {
		t.Errorf("approving no ids: %d %+v", res.StatusCode, e)
	}
	var many struct {
		Results []struct {
			ID, Number, Problem string
		} `json:"results"`
	}
	brightline := w.invoiceOf(t, w.brightline, w.last)
	wantStatus(t, w.call(t, token, http.MethodPost, "/api/finance/invoices/approve",
		map[string]any{"ids": []string{brightline.ID, acme.ID}}, &many), http.StatusOK)
	if len(many.Results) != 2 || !invoiceNumber.MatchString(many.Results[0].Number) || many.Results[1].Problem == "" {
		t.Errorf("approving a draft and a void invoice: %+v", many.Results)
	}

	var statements struct {
		Statements []documentJSON `json:"statements"`
	}
	wantStatus(t, w.call(t, token, http.MethodGet, "/api/finance/statements?period="+w.before.String(), nil, &statements), http.StatusOK)
	if len(statements.Statements) != 3 {
		t.Fatalf("%d statements of %s, want Fjord's, Lisboa's and Northwind's", len(statements.Statements), w.before)
	}
	for _, s := range statements.Statements {
		if s.TotalCents != s.NetCents || s.Status != "draft" {
			t.Errorf("a statement's total_cents %d, net %d, status %s", s.TotalCents, s.NetCents, s.Status)
		}
	}
	fjord := w.statementOf(t, w.fjord, w.before)
	var st documentJSON
	wantStatus(t, w.call(t, token, http.MethodPost, "/api/finance/statements/"+fjord.ID+"/approve", nil, &st), http.StatusOK)
	if !strings.HasPrefix(st.Number, "GPS-") || st.Status != "issued" || len(st.Lines) != len(fjord.Lines) || st.Links.Page != "/statements/"+fjord.ID {
		t.Errorf("the approved statement: %+v", st)
	}
	if res := w.call(t, token, http.MethodPost, "/api/finance/statements/"+fjord.ID+"/paid", map[string]string{"reference": "tr_1"}, &e); res.StatusCode != http.StatusConflict {
		t.Errorf("marking paid a statement under the minimum payout: %d %+v", res.StatusCode, e)
	}
	if res := w.call(t, token, http.MethodPost, "/api/finance/statements/"+fjord.ID+"/void",
		map[string]any{"reason": "wrong_details", "po_number": "PO-1"}, &e); res.StatusCode != http.StatusUnprocessableEntity || e.Error.Fields["po_number"] == "" {
		t.Errorf("a statement's void with a PO number: %d %+v", res.StatusCode, e)
	}
	if res := w.call(t, w.token(t, "developer@example.com", demo.Password), http.MethodGet, "/api/finance/invoices/"+acme.ID, nil, &e); res.StatusCode != http.StatusForbidden {
		t.Errorf("finance's invoice, to a developer: %d", res.StatusCode)
	}
}

// Closing a month through the API: done within the wait, it answers 200 with the close's
// figures, which the close's own address gives again; a month that has not ended is named.
func TestCloseAPI(t *testing.T) {
	t.Parallel()
	w := newFinanceWorld(t)
	token := w.token(t, "finance@example.com", demo.Password)
	var pr invoicing.CloseProgress
	wantStatus(t, w.call(t, token, http.MethodPost, "/api/finance/close", map[string]string{"period": w.last.String()}, &pr), http.StatusOK)
	n := countRows(t, w.env, `SELECT count(*) FROM invoices WHERE period = $1`, w.last.Start())
	if pr.Status != invoicing.CloseDone || pr.Runs != 1 || pr.Invoices != n || n == 0 || pr.StartedBy != "finance@example.com" {
		t.Errorf("the close: %+v, %d invoices", pr, n)
	}
	var again invoicing.CloseProgress
	wantStatus(t, w.call(t, token, http.MethodGet, "/api/finance/closes/"+w.last.String(), nil, &again), http.StatusOK)
	if again.Status != invoicing.CloseDone || again.Invoices != n {
		t.Errorf("the close read again: %+v", again)
	}
	var e apiErrorJSON
	next := invoicing.PeriodOf(time.Now()).String()
	if res := w.call(t, token, http.MethodPost, "/api/finance/close", map[string]string{"period": next}, &e); res.StatusCode != http.StatusUnprocessableEntity ||
		!strings.Contains(e.Error.Fields["period"], "has not ended") {
		t.Errorf("closing this month: %d %+v", res.StatusCode, e)
	}
	if res := w.call(t, token, http.MethodGet, "/api/finance/closes/"+w.before.String(), nil, &e); res.StatusCode != http.StatusNotFound {
		t.Errorf("a month never closed: %d", res.StatusCode)
	}
}

// The close page: its form suggests last month; a month that has not ended is refused on the
// field; closing sends finance to the close's progress, which says it is done with its
// counts and links to its queues and journal. A close that runs elsewhere (its period's lock
// held) shows as running, on a page that reloads itself, and a second close of it is refused;
// once the process holding it stopped without finishing, it shows as failed with what to do.
func TestClosePageFollowsTheClose(t *testing.T) {
	t.Parallel()
	w := newFinanceWorld(t)
	ctx := context.Background()
	client, csrf := loginBrowser(t, w.env, "finance@example.com")
	doc := getPage(t, client, w.srv.URL+"/finance/close")
	if v := doc.Find(`[data-testid="close-form"] input[name="period"]`).AttrOr("value", ""); v != w.last.String() ||
		doc.Find(`[data-testid="no-closes"]`).Length() != 1 {
		t.Errorf("the close form suggests %q, want %s", v, w.last)
	}
	res, err := client.PostForm(w.srv.URL+"/finance/close", url.Values{"_csrf": {csrf}, "period": {invoicing.PeriodOf(time.Now()).String()}})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, res, http.StatusUnprocessableEntity)
	doc, _ = goqueryFrom(res)
	if e := text(doc.Find(`[data-testid="error-period"]`)); !strings.Contains(e, "has not ended") {
		t.Errorf("closing this month: %q", e)
	}

	res = postForm(t, client, w.srv.URL+"/finance/close", url.Values{"_csrf": {csrf}, "period": {w.last.String()}})
	wantStatus(t, res, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); loc != "/finance/close?period="+w.last.String() {
		t.Fatalf("after the close: %s", loc)
	}
	doc = getPage(t, client, w.srv.URL+res.Header.Get("Location"))
	n := countRows(t, w.env, `SELECT count(*) FROM invoices WHERE period = $1`, w.last.Start())
	progress := doc.Find(`[data-testid="close-progress"]`)
	if progress.AttrOr("data-status", "") != "done" || text(doc.Find(`[data-testid="close-invoice-count"]`)) != strconv.Itoa(n) ||
		noscriptRefresh(doc) != "" {
		t.Errorf("the close's page: %s, %s invoices (want %d), refresh %q", progress.AttrOr("data-status", ""),
			text(doc.Find(`[data-testid="close-invoice-count"]`)), n, noscriptRefresh(doc))
	}
	if href := doc.Find(`[data-testid="close-invoices"]`).AttrOr("href", ""); href != "/finance/invoices?period="+w.last.String() {
		t.Errorf("the close links to %q", href)
	}
	if href := doc.Find(`[data-testid="close-journal"]`).AttrOr("href", ""); href != "/api/finance/journal.csv?period="+w.last.String() {
		t.Errorf("the close's journal link %q", href)
	}
	entries, err := w.audit.List(ctx, audit.Filter{Action: audit.ActionClose})
	if err != nil || len(entries.Entries) != 1 || entries.Entries[0].Actor != "finance@example.com" || entries.Entries[0].SubjectID != w.last.String() {
		t.Errorf("the close in the audit log: %+v, %v", entries.Entries, err)
	}

	// Another process runs the close of the month before: it holds the period's lock
	// (invoicing's close lock, "GPMC", and the period as YYYYMM) and its row says running.
	conn, err := w.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	key := w.before.Start().Year()*100 + int(w.before.Start().Month())
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, $2)`, int32(0x47504d43), int32(key)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.pool.Exec(ctx, `INSERT INTO invoice_closes (period, status, started_at, runs, customers_total, customers_done)
		VALUES ($1, 'running', now(), 1, 4, 1)`, w.before.Start()); err != nil {
		t.Fatal(err)
	}
	running := w.srv.URL + "/finance/close?period=" + w.before.String()
	doc = getPage(t, client, running)
	if s := doc.Find(`[data-testid="close-progress"]`).AttrOr("data-status", ""); s != "running" ||
		noscriptRefresh(doc) != "2" || doc.Find(`[data-testid="close-running"]`).Length() != 1 ||
		text(doc.Find(`[data-testid="close-customers"]`)) != "1 of 4" {
		t.Errorf("a close under way: %q, refresh %q, customers %q", s, noscriptRefresh(doc),
			text(doc.Find(`[data-testid="close-customers"]`)))
	}
	res, err = client.PostForm(w.srv.URL+"/finance/close", url.Values{"_csrf": {csrf}, "period": {w.before.String()}})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, res, http.StatusConflict)
	doc, _ = goqueryFrom(res)
	if e := text(doc.Find(`[data-testid="form-error"]`)); !strings.Contains(e, "running already") {
		t.Errorf("a second close: %q", e)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1, $2)`, int32(0x47504d43), int32(key)); err != nil {
		t.Fatal(err)
	}
	doc = getPage(t, client, running)
	if s := doc.Find(`[data-testid="close-progress"]`).AttrOr("data-status", ""); s != "failed" ||
		!strings.Contains(text(doc.Find(`[data-testid="close-problem"]`)), "Close the period again") || noscriptRefresh(doc) != "" {
		t.Errorf("a close whose process stopped: %q %q", s, text(doc.Find(`[data-testid="close-problem"]`)))
	}
}

// The audit log's page lists every finance action, newest first, and filters by action,
// actor, subject and day, with each subject linked to its page; its JSON is the same entries.
func TestAuditPageAndJSON(t *testing.T) {
	t.Parallel()
	w := newFinanceWorld(t)
	w.closeBoth(t)
	ctx := context.Background()
	acme, bright := w.invoiceOf(t, w.acme, w.last), w.invoiceOf(t, w.brightline, w.last)
	w.approve(t, acme.ID, bright.ID)
	if _, err := w.invoicing.VoidInvoice(ctx, invoicing.VoidInput{ID: acme.ID, By: w.finance, Reason: invoicing.VoidWrongDetails}); err != nil {
		t.Fatal(err)
	}
	client, _ := loginBrowser(t, w.env, "finance@example.com")
	entries := func(query string) *goquery.Selection {
		return getPage(t, client, w.srv.URL+"/finance/audit?"+query).Find(`[data-testid="audit-entry"]`)
	}
	actions := func(s *goquery.Selection) []string {
		var out []string
		s.Each(func(_ int, e *goquery.Selection) { out = append(out, e.AttrOr("data-action", "")) })
		return out
	}
	if got := actions(entries("")); !slices.Equal(got, []string{"void", "approve", "approve", "close", "close"}) {
		t.Errorf("the log: %v", got)
	}
	approvals := entries("action=approve")
	if got := actions(approvals); !slices.Equal(got, []string{"approve", "approve"}) {
		t.Errorf("approvals: %v", got)
	}
	if href := approvals.Last().Find(`[data-testid="audit-subject"]`).AttrOr("href", ""); href != "/finance/invoices/"+acme.ID {
		t.Errorf("the first approval links to %q", href)
	}
	if got := actions(entries("subject_kind=invoice&subject_id=" + acme.ID)); !slices.Equal(got, []string{"void", "approve"}) {
		t.Errorf("Acme's invoice's entries: %v", got)
	}
	if got := actions(entries("actor=" + w.finance)); len(got) != 5 {
		t.Errorf("the finance user's entries: %v", got)
	}
	tomorrow := time.Now().UTC().AddDate(0, 0, 1).Format(time.DateOnly)
	today := time.Now().UTC().Format(time.DateOnly)
	if got := actions(entries("from=" + tomorrow)); len(got) != 0 {
		t.Errorf("entries from tomorrow: %v", got)
	}
	if got := actions(entries("from=" + today + "&to=" + today)); len(got) != 5 {
		t.Errorf("today's entries: %v", got)
	}
	res, body := fetch(t, client, w.srv.URL+"/finance/audit?from=yesterday")
	if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(body), `data-testid="error-from"`) {
		t.Errorf("a day that does not parse: %d", res.StatusCode)
	}

	var page struct {
		Entries []struct {
			Actor       string          `json:"actor"`
			Action      string          `json:"action"`
			SubjectKind string          `json:"subject_kind"`
			SubjectID   string          `json:"subject_id"`
			Summary     string          `json:"summary"`
			After       json.RawMessage `json:"after"`
		} `json:"entries"`
	}
	wantStatus(t, w.call(t, w.token(t, "finance@example.com", demo.Password), http.MethodGet, "/api/finance/audit?action=close", nil, &page), http.StatusOK)
	if len(page.Entries) != 2 || page.Entries[0].SubjectKind != "period" || page.Entries[0].SubjectID != w.last.String() ||
		page.Entries[0].Actor != "finance@example.com" || !strings.Contains(string(page.Entries[0].After), `"invoices"`) ||
		!strings.Contains(page.Entries[0].Summary, "Closed") {
		t.Errorf("closes in the JSON: %+v", page.Entries)
	}
}
