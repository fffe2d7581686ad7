package web

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/templates"
)

// Finance's review of invoices and statements (see docs/invoicing.md, "Pages and API"): the
// queues with their filters and flags, a page per document with the actions its state allows,
// approval of one or many, void with a reason, payment recorded. Every action is the
// service's; a page offers only what the document's Actions list, and the service refuses any
// other anyway.

func (s *Server) invoicingRoutes() {
	e := s.echo
	s.documentRoutes()

	finance := []echo.MiddlewareFunc{s.requirePage(accounts.RoleFinance, accounts.RoleAdmin), s.needsInvoicing}
	e.GET("/finance/invoices", s.invoiceQueuePage, finance...)
	e.POST("/finance/invoices/approve", s.approveInvoicesSubmit, finance...)
	e.GET("/finance/invoices/:id", s.invoiceReviewPage, finance...)
	e.POST("/finance/invoices/:id/approve", s.approveInvoiceSubmit, finance...)
	e.POST("/finance/invoices/:id/void", s.voidInvoiceSubmit, finance...)
	e.POST("/finance/invoices/:id/paid", s.invoicePaidSubmit, finance...)
	e.GET("/finance/statements", s.statementQueuePage, finance...)
	e.POST("/finance/statements/approve", s.approveStatementsSubmit, finance...)
	e.GET("/finance/statements/:id", s.statementReviewPage, finance...)
	e.POST("/finance/statements/:id/approve", s.approveStatementSubmit, finance...)
	e.POST("/finance/statements/:id/void", s.voidStatementSubmit, finance...)
	e.POST("/finance/statements/:id/paid", s.statementPaidSubmit, finance...)
	e.GET("/finance/close", s.closePage, finance...)
	e.POST("/finance/close", s.closeSubmit, finance...)
	e.GET("/finance/audit", s.auditPage, finance...)

	api := []echo.MiddlewareFunc{s.requireAPI(accounts.RoleFinance, accounts.RoleAdmin), s.needsInvoicing}
	e.GET("/api/finance/invoices", s.apiFinanceInvoices, api...)
	e.POST("/api/finance/invoices/approve", s.apiApproveInvoices, api...)
	e.GET("/api/finance/invoices/:id", s.apiFinanceInvoice, api...)
	e.POST("/api/finance/invoices/:id/approve", s.apiApproveInvoice, api...)
	e.POST("/api/finance/invoices/:id/void", s.apiVoidInvoice, api...)
	e.POST("/api/finance/invoices/:id/paid", s.apiInvoicePaid, api...)
	e.GET("/api/finance/credit-notes/:id", s.apiFinanceCreditNote, api...)
	e.GET("/api/finance/statements", s.apiFinanceStatements, api...)
	e.POST("/api/finance/statements/approve", s.apiApproveStatements, api...)
	e.GET("/api/finance/statements/:id", s.apiFinanceStatement, api...)
	e.POST("/api/finance/statements/:id/approve", s.apiApproveStatement, api...)
	e.POST("/api/finance/statements/:id/void", s.apiVoidStatement, api...)
	e.POST("/api/finance/statements/:id/paid", s.apiStatementPaid, api...)
	e.POST("/api/finance/close", s.apiClose, api...)
	e.GET("/api/finance/closes", s.apiCloses, api...)
	e.GET("/api/finance/closes/:period", s.apiCloseProgress, api...)
	e.GET("/api/finance/audit", s.apiAudit, api...)
	e.GET("/api/finance/journal.csv", s.journalCSV, api...)
}

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
	invoicing.FlagDiscrepancy:     "gateway/meter discrepancy",
	invoicing.FlagNegativeBalance: "negative balance",
	invoicing.FlagSpike:           "more than 3x last month",
}

func flagViews(flags []invoicing.Flag) []templates.FlagView {
	out := make([]templates.FlagView, 0, len(flags))
	for _, f := range flags {
		out = append(out, templates.FlagView{Key: string(f), Label: flagLabels[f]})
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
		period = invoicing.PeriodOf(s.now()).Prev().String()
	}
	return "/api/finance/journal.csv?period=" + period, period
}

func (s *Server) invoiceQueuePage(c echo.Context) error {
	return s.renderInvoiceQueue(c, http.StatusOK, nil)
}

