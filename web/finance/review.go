package finance

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// Finance's review of invoices and statements (see docs/invoicing.md, "Pages and API"): the
// queues with their filters and flags, a page per document with the actions its state allows,
// approval of one or many, void with a reason, payment recorded. Every action is the
// service's; a page offers only what the document's Actions list, and the service refuses any
// other anyway.

// needsInvoicing answers that invoicing is unavailable on a server built without it.
func (s *Server) needsInvoicing(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.invoicing == nil || s.audit == nil {
			return services.Errorf(services.CodeUnavailable, "Invoices are not available on this server.")
		}
		return next(c)
	}
}

// Queues.

// queueQuery is a queue's filters as the page's form or the API's query gives them.
type queueQuery struct {
	Period, Status, Party, MinTotal, MaxTotal, Flag string
	Offset, Limit                                   int
}

func readQueueQuery(c echo.Context) queueQuery {
	q := queueQuery{Period: strings.TrimSpace(c.QueryParam("period")), Status: c.QueryParam("status"),
		Party: strings.TrimSpace(c.QueryParam("party")), MinTotal: strings.TrimSpace(c.QueryParam("min_total")),
		MaxTotal: strings.TrimSpace(c.QueryParam("max_total")), Flag: c.QueryParam("flag")}
	q.Offset, _ = strconv.Atoi(c.QueryParam("offset"))
	q.Limit, _ = strconv.Atoi(c.QueryParam("limit"))
	return q
}

