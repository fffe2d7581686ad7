package finance

import (
	"bytes"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/charts"
	"github.com/gpumarket/gpumarket/services/documents"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// documentLinks are the toolbar links of a document's page; "" leaves one out.
type documentLinks struct {
	Back, PDF, CSV string
}

// documentPage fills a document's print-ready page from its sheet, the layout the PDF is
// drawn from, so that the page and the PDF show the same figures. A handler makes the sheet
// with documents.Document.Sheet, which refuses a document that does not add up.
func documentPage(s documents.Sheet, links documentLinks) (templates.DocumentPage, error) {
	p := templates.DocumentPage{
		Title: s.Title, Number: s.Number, Status: s.Status, Marker: s.Marker,
		Facts:   documentFacts(s.Facts),
		Seller:  documentParty(s.Seller),
		Buyer:   documentParty(s.Buyer),
		Columns: s.Columns,
		Notes:   s.Notes,
		Summary: documentFacts(s.Summary),
		Footer:  s.Footer,
		BackURL: links.Back, PDFURL: links.PDF, CSVURL: links.CSV,
	}
	for _, l := range s.Lines {
		p.Lines = append(p.Lines, templates.DocumentLine{
			Description: l.Description, Detail: l.Detail,
			InputTokens: l.InputTokens, OutputTokens: l.OutputTokens,
			InputPrice: l.InputPrice, OutputPrice: l.OutputPrice,
			Amount: l.Amount,
		})
	}
	for _, t := range s.Totals {
		p.Totals = append(p.Totals, templates.DocumentTotal{Label: t.Label, Value: t.Value, Strong: t.Strong})
	}
	for i, c := range s.Charts {
		svg, err := charts.Draw(c.Chart, charts.Bars, charts.SVG)
		if err != nil {
			return templates.DocumentPage{}, err
		}
		narrow, err := charts.DrawAt(c.Chart, charts.Bars, charts.SVG, charts.Width/2, charts.Height)
		if err != nil {
			return templates.DocumentPage{}, err
		}
		v := templates.ChartView{ID: "summary-" + strconv.Itoa(i+1), Title: c.Title, SVG: string(svg), NarrowSVG: string(narrow),
			Columns: c.Columns}
		for _, r := range c.Rows {
			v.Rows = append(v.Rows, templates.ChartRow{Label: r.Label, Values: r.Values})
		}
		p.Charts = append(p.Charts, v)
	}
	return p, nil
}

func documentFacts(fs []documents.Figure) []templates.Fact {
	out := make([]templates.Fact, 0, len(fs))
	for _, f := range fs {
		out = append(out, templates.Fact{Label: f.Label, Value: f.Value})
	}
	return out
}

func documentParty(b documents.PartyBlock) templates.DocumentParty {
	return templates.DocumentParty{Label: b.Label, Name: b.Name, Lines: b.Lines}
}

// PDFSuffix sends GET /api/invoices/<id>.pdf to /api/invoices/<id>/pdf before routing. Echo's
// router ends a parameter only at a slash, so "/api/invoices/:id.pdf" would be a parameter
// named "id.pdf" on the same route as /api/invoices/:id, the invoice's JSON; rewritten, the
// PDF is a route of its own.
func PDFSuffix(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if rest, ok := strings.CutPrefix(r.URL.Path, "/api/invoices/"); ok {
			if id, ok := strings.CutSuffix(rest, ".pdf"); ok && id != "" && !strings.Contains(id, "/") {
				r.URL.Path, r.URL.RawPath = "/api/invoices/"+id+"/pdf", ""
			}
		}
		return next(c)
	}
}

// documentLoader returns the document the request names, as the caller may see it, with the
// links of its page's toolbar.
type documentLoader func(c echo.Context) (documents.Document, documentLinks, error)

// readsEverything reports whether the caller reads every account's documents: finance and
// admins.
func readsEverything(c echo.Context) (accounts.Session, bool) {
	sess, _ := core.CurrentSession(c)
	return sess, sess.User.Role == accounts.RoleFinance || sess.User.Role == accounts.RoleAdmin
}

