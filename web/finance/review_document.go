package finance

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// A document's page for finance: its lines, totals, flags, parties, links, history, and the
// forms of the actions its state allows (see docs/invoicing.md, "A document's page").

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
	p := invoiceReview(s.Page(c, "Invoice "+inv.DisplayNumber), core.Zone(c), inv, history, form)
	return s.Render(c, status, templates.FinanceDocument(p))
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
	p := statementReview(s.Page(c, "Statement "+st.DisplayNumber), core.Zone(c), st, history, form)
	p.Actions.ApproveLabel = statementApproveButton(st, s.invoicing.PaysOut()) + "…"
	return s.Render(c, status, templates.FinanceDocument(p))
}

// history is a document's entries in the audit log, newest first.
func (s *Server) history(c echo.Context, kind, id string) ([]audit.Entry, error) {
	page, err := s.audit.List(c.Request().Context(), audit.Filter{SubjectKind: kind, SubjectID: id, Limit: audit.MaxLimit})
	return page.Entries, err
}

func invoiceReview(page templates.Page, loc *time.Location, inv invoicing.Invoice, history []audit.Entry, form templates.Form) templates.FinanceDocumentPage {
	base := "/finance/invoices/" + inv.ID
	p := templates.FinanceDocumentPage{Page: page, Kind: "invoice", Title: "Invoice", ID: inv.ID, Path: base,
		Number: inv.DisplayNumber, Status: string(inv.Status), Period: inv.Period.Label(), Party: inv.AccountName,
		PartyID: inv.AccountID, PartyRole: "Customer", Flags: flagViews(inv.Flags, inv.FlagNotes,
			flagTarget{party: "account", partyID: inv.AccountID, period: inv.Period, review: base}), PriceLabel: "price",
		Strong: "Total", BalanceTitle: "Prepaid balance", Form: form,
		DocumentURL: "/invoices/" + inv.ID, PDFURL: "/invoices/" + inv.ID + "/pdf", CSVURL: "/invoices/" + inv.ID + "/csv",
		History: auditRows(loc, history, map[string]string{"invoice " + inv.ID: inv.DisplayNumber})}
	for _, l := range inv.Lines {
		dl := templates.DocumentDetailLine{No: strconv.Itoa(l.No), Kind: strings.ReplaceAll(string(l.Kind), "_", " "),
			Description: l.Description, Exact: l.Charge.String(), Amount: l.Amount.String()}
		if l.Kind == invoicing.LineUsage || l.Kind == invoicing.LineLateUsage {
			dl.Requests, dl.Uncharged = core.Count(l.Requests), unchargedText(l.UnchargedRequests)
			dl.InputTokens, dl.OutputTokens = core.Count(l.InputTokens), core.Count(l.OutputTokens)
			dl.InputPrice, dl.OutputPrice = "—", "—"
			if l.InputPrice != nil {
				dl.InputPrice, dl.OutputPrice = l.InputPrice.String(), l.OutputPrice.String()
			}
		}
		p.Lines = append(p.Lines, dl)
	}
	p.Totals = []templates.Fact{{Label: "Total", Value: inv.Total.String()}, {Label: "Amount due", Value: inv.AmountDue.String()}}
	// The prepaid balance as the document prints it, footing to the cent.
	if moves, opening, closing, err := invoicing.BalanceInCents(inv); err == nil {
		p.Balance = append(p.Balance, templates.Fact{Label: "Opening", Value: opening.String()})
		for _, m := range moves {
			p.Balance = append(p.Balance, templates.Fact{Label: m.Description, Value: m.Amount.String()})
		}
		p.Balance = append(p.Balance, templates.Fact{Label: "Closing", Value: closing.String()})
	}
	for _, e := range inv.Entries {
		p.Entries = append(p.Entries, templates.EntryRow{At: core.MomentIn(loc, e.OccurredAt, core.ToMinute), Kind: e.Kind, Memo: e.Memo,
			Amount: money.FormatBigCents(e.Amount)})
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
	p.Facts = documentFactsOf(loc, inv.ComputedAt, inv.CreatedAt, inv.IssuedAt, inv.IssuedBy, inv.PaidAt, inv.PaidBy, inv.PaymentReference,
		inv.VoidedAt, inv.VoidedBy, inv.VoidReason, inv.VoidNote)
	p.Actions = templates.DocumentActions{Approve: allows(inv.Actions, invoicing.ActionApprove),
		MarkPaid: allows(inv.Actions, invoicing.ActionMarkPaid), Void: allows(inv.Actions, invoicing.ActionVoid),
		VoidReasons: reasonOptions(invoicing.InvoiceVoidReasons), VoidPO: true, ApproveLabel: "Approve and issue…"}
	return p
}

func statementReview(page templates.Page, loc *time.Location, st invoicing.Statement, history []audit.Entry, form templates.Form) templates.FinanceDocumentPage {
	base := "/finance/statements/" + st.ID
	p := templates.FinanceDocumentPage{Page: page, Kind: "statement", Title: "Provider statement", ID: st.ID, Path: base,
		Number: st.DisplayNumber, Status: string(st.Status), Period: st.Period.Label(), Party: st.ProviderName,
		PartyID: st.ProviderAccountID, PartyRole: "Provider", Flags: flagViews(st.Flags, st.FlagNotes,
			flagTarget{party: "provider", partyID: st.ProviderAccountID, period: st.Period, review: base}), PriceLabel: "ask",
		Strong: "Net", BalanceTitle: "The provider's payable", Form: form,
		DocumentURL: "/statements/" + st.ID, PDFURL: "/statements/" + st.ID + "/pdf", CSVURL: "/statements/" + st.ID + "/csv",
		History: auditRows(loc, history, map[string]string{"statement " + st.ID: st.DisplayNumber})}
	for _, l := range st.Lines {
		dl := templates.DocumentDetailLine{No: strconv.Itoa(l.No), Kind: strings.ReplaceAll(string(l.Kind), "_", " "),
			Description: l.Description, Exact: l.Earned.String(), Amount: l.Amount.String()}
		if l.Kind == invoicing.LineUsage || l.Kind == invoicing.LineLateUsage {
			dl.Requests, dl.Uncharged = core.Count(l.Requests), unchargedText(l.UnchargedRequests)
			dl.InputTokens, dl.OutputTokens = core.Count(l.InputTokens), core.Count(l.OutputTokens)
			dl.InputPrice, dl.OutputPrice = l.AskInput.String(), l.AskOutput.String()
		}
		p.Lines = append(p.Lines, dl)
	}
	p.Totals = []templates.Fact{{Label: "Earnings", Value: st.Earnings.String()}, {Label: "Late earnings", Value: st.LateEarnings.String()},
		{Label: "Clawbacks", Value: st.Clawbacks.String()}, {Label: "Carried in", Value: st.CarriedIn.String()},
		{Label: "Held and released (flagged requests)", Value: st.Held.String()}, {Label: "Net", Value: st.Net.String()}, {Label: "Minimum payout", Value: st.MinimumPayout.String()},
		{Label: "Payout", Value: st.Payout.String()}, {Label: "Carried out", Value: st.CarriedOut.String()}}
	b := st.Payable
	p.Balance = footedFacts(b.Opening, b.Closing, []templates.Fact{{Label: "Usage"}, {Label: "Credit notes"}, {Label: "Payouts"},
		{Label: "Other"}}, []money.BigPico{b.Usage, b.CreditNotes, b.Payouts, b.Other})
	p.Parties = []templates.DocumentParty{partyView("Provider (seller)", st.Payee, ""), partyView("Issued by (buyer)", st.Payer, "")}
	if st.ReplacesStatementID != "" {
		p.Related = append(p.Related, templates.Link{Label: "Replaces a voided statement", URL: "/finance/statements/" + st.ReplacesStatementID,
			TestID: "replaces-link"})
	}
	if st.CarriedFromStatementID != "" {
		p.Related = append(p.Related, templates.Link{Label: "Carried over from the previous statement",
			URL: "/finance/statements/" + st.CarriedFromStatementID, TestID: "carried-from-link"})
	}
	p.Facts = documentFactsOf(loc, st.ComputedAt, st.CreatedAt, st.IssuedAt, st.IssuedBy, st.PaidAt, st.PaidBy, st.PaymentReference,
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
func documentFactsOf(loc *time.Location, computed, created time.Time, issuedAt *time.Time, issuedBy string, paidAt *time.Time, paidBy, reference string,
	voidedAt *time.Time, voidedBy string, reason invoicing.VoidReason, note string) []templates.Fact {
	facts := []templates.Fact{{Label: "Drawn up", Value: core.MomentIn(loc, created, core.ToMinute)}, {Label: "Figures computed", Value: core.MomentIn(loc, computed, core.ToMinute)}}
	if issuedAt != nil {
		facts = append(facts, templates.Fact{Label: "Issued", Value: core.MomentIn(loc, *issuedAt, core.ToMinute) + " by " + issuedBy})
	}
	if paidAt != nil {
		v := core.MomentIn(loc, *paidAt, core.ToMinute) + " by " + paidBy
		if reference != "" {
			v += ", reference " + reference
		}
		facts = append(facts, templates.Fact{Label: "Paid", Value: v})
	}
	if voidedAt != nil {
		v := core.MomentIn(loc, *voidedAt, core.ToMinute) + " by " + voidedBy + ": " + reason.Text()
		if note != "" {
			v += " (" + note + ")"
		}
		facts = append(facts, templates.Fact{Label: "Voided", Value: v})
	}
	return facts
}

// footedFacts writes an opening balance, its movements (labelled, exact) and its closing
// balance each rounded to the cent, with a rounding row where the rounded movements do not
// add up to the rounded closing balance, as documents print a balance (invoicing.BalanceInCents).
func footedFacts(opening, closing money.BigPico, labels []templates.Fact, moves []money.BigPico) []templates.Fact {
	o, err1 := invoicing.CentsOf(opening)
	c, err2 := invoicing.CentsOf(closing)
	if err1 != nil || err2 != nil {
		return nil
	}
	out, sum := []templates.Fact{{Label: "Opening", Value: o.String()}}, o
	for i, m := range moves {
		mc, err := invoicing.CentsOf(m)
		if err != nil {
			return nil
		}
		sum += mc
		out = append(out, templates.Fact{Label: labels[i].Label, Value: mc.String()})
	}
	if r := c - sum; r != 0 {
		out = append(out, templates.Fact{Label: invoicing.RoundingDescription, Value: r.String()})
	}
	return append(out, templates.Fact{Label: "Closing", Value: c.String()})
}

// unchargedText says how many of a line's requests produced nothing and were not charged; "" for none.
func unchargedText(n int64) string {
	if n == 0 {
		return ""
	}
	return money.Counted(n, "request", "requests") + " not charged"
}