// values writes the query back, for the next page's link and an approval's form.
func (q queueQuery) values() url.Values {
	v := url.Values{}
	for k, x := range map[string]string{"period": q.Period, "status": q.Status, "party": q.Party, "min_total": q.MinTotal,
		"max_total": q.MaxTotal, "flag": q.Flag} {
		if x != "" {
			v.Set(k, x)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// common reads what both queues' filters share, naming every field that does not parse.
func (q queueQuery) common() (p invoicing.Period, minTotal, maxTotal *invoicing.Cents, party, partyID string, err error) {
	fe := services.FieldErrors{}
	if q.Period != "" {
		if p, err = invoicing.ParsePeriod(q.Period); err != nil {
			fe.Add("period", "Write the month as YYYY-MM, like 2026-03.")
		}
	}
	for _, a := range []struct {
		field, text string
		into        **invoicing.Cents
	}{{"min_total", q.MinTotal, &minTotal}, {"max_total", q.MaxTotal, &maxTotal}} {
		if a.text == "" {
			continue
		}
		c, ok := parseCents(a.text)
		if !ok {
			fe.Add(a.field, "Enter dollars and cents, like 25 or 12.50.")
			continue
		}
		*a.into = &c
	}
	if uuidPattern.MatchString(strings.ToLower(q.Party)) {
		partyID = strings.ToLower(q.Party)
	} else {
		party = q.Party
	}
	return p, minTotal, maxTotal, party, partyID, fe.Err()
}

// parseCents reads signed dollars with at most two decimals, exactly.
func parseCents(s string) (invoicing.Cents, bool) {
	p, err := money.ParseUSD(s)
	if err != nil || p%money.PicoPerCent != 0 {
		return 0, false
	}
	return invoicing.Cents(p / money.PicoPerCent), true
}

func (q queueQuery) invoiceFilter() (invoicing.InvoiceFilter, error) {
	p, minTotal, maxTotal, name, id, err := q.common()
	return invoicing.InvoiceFilter{Period: p, Status: invoicing.Status(q.Status), AccountID: id, AccountName: name,
		Flag: invoicing.Flag(q.Flag), MinTotal: minTotal, MaxTotal: maxTotal, Limit: q.Limit, Offset: q.Offset}, err
}

func (q queueQuery) statementFilter() (invoicing.StatementFilter, error) {
	p, minTotal, maxTotal, name, id, err := q.common()
	return invoicing.StatementFilter{Period: p, Status: invoicing.Status(q.Status), ProviderAccountID: id, ProviderName: name,
		Flag: invoicing.Flag(q.Flag), MinTotal: minTotal, MaxTotal: maxTotal, Limit: q.Limit, Offset: q.Offset}, err
}

// flagLabels say what each review flag means.
var flagLabels = map[invoicing.Flag]string{
	invoicing.FlagUsageMismatch:   "total differs from its usage",
	invoicing.FlagDiscrepancy:     "usage in excess",
	invoicing.FlagNegativeBalance: "negative balance",
	invoicing.FlagSpike:           "more than 3x last month",
}

// flagTarget is the document a flag is on, which says where the flag leads: a discrepancy to
// the flagged requests of the document's party and month, where finance resolves them; any
// other flag to the document's review page, whose figures it is about.
type flagTarget struct {
	party   string // "account" or "provider"
	partyID string
	period  invoicing.Period
	review  string
}

// flagViews are a document's flags as pages show them: what each is, what it is about and how
// much (the note stored with the document), and where finance looks into it.
func flagViews(flags []invoicing.Flag, notes []string, t flagTarget) []templates.FlagView {
	out := make([]templates.FlagView, 0, len(flags))
	for i, f := range flags {
		v := templates.FlagView{Key: string(f), Label: flagLabels[f], URL: t.review}
		if v.Label == "" {
			v.Label = strings.ReplaceAll(string(f), "_", " ")
		}
		if i < len(notes) {
			v.Note = notes[i]
		}
		if f == invoicing.FlagDiscrepancy {
			v.URL = "/finance/flags?" + url.Values{"period": {t.period.String()}, t.party: {t.partyID}}.Encode()
		}
		out = append(out, v)
	}
	return out
}

func actionWords(actions []invoicing.Action) []string {
	out := make([]string, 0, len(actions))
	for _, a := range actions {
		out = append(out, strings.ReplaceAll(string(a), "_", " "))
	}
	return out
}

func allows(actions []invoicing.Action, a invoicing.Action) bool {
	for _, x := range actions {
		if x == a {
			return true
		}
	}
	return false
}

func queueFilters(q queueQuery, partyLabel string) templates.ReviewFilters {
	f := templates.ReviewFilters{Period: q.Period, Status: q.Status, Party: q.Party, MinTotal: q.MinTotal, MaxTotal: q.MaxTotal,
		Flag: q.Flag, PartyLabel: partyLabel, Statuses: []templates.Option{{Value: "", Label: "any"}},
		Flags: []templates.Option{{Value: "", Label: "any"}}}
	for _, st := range invoicing.Statuses {
		f.Statuses = append(f.Statuses, templates.Option{Value: string(st), Label: string(st)})
	}
	for _, fl := range invoicing.Flags {
		f.Flags = append(f.Flags, templates.Option{Value: string(fl), Label: flagLabels[fl]})
	}
	return f
}

// journalLink is the journal of the filtered period, or of the month before this one.
func (s *Server) journalLink(period string) (string, string) {
	if _, err := invoicing.ParsePeriod(period); err != nil {
		period = invoicing.PeriodOf(s.Now()).Prev().String()
	}
	return "/api/finance/journal.csv?period=" + period, period
}

func (s *Server) invoiceQueuePage(c echo.Context) error {
	return s.renderInvoiceQueue(c, http.StatusOK, nil)
}

func (s *Server) renderInvoiceQueue(c echo.Context, status int, results []templates.ApprovalResult) error {
	q := readQueueQuery(c)
	p := templates.ReviewQueuePage{Page: s.Page(c, "Invoices"), Kind: "invoices", Heading: "Invoices",
		Filters: queueFilters(q, "Customer"), TotalLabel: "Total", DueLabel: "Amount due", Results: results}
	p.JournalURL, p.JournalPeriod = s.journalLink(q.Period)
	f, err := q.invoiceFilter()
	var page invoicing.InvoicePage
	if err == nil {
		page, err = s.invoicing.Invoices(c.Request().Context(), f)
	}
	if err != nil {
		return s.FormError(c, err, func(form templates.Form) error {
			p.Form = form
			return s.Render(c, core.StatusFor(err), templates.ReviewQueue(p))
		})
	}
	for _, inv := range page.Invoices {
		p.Rows = append(p.Rows, templates.ReviewRow{ID: inv.ID, URL: "/finance/invoices/" + inv.ID, Number: inv.DisplayNumber,
			Party: inv.AccountName, Period: inv.Period.String(), Status: string(inv.Status), Total: inv.Total.String(),
			Due: inv.AmountDue.String(), Flags: flagViews(inv.Flags, inv.FlagNotes,
				flagTarget{party: "account", partyID: inv.AccountID, period: inv.Period, review: "/finance/invoices/" + inv.ID}), Actions: actionWords(inv.Actions),
			Approvable: allows(inv.Actions, invoicing.ActionApprove), DocumentURL: "/invoices/" + inv.ID,
			PDFURL: "/invoices/" + inv.ID + "/pdf"})
	}
	p.NextURL = nextPage("/finance/invoices", q, len(page.Invoices), page.More)
	p.ApproveURL = withQuery("/finance/invoices/approve", q)
	p.ApproveLabel = "Approve the selected drafts…"
	return s.Render(c, status, templates.ReviewQueue(p))
}

func (s *Server) statementQueuePage(c echo.Context) error {
	return s.renderStatementQueue(c, http.StatusOK, nil)
}

func (s *Server) renderStatementQueue(c echo.Context, status int, results []templates.ApprovalResult) error {
	q := readQueueQuery(c)
	p := templates.ReviewQueuePage{Page: s.Page(c, "Provider statements"), Kind: "statements", Heading: "Provider statements",
		Filters: queueFilters(q, "Provider"), TotalLabel: "Net", DueLabel: "Payout", Results: results}
	p.JournalURL, p.JournalPeriod = s.journalLink(q.Period)
	f, err := q.statementFilter()
	var page invoicing.StatementPage
	if err == nil {
		page, err = s.invoicing.Statements(c.Request().Context(), f)
	}
	if err != nil {
		return s.FormError(c, err, func(form templates.Form) error {
			p.Form = form
			return s.Render(c, core.StatusFor(err), templates.ReviewQueue(p))
		})
	}
	for _, st := range page.Statements {
		p.Rows = append(p.Rows, templates.ReviewRow{ID: st.ID, URL: "/finance/statements/" + st.ID, Number: st.DisplayNumber,
			Party: st.ProviderName, Period: st.Period.String(), Status: string(st.Status), Total: st.Net.String(),
			Due: st.Payout.String(), Flags: flagViews(st.Flags, st.FlagNotes,
				flagTarget{party: "provider", partyID: st.ProviderAccountID, period: st.Period, review: "/finance/statements/" + st.ID}), Actions: actionWords(st.Actions),
			Approvable: allows(st.Actions, invoicing.ActionApprove), DocumentURL: "/statements/" + st.ID,
			PDFURL: "/statements/" + st.ID + "/pdf"})
	}
	p.NextURL = nextPage("/finance/statements", q, len(page.Statements), page.More)
	p.ApproveURL = withQuery("/finance/statements/approve", q)
	p.ApproveLabel = "Approve the selected drafts…"
	if s.invoicing.PaysOut() {
		p.ApproveLabel = "Approve the selected drafts and pay them through Stripe…"
	}
	return s.Render(c, status, templates.ReviewQueue(p))
}

// nextPage is the link to the queue's next page, or "" on the last.
func nextPage(path string, q queueQuery, shown int, more bool) string {
	if !more {
		return ""
	}
	v := q.values()
	v.Set("offset", strconv.Itoa(q.Offset+shown))
	return path + "?" + v.Encode()
}

// withQuery is the path with the queue's filters.
func withQuery(path string, q queueQuery) string {
	if v := q.values(); len(v) > 0 {
		return path + "?" + v.Encode()
	}
	return path
}

// Approval.

// approvalResults are the outcomes of an approval of many, with links to each document.
// Each names its document by its party and period ("Acme Ltd's invoice for March 2026"), never
// by its id alone; names are the documents' as loaded for the confirmation, by id.
func approvalResults(kind string, res []invoicing.Approved, names map[string]string) []templates.ApprovalResult {
	out := make([]templates.ApprovalResult, 0, len(res))
	for _, r := range res {
		name, ok := names[r.ID]
		if !ok {
			name = "No such " + strings.TrimSuffix(kind, "s")
		}
		out = append(out, templates.ApprovalResult{ID: r.ID, URL: "/finance/" + kind + "/" + url.PathEscape(r.ID), Name: name,
			Number: r.Number, Problem: r.Problem})
	}
	return out
}

// invoiceNames names the invoices by id: their customer and period.
func invoiceNames(invs []*invoicing.Invoice) map[string]string {
	out := map[string]string{}
	for _, inv := range invs {
		if inv != nil {
			out[inv.ID] = inv.AccountName + "'s invoice for " + inv.Period.Label()
		}
	}
	return out
}

// statementNames names the statements by id: their provider and period.
func statementNames(sts []*invoicing.Statement) map[string]string {
	out := map[string]string{}
	for _, st := range sts {
		if st != nil {
			out[st.ID] = st.ProviderName + "'s statement for " + st.Period.Label()
		}
	}
	return out
}

// selectedIDs are the documents the queue's checkboxes selected.
func selectedIDs(c echo.Context) ([]string, error) {
	form, err := c.FormParams()
	if err != nil {
		return nil, err
	}
	ids := form["id"]
	if len(ids) == 0 {
		return nil, core.FieldError("id", "Select the drafts to approve.")
	}
	if len(ids) > invoicing.MaxListLimit {
		return nil, core.FieldError("id", "Approve at most "+strconv.Itoa(invoicing.MaxListLimit)+" at once.")
	}
	return ids, nil
}

// approveInvoicesSubmit approves the selected drafts once confirmed; before, and for any
// other POST, it shows what the approval would do (core.Confirmation).
func (s *Server) approveInvoicesSubmit(c echo.Context) error {
	ids, err := selectedIDs(c)
	if err != nil {
		return s.renderQueueError(c, err, s.renderInvoiceQueue)
	}
	invs, err := s.loadInvoices(c, ids)
	if err != nil {
		return err
	}
	q := readQueueQuery(c)
	conf := invoiceApproval(invs, ids, withQuery("/finance/invoices/approve", q), withQuery("/finance/invoices", q), idFields(ids))
	if !core.Confirmed(c, conf) {
		return s.AskToConfirm(c, "Approve invoices", conf)
	}
	res, err := s.invoicing.ApproveConfirmedInvoices(c.Request().Context(), core.UserID(c), confirmedInvoices(invs, ids))
	if err != nil {
		return s.renderQueueError(c, err, s.renderInvoiceQueue)
	}
	return s.renderInvoiceQueue(c, http.StatusOK, approvalResults("invoices", res, invoiceNames(invs)))
}

// approveStatementsSubmit approves the selected drafts and pays their payouts once confirmed;
// before, it shows each statement, its provider and payout, and their total.
func (s *Server) approveStatementsSubmit(c echo.Context) error {
	ids, err := selectedIDs(c)
	if err != nil {
		return s.renderQueueError(c, err, s.renderStatementQueue)
	}
	sts, err := s.loadStatements(c, ids)
	if err != nil {
		return err
	}
	q := readQueueQuery(c)
	conf := statementApproval(sts, ids, s.invoicing.PaysOut(), withQuery("/finance/statements/approve", q),
		withQuery("/finance/statements", q), idFields(ids))
	if !core.Confirmed(c, conf) {
		return s.AskToConfirm(c, "Approve statements", conf)
	}
	res, err := s.invoicing.ApproveConfirmedStatements(c.Request().Context(), core.UserID(c), confirmedStatements(sts, ids))
	if err != nil {
		return s.renderQueueError(c, err, s.renderStatementQueue)
	}
	return s.renderStatementQueue(c, http.StatusOK, approvalResults("statements", res, statementNames(sts)))
}

// idFields carries the selected ids to the confirmation's form.
func idFields(ids []string) []templates.HiddenField {
	out := make([]templates.HiddenField, len(ids))
	for i, id := range ids {
		out[i] = templates.HiddenField{Name: "id", Value: id}
	}
	return out
}

// renderQueueError shows a refused approval of many on its queue, with what to do.
func (s *Server) renderQueueError(c echo.Context, err error, render func(echo.Context, int, []templates.ApprovalResult) error) error {
	switch services.ErrorCode(err) {
	case services.CodeInvalid, services.CodeConflict, services.CodeUnavailable:
		_, body := s.Describe(err)
		msg := body.Message
		if v, ok := body.Fields["id"]; ok {
			msg = v
		}
		return render(c, core.StatusFor(err), []templates.ApprovalResult{{Problem: msg}})
	}
	return err
}

// approveOne approves one document and redirects to its page; a refusal is shown on the page.
func (s *Server) approveOne(c echo.Context, approve func() ([]invoicing.Approved, error), page func(templates.Form, int) error,
	path string) error {
	res, err := approve()
	if err == nil && len(res) == 1 {
		err = res[0].Err
	}
	if err != nil {
		switch services.ErrorCode(err) {
		case services.CodeConflict, services.CodeInvalid, services.CodeUnavailable:
			_, body := s.Describe(err)
			return page(templates.Form{Error: body.Message}, core.StatusFor(err))
		}
		return err
	}
	return c.Redirect(http.StatusSeeOther, path+"?flash=approved")
}

func (s *Server) approveInvoiceSubmit(c echo.Context) error {
	id := c.Param("id")
	inv, err := s.invoicing.Invoice(c.Request().Context(), id)
	if err != nil {
		return err
	}
	path := "/finance/invoices/" + id
	if err := refusal("invoice", inv.Number, inv.Status, invoicing.ActionApprove, inv.Actions); err != nil {
		return s.afterAction(c, err, "", "/finance/invoices/", s.renderInvoiceReview)
	}
	invs := []*invoicing.Invoice{&inv}
	conf := invoiceApproval(invs, []string{id}, path+"/approve", path, nil)
	if !core.Confirmed(c, conf) {
		return s.AskToConfirm(c, "Approve invoice", conf)
	}
	return s.approveOne(c, func() ([]invoicing.Approved, error) {
		return s.invoicing.ApproveConfirmedInvoices(c.Request().Context(), core.UserID(c), confirmedInvoices(invs, []string{id}))
	}, func(f templates.Form, status int) error { return s.renderInvoiceReview(c, status, f) }, path)
}

func (s *Server) approveStatementSubmit(c echo.Context) error {
	id := c.Param("id")
	st, err := s.invoicing.Statement(c.Request().Context(), id)
	if err != nil {
		return err
	}
	path := "/finance/statements/" + id
	if err := refusal("statement", st.Number, st.Status, invoicing.ActionApprove, st.Actions); err != nil {
		return s.afterAction(c, err, "", "/finance/statements/", s.renderStatementReview)
	}
	sts := []*invoicing.Statement{&st}
	conf := statementApproval(sts, []string{id}, s.invoicing.PaysOut(), path+"/approve", path, nil)
	if !core.Confirmed(c, conf) {
		return s.AskToConfirm(c, "Approve statement", conf)
	}
	return s.approveOne(c, func() ([]invoicing.Approved, error) {
		return s.invoicing.ApproveConfirmedStatements(c.Request().Context(), core.UserID(c), confirmedStatements(sts, []string{id}))
	}, func(f templates.Form, status int) error { return s.renderStatementReview(c, status, f) }, path)
}

// Void and payment.

// voidInput reads a void's form or body: the reason, the note, and a new PO number when one is
// given (none keeps the voided invoice's).
func voidInput(c echo.Context, reason, note string, po *string) invoicing.VoidInput {
	in := invoicing.VoidInput{ID: c.Param("id"), By: core.UserID(c), Reason: invoicing.VoidReason(reason), Note: note}
	if po != nil && strings.TrimSpace(*po) != "" {
		in.PONumber = po
	}
	return in
}

func (s *Server) voidInvoiceSubmit(c echo.Context) error {
	inv, err := s.invoicing.Invoice(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	if err := refusal("invoice", inv.Number, inv.Status, invoicing.ActionVoid, inv.Actions); err != nil {
		return s.afterAction(c, err, "", "/finance/invoices/", s.renderInvoiceReview, "reason", "note", "po_number")
	}
	if err := checkVoidForm(c, invoicing.InvoiceVoidReasons); err != nil {
		return s.afterAction(c, err, "", "/finance/invoices/", s.renderInvoiceReview, "reason", "note", "po_number")
	}
	path := "/finance/invoices/" + inv.ID
	fields := core.HiddenFields(c, "reason", "note", "po_number")
	conf := voidConfirmation("invoice", inv.DisplayNumber, inv.AccountName, inv.Total, inv.Status,
		invoicing.VoidReason(c.FormValue("reason")), path+"/void", path, fields)
	if !core.Confirmed(c, conf) {
		return s.AskToConfirm(c, "Void invoice", conf)
	}
	po := c.FormValue("po_number")
	_, err = s.invoicing.VoidInvoice(c.Request().Context(), voidInput(c, c.FormValue("reason"), c.FormValue("note"), &po))
	return s.afterAction(c, err, "voided", "/finance/invoices/", s.renderInvoiceReview, "reason", "note", "po_number")
}

func (s *Server) voidStatementSubmit(c echo.Context) error {
	st, err := s.invoicing.Statement(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	if err := refusal("statement", st.Number, st.Status, invoicing.ActionVoid, st.Actions); err != nil {
		return s.afterAction(c, err, "", "/finance/statements/", s.renderStatementReview, "reason", "note")
	}
	if err := checkVoidForm(c, invoicing.StatementVoidReasons); err != nil {
		return s.afterAction(c, err, "", "/finance/statements/", s.renderStatementReview, "reason", "note")
	}
	path := "/finance/statements/" + st.ID
	fields := core.HiddenFields(c, "reason", "note")
	conf := voidConfirmation("statement", st.DisplayNumber, st.ProviderName, st.Net, st.Status,
		invoicing.VoidReason(c.FormValue("reason")), path+"/void", path, fields)
	if !core.Confirmed(c, conf) {
		return s.AskToConfirm(c, "Void statement", conf)
	}
	_, err = s.invoicing.VoidStatement(c.Request().Context(), voidInput(c, c.FormValue("reason"), c.FormValue("note"), nil))
	return s.afterAction(c, err, "voided", "/finance/statements/", s.renderStatementReview, "reason", "note")
}

// refusal is the refusal of an action the document's state does not allow, before its
// confirmation is asked: the service's own words, and nothing is done.
func refusal(kind, number string, status invoicing.Status, a invoicing.Action, allowed []invoicing.Action) error {
	if allows(allowed, a) {
		return nil
	}
	return invoicing.NotAllowed(kind, number, status, a, allowed)
}

// checkVoidForm refuses, before its confirmation is asked, a void the service would refuse
// for its form: no reason, or one of another kind, or the note its reason needs missing.
func checkVoidForm(c echo.Context, reasons []invoicing.VoidReason) error {
	reason := invoicing.VoidReason(c.FormValue("reason"))
	for _, r := range reasons {
		if r == reason {
			if r == invoicing.VoidOther && strings.TrimSpace(c.FormValue("note")) == "" {
				return core.FieldError("note", "Say why it is voided.")
			}
			return nil
		}
	}
	return core.FieldError("reason", "Choose why it is voided.")
}

func (s *Server) invoicePaidSubmit(c echo.Context) error {
	inv, err := s.invoicing.Invoice(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	if err := refusal("invoice", inv.Number, inv.Status, invoicing.ActionMarkPaid, inv.Actions); err != nil {
		return s.afterAction(c, err, "", "/finance/invoices/", s.renderInvoiceReview, "reference")
	}
	path := "/finance/invoices/" + inv.ID
	conf := paidConfirmation("invoice", inv.DisplayNumber, inv.AccountName, inv.AmountDue, inv.Status, path+"/paid", path,
		core.HiddenFields(c, "reference"))
	if !core.Confirmed(c, conf) {
		return s.AskToConfirm(c, "Mark invoice paid", conf)
	}
	err = s.invoicing.MarkInvoicePaid(c.Request().Context(), core.UserID(c), c.Param("id"), c.FormValue("reference"))
	return s.afterAction(c, err, "marked-paid", "/finance/invoices/", s.renderInvoiceReview, "reference")
}

func (s *Server) statementPaidSubmit(c echo.Context) error {
	st, err := s.invoicing.Statement(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	if err := refusal("statement", st.Number, st.Status, invoicing.ActionMarkPaid, st.Actions); err != nil {
		return s.afterAction(c, err, "", "/finance/statements/", s.renderStatementReview, "reference")
	}
	path := "/finance/statements/" + st.ID
	conf := paidConfirmation("statement", st.DisplayNumber, st.ProviderName, st.Payout, st.Status, path+"/paid", path,
		core.HiddenFields(c, "reference"))
	if !core.Confirmed(c, conf) {
		return s.AskToConfirm(c, "Mark statement paid", conf)
	}
	err = s.invoicing.MarkStatementPaid(c.Request().Context(), core.UserID(c), c.Param("id"), c.FormValue("reference"))
	return s.afterAction(c, err, "marked-paid", "/finance/statements/", s.renderStatementReview, "reference")
}

// afterAction redirects to the document's page with the flash, or shows the page again with
// the form's errors and the values posted.
func (s *Server) afterAction(c echo.Context, err error, flash, path string, page func(echo.Context, int, templates.Form) error,
	fields ...string) error {
	if err != nil {
		return s.FormError(c, err, func(f templates.Form) error {
			f.Values = core.Submitted(c, fields...)
			return page(c, core.StatusFor(err), f)
		})
	}
	return c.Redirect(http.StatusSeeOther, path+c.Param("id")+"?flash="+flash)
}
