package core

import (
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/invoicing"
)

// InvoicingService is the invoicing service, or an unavailable error where this server has none.
func InvoicingService(inv *invoicing.Service) (*invoicing.Service, error) {
	if inv == nil {
		return nil, services.Errorf(services.CodeUnavailable, "Invoices are not available on this server.")
	}
	return inv, nil
}

// DocumentURLs are where a document is read: its print-ready page, its PDF and its CSV.
type DocumentURLs struct {
	Page string `json:"page"`
	PDF  string `json:"pdf"`
	CSV  string `json:"csv"`
}

// DocumentURLsAt are the addresses of the document id under base.
func DocumentURLsAt(base, id string) DocumentURLs {
	page := base + id
	return DocumentURLs{Page: page, PDF: page + "/pdf", CSV: page + "/csv"}
}

// InvoiceURLs are where an invoice is read.
func InvoiceURLs(id string) DocumentURLs { return DocumentURLsAt("/invoices/", id) }

// CreditNoteURLs are where a credit note is read.
func CreditNoteURLs(id string) DocumentURLs { return DocumentURLsAt("/credit-notes/", id) }

// StatementURLs are where a statement is read.
func StatementURLs(id string) DocumentURLs { return DocumentURLsAt("/statements/", id) }

// SignedCents writes a document's amount: "$1234.56", "-$0.05".
func SignedCents(c invoicing.Cents) string {
	if c < 0 {
		return "-" + CentsText(-int64(c))
	}
	return CentsText(int64(c))
}

// DateOf writes a moment's date in UTC, "" for none.
func DateOf(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format("2006-01-02")
}