func (s *Server) renderInvoiceQueue(c echo.Context, status int, results []templates.ApprovalResult) error {
	q := readQueueQuery(c)
	p := templates.ReviewQueuePage{Page: s.page(c, "Invoices"), Kind: "invoices", Heading: "Invoices",
		Filters: queueFilters(q, "Customer"), TotalLabel: "Total", DueLabel: "Amount due", Results: results}
	p.JournalURL, p.JournalPeriod = s.journalLink(q.Period)
	f, err := q.invoiceFilter()
	var page invoicing.InvoicePage
	if err == nil {
		page, err = s.invoicing.Invoices(c.Request().Context(), f)
	}
	if err != nil {
		return s.formError(c, err, func(form templates.Form) error {
			p.Form = form
			return s.render(c, statusFor(err), templates.ReviewQueue(p))
		})
	}
	for _, inv := range page.Invoices {
		p.Rows = append(p.Rows, templates.ReviewRow{ID: inv.ID, URL: "/finance/invoices/" + inv.ID, Number: inv.DisplayNumber,
			Party: inv.AccountName, Period: inv.Period.String(), Status: string(inv.Status), Total: inv.Total.String(),
			Due: inv.AmountDue.String(), Flags: flagViews(inv.Flags), Actions: actionWords(inv.Actions),
			Approvable: allows(inv.Actions, invoicing.ActionApprove), DocumentURL: "/invoices/" + inv.ID,
			PDFURL: "/invoices/" + inv.ID + "/pdf"})
	}
	p.NextURL = nextPage("/finance/invoices", q, len(page.Invoices), page.More)
	return s.render(c, status, templates.ReviewQueue(p))
}

func (s *Server) statementQueuePage(c echo.Context) error {
	return s.renderStatementQueue(c, http.StatusOK, nil)
}

func (s *Server) renderStatementQueue(c echo.Context, status int, results []templates.ApprovalResult) error {
	q := readQueueQuery(c)
	p := templates.ReviewQueuePage{Page: s.page(c, "Provider statements"), Kind: "statements", Heading: "Provider statements",
		Filters: queueFilters(q, "Provider"), TotalLabel: "Net", DueLabel: "Payout", Results: results}
	p.JournalURL, p.JournalPeriod = s.journalLink(q.Period)
	f, err := q.statementFilter()
	var page invoicing.StatementPage
	if err == nil {
		page, err = s.invoicing.Statements(c.Request().Context(), f)
	}
	if err != nil {
		return s.formError(c, err, func(form templates.Form) error {
			p.Form = form
			return s.render(c, statusFor(err), templates.ReviewQueue(p))
		})
	}
	for _, st := range page.Statements {
		p.Rows = append(p.Rows, templates.ReviewRow{ID: st.ID, URL: "/finance/statements/" + st.ID, Number: st.DisplayNumber,
			Party: st.ProviderName, Period: st.Period.String(), Status: string(st.Status), Total: st.Net.String(),
			Due: st.Payout.String(), Flags: flagViews(st.Flags), Actions: actionWords(st.Actions),
			Approvable: allows(st.Actions, invoicing.ActionApprove), DocumentURL: "/statements/" + st.ID,
			PDFURL: "/statements/" + st.ID + "/pdf"})
	}
	p.NextURL = nextPage("/finance/statements", q, len(page.Statements), page.More)
	return s.render(c, status, templates.ReviewQueue(p))
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

// Approval.

// approvalResults are the outcomes of an approval of many, with links to each document.
func approvalResults(kind string, res []invoicing.Approved) []templates.ApprovalResult {
	out := make([]templates.ApprovalResult, 0, len(res))
	for _, r := range res {
		out = append(out, templates.ApprovalResult{ID: r.ID, URL: "/finance/" + kind + "/" + url.PathEscape(r.ID), Number: r.Number,
			Problem: r.Problem})
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
		return nil, fieldError("id", "Select the drafts to approve.")
	}
	if len(ids) > invoicing.MaxListLimit {
		return nil, fieldError("id", "Approve at most "+strconv.Itoa(invoicing.MaxListLimit)+" at once.")
	}
	return ids, nil
}

func (s *Server) approveInvoicesSubmit(c echo.Context) error {
	ids, err := selectedIDs(c)
	if err != nil {
		return s.renderQueueError(c, err, s.renderInvoiceQueue)
	}
	res, err := s.invoicing.ApproveInvoices(c.Request().Context(), userID(c), ids)
	if err != nil {
		return s.renderQueueError(c, err, s.renderInvoiceQueue)
	}
	return s.renderInvoiceQueue(c, http.StatusOK, approvalResults("invoices", res))
}

func (s *Server) approveStatementsSubmit(c echo.Context) error {
	ids, err := selectedIDs(c)
	if err != nil {
		return s.renderQueueError(c, err, s.renderStatementQueue)
	}
	res, err := s.invoicing.ApproveStatements(c.Request().Context(), userID(c), ids)
	if err != nil {
		return s.renderQueueError(c, err, s.renderStatementQueue)
	}
	return s.renderStatementQueue(c, http.StatusOK, approvalResults("statements", res))
}

// renderQueueError shows a refused approval of many on its queue, with what to do.
func (s *Server) renderQueueError(c echo.Context, err error, render func(echo.Context, int, []templates.ApprovalResult) error) error {
	switch services.ErrorCode(err) {
	case services.CodeInvalid, services.CodeConflict, services.CodeUnavailable:
		_, body := s.describe(err)
		msg := body.Message
		for _, v := range body.Fields {
			msg = v
		}
		return render(c, statusFor(err), []templates.ApprovalResult{{Problem: msg}})
	}
	return err
}

// userID is the logged-in user's id: who takes a finance action.
func userID(c echo.Context) string {
	sess, _ := currentSession(c)
	return sess.User.ID
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
			_, body := s.describe(err)
			return page(templates.Form{Error: body.Message}, statusFor(err))
		}
		return err
	}
	return c.Redirect(http.StatusSeeOther, path+"?flash=approved")
}

