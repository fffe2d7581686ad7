package finance

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// Finance's JSON beside its review pages. A document carries its lines, total_cents, status,
// number and the actions its state allows, with the links to its printed forms and its
// history in the audit log.

// documentLinksJSON are where a document's printed forms and finance's page of it are.
type documentLinksJSON struct {
	Page    string `json:"page"`
	PDF     string `json:"pdf"`
	CSV     string `json:"csv"`
	Finance string `json:"finance,omitempty"`
}

func linksOf(kind, financeKind, id string) documentLinksJSON {
	base := "/" + kind + "/" + url.PathEscape(id)
	l := documentLinksJSON{Page: base, PDF: base + "/pdf", CSV: base + "/csv"}
	if financeKind != "" {
		l.Finance = "/finance/" + financeKind + "/" + url.PathEscape(id)
	}
	return l
}

type invoiceJSON struct {
	invoicing.Invoice
	Links   documentLinksJSON `json:"links"`
	History []audit.Entry     `json:"history"`
}

type statementJSON struct {
	invoicing.Statement
	Links   documentLinksJSON `json:"links"`
	History []audit.Entry     `json:"history"`
}

type creditNoteJSON struct {
	invoicing.CreditNote
	Links documentLinksJSON `json:"links"`
}

type voidedJSON struct {
	invoicing.Voided
	CreditNote  *documentLinksJSON `json:"credit_note,omitempty"`
	Regenerated documentLinksJSON  `json:"regenerated"`
}

func (s *Server) invoiceJSON(c echo.Context, id string) (invoiceJSON, error) {
	inv, err := s.invoicing.Invoice(c.Request().Context(), id)
	if err != nil {
		return invoiceJSON{}, err
	}
	history, err := s.history(c, "invoice", inv.ID)
	if err != nil {
		return invoiceJSON{}, err
	}
	return invoiceJSON{Invoice: inv, Links: linksOf("invoices", "invoices", inv.ID), History: history}, nil
}

func (s *Server) statementJSON(c echo.Context, id string) (statementJSON, error) {
	st, err := s.invoicing.Statement(c.Request().Context(), id)
	if err != nil {
		return statementJSON{}, err
	}
	history, err := s.history(c, "statement", st.ID)
	if err != nil {
		return statementJSON{}, err
	}
	return statementJSON{Statement: st, Links: linksOf("statements", "statements", st.ID), History: history}, nil
}

func (s *Server) apiFinanceInvoices(c echo.Context) error {
	f, err := readQueueQuery(c).invoiceFilter()
	if err != nil {
		return err
	}
	page, err := s.invoicing.Invoices(c.Request().Context(), f)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}

func (s *Server) apiFinanceStatements(c echo.Context) error {
	f, err := readQueueQuery(c).statementFilter()
	if err != nil {
		return err
	}
	page, err := s.invoicing.Statements(c.Request().Context(), f)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}

