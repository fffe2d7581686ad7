package developer

import (
	"cmp"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// A customer's own invoices and credit notes. Every call reads the caller's account only, and
// never a draft: another account's document, or a draft, does not exist for the caller (404). The
// documents themselves (the print-ready page, the PDF, the CSV) are served at the paths
// core.DocumentURLs names.

// customerInvoice is an invoice in a customer's list, with where to read it.
type customerInvoice struct {
	invoicing.InvoiceSummary
	Links core.DocumentURLs `json:"links"`
}

// customerCreditNote is a credit note in a customer's list, with where to read it.
type customerCreditNote struct {
	invoicing.CreditNoteSummary
	Links core.DocumentURLs `json:"links"`
}

// customerDocuments reads the caller's invoices and credit notes.
func (s *Server) customerDocuments(c echo.Context) ([]customerInvoice, []customerCreditNote, error) {
	inv, err := core.InvoicingService(s.invoicing)
	if err != nil {
		return nil, nil, err
	}
	sess, _ := core.CurrentSession(c)
	ctx, account := c.Request().Context(), sess.User.AccountID
	list, err := inv.AccountInvoices(ctx, account)
	if err != nil {
		return nil, nil, err
	}
	notes, err := inv.AccountCreditNotes(ctx, account)
	if err != nil {
		return nil, nil, err
	}
	invoices := make([]customerInvoice, len(list))
	for i, v := range list {
		invoices[i] = customerInvoice{InvoiceSummary: v, Links: core.InvoiceURLs(v.ID)}
	}
	credits := make([]customerCreditNote, len(notes))
	for i, n := range notes {
		credits[i] = customerCreditNote{CreditNoteSummary: n, Links: core.CreditNoteURLs(n.ID)}
	}
	return invoices, credits, nil
}

func (s *Server) invoicesPage(c echo.Context) error {
	invoices, credits, err := s.customerDocuments(c)
	if err != nil {
		return err
	}
	numbers := map[string]string{}
	for _, v := range invoices {
		numbers[v.ID] = v.DisplayNumber
	}
	type dated struct {
		row    templates.CustomerDocumentRow
		period invoicing.Period
		issued string
	}
	var rows []dated
	for _, v := range invoices {
		r := templates.CustomerDocumentRow{Kind: "invoice", KindLabel: "Invoice", ID: v.ID, Number: v.DisplayNumber,
			Period: v.Period.Label(), Issued: core.DateOf(v.IssuedAt), Total: core.SignedCents(v.Total), AmountDue: core.SignedCents(v.AmountDue),
			Status: string(v.Status), URL: v.Links.Page, PDFURL: v.Links.PDF, CSVURL: v.Links.CSV}
		if n := numbers[v.ReplacesInvoiceID]; n != "" {
			r.Note = "replaces " + n
		}
		rows = append(rows, dated{row: r, period: v.Period, issued: timeKey(v.IssuedAt)})
	}
	for _, n := range credits {
		r := templates.CustomerDocumentRow{Kind: "credit_note", KindLabel: "Credit note", ID: n.ID, Number: n.Number,
			Period: n.Period.Label(), Issued: core.DateOf(&n.IssuedAt), Total: core.SignedCents(-n.Amount),
			Status: "issued", Note: "cancels " + n.InvoiceNumber + ": " + strings.ToLower(n.Reason.Text()),
			URL: n.Links.Page, PDFURL: n.Links.PDF, CSVURL: n.Links.CSV}
		rows = append(rows, dated{row: r, period: n.Period, issued: timeKey(&n.IssuedAt)})
	}
	// Newest first: by period, then by the moment of issue.
	slices.SortStableFunc(rows, func(a, b dated) int {
		if c := b.period.Start().Compare(a.period.Start()); c != 0 {
			return c
		}
		return cmp.Compare(b.issued, a.issued)
	})
	p := templates.CustomerInvoicesPage{Page: s.Page(c, "Invoices")}
	for _, r := range rows {
		p.Documents = append(p.Documents, r.row)
	}
	return s.Render(c, http.StatusOK, templates.CustomerInvoices(p))
}

func (s *Server) apiInvoices(c echo.Context) error {
	invoices, credits, err := s.customerDocuments(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"invoices": invoices, "credit_notes": credits, "count": len(invoices)})
}

// customerInvoiceDetail is a customer's invoice with its lines, and where to read it.
type customerInvoiceDetail struct {
	invoicing.Invoice
	Links core.DocumentURLs `json:"links"`
}

// apiInvoice answers with one of the caller's invoices. GET /api/invoices/{id}.pdf, its PDF, is
// rewritten before routing to the document routes (web/finance), and never reaches here.
func (s *Server) apiInvoice(c echo.Context) error {
	inv, err := core.InvoicingService(s.invoicing)
	if err != nil {
		return err
	}
	sess, _ := core.CurrentSession(c)
	v, err := inv.AccountInvoice(c.Request().Context(), sess.User.AccountID, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, customerInvoiceDetail{Invoice: v, Links: core.InvoiceURLs(v.ID)})
}

// timeKey is a moment as text that sorts as the moments do.
func timeKey(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000000")
}