func (s *Server) approveInvoiceSubmit(c echo.Context) error {
	id := c.Param("id")
	return s.approveOne(c, func() ([]invoicing.Approved, error) {
		return s.invoicing.ApproveInvoices(c.Request().Context(), userID(c), []string{id})
	}, func(f templates.Form, status int) error { return s.renderInvoiceReview(c, status, f) }, "/finance/invoices/"+id)
}

func (s *Server) approveStatementSubmit(c echo.Context) error {
	id := c.Param("id")
	return s.approveOne(c, func() ([]invoicing.Approved, error) {
		return s.invoicing.ApproveStatements(c.Request().Context(), userID(c), []string{id})
	}, func(f templates.Form, status int) error { return s.renderStatementReview(c, status, f) }, "/finance/statements/"+id)
}

// Void and payment.

// voidInput reads a void's form or body: the reason, the note, and a new PO number when one is
// given (none keeps the voided invoice's).
func voidInput(c echo.Context, reason, note string, po *string) invoicing.VoidInput {
	in := invoicing.VoidInput{ID: c.Param("id"), By: userID(c), Reason: invoicing.VoidReason(reason), Note: note}
	if po != nil && strings.TrimSpace(*po) != "" {
		in.PONumber = po
	}
	return in
}

func (s *Server) voidInvoiceSubmit(c echo.Context) error {
	po := c.FormValue("po_number")
	_, err := s.invoicing.VoidInvoice(c.Request().Context(), voidInput(c, c.FormValue("reason"), c.FormValue("note"), &po))
	return s.afterAction(c, err, "voided", "/finance/invoices/", s.renderInvoiceReview, "reason", "note", "po_number")
}

func (s *Server) voidStatementSubmit(c echo.Context) error {
	_, err := s.invoicing.VoidStatement(c.Request().Context(), voidInput(c, c.FormValue("reason"), c.FormValue("note"), nil))
	return s.afterAction(c, err, "voided", "/finance/statements/", s.renderStatementReview, "reason", "note")
}

func (s *Server) invoicePaidSubmit(c echo.Context) error {
	err := s.invoicing.MarkInvoicePaid(c.Request().Context(), userID(c), c.Param("id"), c.FormValue("reference"))
	return s.afterAction(c, err, "marked-paid", "/finance/invoices/", s.renderInvoiceReview, "reference")
}