func (s *Server) apiFinanceInvoice(c echo.Context) error {
	out, err := s.invoiceJSON(c, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) apiFinanceStatement(c echo.Context) error {
	out, err := s.statementJSON(c, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) apiFinanceCreditNote(c echo.Context) error {
	cn, err := s.invoicing.CreditNote(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, creditNoteJSON{CreditNote: cn, Links: linksOf("credit-notes", "", cn.ID)})
}

// approvedOne is the single outcome of approving one document: its refusal is the error.
func approvedOne(res []invoicing.Approved, err error) error {
	if err != nil {
		return err
	}
	return res[0].Err
}

// apiApproveInvoice approves a draft and answers with the invoice as issued, number and all.
func (s *Server) apiApproveInvoice(c echo.Context) error {
	id := c.Param("id")
	if err := approvedOne(s.invoicing.ApproveInvoices(c.Request().Context(), core.UserID(c), []string{id})); err != nil {
		return err
	}
	return s.apiFinanceInvoice(c)
}

func (s *Server) apiApproveStatement(c echo.Context) error {
	id := c.Param("id")
	if err := approvedOne(s.invoicing.ApproveStatements(c.Request().Context(), core.UserID(c), []string{id})); err != nil {
		return err
	}
	return s.apiFinanceStatement(c)
}

// idsBody is an approval of many: the ids of the drafts.
type idsBody struct {
	IDs []string `json:"ids"`
}

func (b idsBody) check() error {
	if len(b.IDs) == 0 {
		return core.FieldError("ids", "Give the ids of the drafts to approve.")
	}
	if len(b.IDs) > invoicing.MaxListLimit {
		return core.FieldError("ids", "Approve at most "+strconv.Itoa(invoicing.MaxListLimit)+" at once.")
	}
	return nil
}

// apiApproveInvoices approves many drafts, each on its own, and says per id the number it was
// issued with or why it was not.
func (s *Server) apiApproveInvoices(c echo.Context) error {
	var in idsBody
	if err := core.DecodeJSON(c, &in); err != nil {
		return err
	}
	if err := in.check(); err != nil {
		return err
	}
	res, err := s.invoicing.ApproveInvoices(c.Request().Context(), core.UserID(c), in.IDs)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"results": res})
}

func (s *Server) apiApproveStatements(c echo.Context) error {
	var in idsBody
	if err := core.DecodeJSON(c, &in); err != nil {
		return err
	}
	if err := in.check(); err != nil {
		return err
	}
	res, err := s.invoicing.ApproveStatements(c.Request().Context(), core.UserID(c), in.IDs)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"results": res})
}

// voidBody is a void: a reason from the fixed list, a note (required for "other"), and for an
// invoice a new PO number for the regenerated one (absent or null keeps the voided one's).
type voidBody struct {
	Reason   string  `json:"reason"`
	Note     string  `json:"note"`
	PONumber *string `json:"po_number"`
}

func (s *Server) apiVoidInvoice(c echo.Context) error {
	var in voidBody
	if err := core.DecodeJSON(c, &in); err != nil {
		return err
	}
	v, err := s.invoicing.VoidInvoice(c.Request().Context(), voidInput(c, in.Reason, in.Note, in.PONumber))
	if err != nil {
		return err
	}
	cn := linksOf("credit-notes", "", v.CreditNoteID)
	return c.JSON(http.StatusOK, voidedJSON{Voided: v, CreditNote: &cn, Regenerated: linksOf("invoices", "invoices", v.RegeneratedID)})
}

func (s *Server) apiVoidStatement(c echo.Context) error {
	var in voidBody
	if err := core.DecodeJSON(c, &in); err != nil {
		return err
	}
	if in.PONumber != nil {
		return core.FieldError("po_number", "A statement has no PO number.")
	}
	v, err := s.invoicing.VoidStatement(c.Request().Context(), voidInput(c, in.Reason, in.Note, nil))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, voidedJSON{Voided: v, Regenerated: linksOf("statements", "statements", v.RegeneratedID)})
}

// paidBody records a payment: its reference, optional. The body itself may be left out.
type paidBody struct {
	Reference string `json:"reference"`
}

func readPaid(c echo.Context) (paidBody, error) {
	var in paidBody
	if c.Request().ContentLength == 0 {
		return in, nil
	}
	return in, core.DecodeJSON(c, &in)
}

func (s *Server) apiInvoicePaid(c echo.Context) error {
	in, err := readPaid(c)
	if err != nil {
		return err
	}
	if err := s.invoicing.MarkInvoicePaid(c.Request().Context(), core.UserID(c), c.Param("id"), in.Reference); err != nil {
		return err
	}
	return s.apiFinanceInvoice(c)
}

func (s *Server) apiStatementPaid(c echo.Context) error {
	in, err := readPaid(c)
	if err != nil {
		return err
	}
	if err := s.invoicing.MarkStatementPaid(c.Request().Context(), core.UserID(c), c.Param("id"), in.Reference); err != nil {
		return err
	}
	return s.apiFinanceStatement(c)
}