func (s *Server) invoiceDocument(c echo.Context) (documents.Document, documentLinks, error) {
	ctx, id := c.Request().Context(), c.Param("id")
	sess, all := readsEverything(c)
	var inv invoicing.Invoice
	var err error
	links := documentLinks{Back: "/invoices"}
	if all {
		inv, err = s.invoicing.Invoice(ctx, id)
		links.Back = "/finance/invoices/" + url.PathEscape(id)
	} else {
		inv, err = s.invoicing.AccountInvoice(ctx, sess.User.AccountID, id)
	}
	if err != nil {
		return documents.Document{}, documentLinks{}, err
	}
	doc, err := invoicing.InvoiceDocument(inv)
	links.PDF, links.CSV = "/invoices/"+url.PathEscape(inv.ID)+"/pdf", "/invoices/"+url.PathEscape(inv.ID)+"/csv"
	return doc, links, err
}

func (s *Server) creditNoteDocument(c echo.Context) (documents.Document, documentLinks, error) {
	ctx, id := c.Request().Context(), c.Param("id")
	sess, all := readsEverything(c)
	var cn invoicing.CreditNote
	var err error
	if all {
		cn, err = s.invoicing.CreditNote(ctx, id)
	} else {
		cn, err = s.invoicing.AccountCreditNote(ctx, sess.User.AccountID, id)
	}
	if err != nil {
		return documents.Document{}, documentLinks{}, err
	}
	links := documentLinks{Back: "/invoices", PDF: "/credit-notes/" + url.PathEscape(cn.ID) + "/pdf",
		CSV: "/credit-notes/" + url.PathEscape(cn.ID) + "/csv"}
	if all {
		links.Back = "/finance/invoices/" + url.PathEscape(cn.InvoiceID)
	}
	doc, err := invoicing.CreditNoteDocument(cn)
	return doc, links, err
}

func (s *Server) statementDocument(c echo.Context) (documents.Document, documentLinks, error) {
	ctx, id := c.Request().Context(), c.Param("id")
	sess, all := readsEverything(c)
	var st invoicing.Statement
	var err error
	links := documentLinks{Back: "/provider/statements"}
	if all {
		st, err = s.invoicing.Statement(ctx, id)
		links.Back = "/finance/statements/" + url.PathEscape(id)
	} else {
		st, err = s.invoicing.ProviderStatement(ctx, sess.User.AccountID, id)
	}
	if err != nil {
		return documents.Document{}, documentLinks{}, err
	}
	links.PDF, links.CSV = "/statements/"+url.PathEscape(st.ID)+"/pdf", "/statements/"+url.PathEscape(st.ID)+"/csv"
	doc, err := invoicing.StatementDocument(st)
	return doc, links, err
}

// documentPageHandler answers with the document's print-ready page.
func (s *Server) documentPageHandler(load documentLoader) echo.HandlerFunc {
	return func(c echo.Context) error {
		doc, links, err := load(c)
		if err != nil {
			return err
		}
		sheet, err := doc.Sheet()
		if err != nil {
			return err
		}
		page, err := documentPage(sheet, links)
		if err != nil {
			return err
		}
		c.Response().Header().Set("Cache-Control", "no-store")
		return s.Render(c, http.StatusOK, templates.Document(page))
	}
}

// documentPDF answers with the document's PDF as an attachment named by its number (a draft:
// DRAFT-<period>). It is rendered whole before anything is sent, so a failure is a proper
// error.
func (s *Server) documentPDF(load documentLoader) echo.HandlerFunc {
	return func(c echo.Context) error {
		doc, _, err := load(c)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		if err := documents.PDF(&buf, doc); err != nil {
			return err
		}
		h := c.Response().Header()
		h.Set(echo.HeaderContentDisposition, attachment(documents.FileName(doc)+".pdf"))
		h.Set("Cache-Control", "no-store")
		return c.Blob(http.StatusOK, "application/pdf", buf.Bytes())
	}
}

// documentCSV answers with the CSV of the document's lines as an attachment.
func (s *Server) documentCSV(load documentLoader) echo.HandlerFunc {
	return func(c echo.Context) error {
		doc, _, err := load(c)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		if err := documents.LinesCSV(&buf, doc); err != nil {
			return err
		}
		h := c.Response().Header()
		h.Set(echo.HeaderContentDisposition, attachment(documents.FileName(doc)+".csv"))
		h.Set("Cache-Control", "no-store")
		return c.Blob(http.StatusOK, "text/csv; charset=utf-8", buf.Bytes())
	}
}

// attachment is a Content-Disposition that saves the response as the file name.
func attachment(name string) string {
	return mime.FormatMediaType("attachment", map[string]string{"filename": name})
}