func (s *Server) statementPaidSubmit(c echo.Context) error {
	err := s.invoicing.MarkStatementPaid(c.Request().Context(), userID(c), c.Param("id"), c.FormValue("reference"))
	return s.afterAction(c, err, "marked-paid", "/finance/statements/", s.renderStatementReview, "reference")
}

// afterAction redirects to the document's page with the flash, or shows the page again with
// the form's errors and the values posted.
func (s *Server) afterAction(c echo.Context, err error, flash, path string, page func(echo.Context, int, templates.Form) error,
	fields ...string) error {
	if err != nil {
		return s.formError(c, err, func(f templates.Form) error {
			f.Values = submitted(c, fields...)
			return page(c, statusFor(err), f)
		})
	}
	return c.Redirect(http.StatusSeeOther, path+c.Param("id")+"?flash="+flash)
}

// Detail pages.

func (s *Server) invoiceReviewPage(c echo.Context) error {
	return s.renderInvoiceReview(c, http.StatusOK, templates.Form{})
}

func (s *Server) renderInvoiceReview(c echo.Context, status int, form templates.Form) error {
	ctx := c.Request().Context()
	inv, err := s.invoicing.Invoice(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	history, err := s.history(c, "invoice", inv.ID)
	if err != nil {
		return err
	}
	p := invoiceReview(s.page(c, "Invoice "+inv.DisplayNumber), inv, history, form)
	return s.render(c, status, templates.FinanceDocument(p))
}

func (s *Server) statementReviewPage(c echo.Context) error {
	return s.renderStatementReview(c, http.StatusOK, templates.Form{})
}

func (s *Server) renderStatementReview(c echo.Context, status int, form templates.Form) error {
	ctx := c.Request().Context()
	st, err := s.invoicing.Statement(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	history, err := s.history(c, "statement", st.ID)
	if err != nil {
		return err
	}
	p := statementReview(s.page(c, "Statement "+st.DisplayNumber), st, history, form)
	return s.render(c, status, templates.FinanceDocument(p))
}

// history is a document's entries in the audit log, newest first.
func (s *Server) history(c echo.Context, kind, id string) ([]audit.Entry, error) {
	page, err := s.audit.List(c.Request().Context(), audit.Filter{SubjectKind: kind, SubjectID: id, Limit: audit.MaxLimit})
	return page.Entries, err
}

func invoiceReview(page templates.Page, inv invoicing.Invoice, history []audit.Entry, form templates.Form) templates.FinanceDocumentPage {
	base := "/finance/invoices/" + inv.ID
	p := templates.FinanceDocumentPage{Page: page, Kind: "invoice", Title: "Invoice", ID: inv.ID, Path: base,
		Number: inv.DisplayNumber, Status: string(inv.Status), Period: inv.Period.Label(), Party: inv.AccountName,
		PartyID: inv.AccountID, PartyRole: "Customer", Flags: flagViews(inv.Flags), PriceLabel: "price",
		Strong: "Total", BalanceTitle: "Prepaid balance", Form: form,
		DocumentURL: "/invoices/" + inv.ID, PDFURL: "/invoices/" + inv.ID + "/pdf", CSVURL: "/invoices/" + inv.ID + "/csv",
		History: auditRows(history)}
	for _, l := range inv.Lines {
		dl := templates.DocumentDetailLine{No: strconv.Itoa(l.No), Kind: strings.ReplaceAll(string(l.Kind), "_", " "),
			Description: l.Description, Exact: l.Charge.String(), Amount: l.Amount.String()}
		if l.Kind == invoicing.LineUsage || l.Kind == invoicing.LineLateUsage {
			dl.Requests, dl.Uncharged = count(l.Requests), count(l.UnchargedRequests)
			dl.InputTokens, dl.OutputTokens = count(l.InputTokens), count(l.OutputTokens)
			dl.InputPrice, dl.OutputPrice = "—", "—"
			if l.InputPrice != nil {
				dl.InputPrice, dl.OutputPrice = l.InputPrice.String(), l.OutputPrice.String()
			}
		}
		p.Lines = append(p.Lines, dl)
	}
	p.Totals = []templates.Fact{{Label: "Total", Value: inv.Total.String()}, {Label: "Amount due", Value: inv.AmountDue.String()}}
	b := inv.Balance
	p.Balance = []templates.Fact{{Label: "Opening", Value: b.Opening.String()}, {Label: "Purchases", Value: b.Purchases.String()},
		{Label: "Refunds", Value: b.Refunds.String()}, {Label: "Adjustments", Value: b.Adjustments.String()},
		{Label: "Credit notes", Value: b.CreditNotes.String()}, {Label: "Usage charged", Value: b.UsageCharged.String()},
		{Label: "Closing", Value: b.Closing.String()}}
	for _, e := range inv.Entries {
		p.Entries = append(p.Entries, templates.EntryRow{At: e.OccurredAt.Format(minuteUTC), Kind: e.Kind, Memo: e.Memo, Amount: e.Amount.String()})
	}
	p.Parties = []templates.DocumentParty{partyView("Buyer", inv.Buyer, inv.PONumber), partyView("Seller", inv.Seller, "")}
	if inv.ReplacesInvoiceID != "" {
		p.Related = append(p.Related, templates.Link{Label: "Replaces " + inv.ReplacesNumber, URL: "/finance/invoices/" + inv.ReplacesInvoiceID,
			TestID: "replaces-link"})
	}
	if inv.ReplacedByInvoiceID != "" {
		p.Related = append(p.Related, templates.Link{Label: "Replaced by a regenerated invoice", URL: "/finance/invoices/" + inv.ReplacedByInvoiceID,
			TestID: "replaced-by-link"})
	}
	for _, cn := range inv.CreditNotes {
		p.Related = append(p.Related, templates.Link{Label: "Credit note " + cn.Number, URL: "/credit-notes/" + cn.ID, TestID: "credit-note-link"})
	}
	p.Facts = documentFactsOf(inv.ComputedAt, inv.CreatedAt, inv.IssuedAt, inv.IssuedBy, inv.PaidAt, inv.PaidBy, inv.PaymentReference,
		inv.VoidedAt, inv.VoidedBy, inv.VoidReason, inv.VoidNote)
	p.Actions = templates.DocumentActions{Approve: allows(inv.Actions, invoicing.ActionApprove),
		MarkPaid: allows(inv.Actions, invoicing.ActionMarkPaid), Void: allows(inv.Actions, invoicing.ActionVoid),
		VoidReasons: reasonOptions(invoicing.InvoiceVoidReasons), VoidPO: true}
	return p
}

func statementReview(page templates.Page, st invoicing.Statement, history []audit.Entry, form templates.Form) templates.FinanceDocumentPage {
	base := "/finance/statements/" + st.ID
	p := templates.FinanceDocumentPage{Page: page, Kind: "statement", Title: "Provider statement", ID: st.ID, Path: base,
		Number: st.DisplayNumber, Status: string(st.Status), Period: st.Period.Label(), Party: st.ProviderName,
		PartyID: st.ProviderAccountID, PartyRole: "Provider", Flags: flagViews(st.Flags), PriceLabel: "ask",
		Strong: "Net", BalanceTitle: "The provider's payable", Form: form,
		DocumentURL: "/statements/" + st.ID, PDFURL: "/statements/" + st.ID + "/pdf", CSVURL: "/statements/" + st.ID + "/csv",
		History: auditRows(history)}
	for _, l := range st.Lines {
		dl := templates.DocumentDetailLine{No: strconv.Itoa(l.No), Kind: strings.ReplaceAll(string(l.Kind), "_", " "),
			Description: l.Description, Exact: l.Earned.String(), Amount: l.Amount.String()}
		if l.Kind == invoicing.LineUsage || l.Kind == invoicing.LineLateUsage {
			dl.Requests, dl.Uncharged = count(l.Requests), count(l.UnchargedRequests)
			dl.InputTokens, dl.OutputTokens = count(l.InputTokens), count(l.OutputTokens)
			dl.InputPrice, dl.OutputPrice = l.AskInput.String(), l.AskOutput.String()
		}
		p.Lines = append(p.Lines, dl)
	}
	p.Totals = []templates.Fact{{Label: "Earnings", Value: st.Earnings.String()}, {Label: "Late earnings", Value: st.LateEarnings.String()},
		{Label: "Clawbacks", Value: st.Clawbacks.String()}, {Label: "Carried in", Value: st.CarriedIn.String()},
		{Label: "Net", Value: st.Net.String()}, {Label: "Minimum payout", Value: st.MinimumPayout.String()},
		{Label: "Payout", Value: st.Payout.String()}, {Label: "Carried out", Value: st.CarriedOut.String()}}
	b := st.Payable
	p.Balance = []templates.Fact{{Label: "Opening", Value: b.Opening.String()}, {Label: "Usage", Value: b.Usage.String()},
		{Label: "Credit notes", Value: b.CreditNotes.String()}, {Label: "Payouts", Value: b.Payouts.String()},
		{Label: "Other", Value: b.Other.String()}, {Label: "Closing", Value: b.Closing.String()}}
	p.Parties = []templates.DocumentParty{partyView("Provider (seller)", st.Payee, ""), partyView("Issued by (buyer)", st.Payer, "")}
	if st.ReplacesStatementID != "" {
		p.Related = append(p.Related, templates.Link{Label: "Replaces a voided statement", URL: "/finance/statements/" + st.ReplacesStatementID,
			TestID: "replaces-link"})
	}
	if st.CarriedFromStatementID != "" {
		p.Related = append(p.Related, templates.Link{Label: "Carried over from the previous statement",
			URL: "/finance/statements/" + st.CarriedFromStatementID, TestID: "carried-from-link"})
	}
	p.Facts = documentFactsOf(st.ComputedAt, st.CreatedAt, st.IssuedAt, st.IssuedBy, st.PaidAt, st.PaidBy, st.PaymentReference,
		st.VoidedAt, st.VoidedBy, st.VoidReason, st.VoidNote)
	p.Actions = templates.DocumentActions{Approve: allows(st.Actions, invoicing.ActionApprove),
		MarkPaid: allows(st.Actions, invoicing.ActionMarkPaid), Void: allows(st.Actions, invoicing.ActionVoid),
		VoidReasons: reasonOptions(invoicing.StatementVoidReasons)}
	return p
}

func reasonOptions(reasons []invoicing.VoidReason) []templates.Option {
	out := []templates.Option{{Value: "", Label: "Choose a reason"}}
	for _, r := range reasons {
		out = append(out, templates.Option{Value: string(r), Label: r.Text()})
	}
	return out
}

func partyView(label string, p invoicing.Party, po string) templates.DocumentParty {
	v := templates.DocumentParty{Label: label, Name: p.LegalName}
	for _, l := range strings.Split(p.Address, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			v.Lines = append(v.Lines, l)
		}
	}
	if p.CountryName != "" {
		v.Lines = append(v.Lines, p.CountryName)
	}
	if p.VATID != "" {
		v.Lines = append(v.Lines, "VAT ID "+p.VATID)
	}
	if po != "" {
		v.Lines = append(v.Lines, "PO number "+po)
	}
	return v
}

// documentFactsOf is a document's record: when its figures were computed, and who issued,
// paid and voided it, when.
func documentFactsOf(computed, created time.Time, issuedAt *time.Time, issuedBy string, paidAt *time.Time, paidBy, reference string,
	voidedAt *time.Time, voidedBy string, reason invoicing.VoidReason, note string) []templates.Fact {
	facts := []templates.Fact{{Label: "Drawn up", Value: created.Format(minuteUTC)}, {Label: "Figures computed", Value: computed.Format(minuteUTC)}}
	if issuedAt != nil {
		facts = append(facts, templates.Fact{Label: "Issued", Value: issuedAt.Format(minuteUTC) + " by " + issuedBy})
	}
	if paidAt != nil {
		v := paidAt.Format(minuteUTC) + " by " + paidBy
		if reference != "" {
			v += ", reference " + reference
		}
		facts = append(facts, templates.Fact{Label: "Paid", Value: v})
	}
	if voidedAt != nil {
		v := voidedAt.Format(minuteUTC) + " by " + voidedBy + ": " + reason.Text()
		if note != "" {
			v += " (" + note + ")"
		}
		facts = append(facts, templates.Fact{Label: "Voided", Value: v})
	}
	return facts
}

func count(n int64) string { return strconv.FormatInt(n, 10) }
