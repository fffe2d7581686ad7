// Package finance is finance's review of what the platform bills and pays, and the documents
// that come of it: the month's close, the queues of draft invoices and statements with their
// approval, voiding and payment (each confirmed before it moves money), the audit log and the
// ledger's journal, the flagged requests and their resolution (under /finance and /api/finance,
// for the finance and admin roles), and every invoice, credit note and statement as its
// print-ready page, PDF and CSV for whoever may see it: finance and admins every one, a customer
// its own invoices and credit notes, a provider its own statements (/invoices/:id,
// /credit-notes/:id, /statements/:id, /api/invoices/:id/pdf).
//
// It imports web/internal/core and the services, never another audience's package nor web.
package finance

import (
	"context"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// Config is what finance's review needs beside the core.
type Config struct {
	// Invoicing is the close, the invoices, statements and credit notes, and their documents;
	// Audit the finance audit log; Journal writes a month's ledger postings as CSV. Without
	// Invoicing or Audit these pages answer that they are unavailable.
	Invoicing *invoicing.Service
	Audit     *audit.Log
	Journal   Journal
}

// Server serves finance's review and the documents.
type Server struct {
	*core.Core
	invoicing *invoicing.Service
	audit     *audit.Log
	journal   Journal
	// closes are the month closes started from a page or the API that outlive their request
	// (close.go); background ends them when the server closes.
	closes     sync.WaitGroup
	background context.Context
	stop       context.CancelFunc
}

// New builds finance's handlers over the shared core.
func New(c *core.Core, cfg Config) *Server {
	s := &Server{Core: c, invoicing: cfg.Invoicing, audit: cfg.Audit, journal: cfg.Journal}
	s.background, s.stop = context.WithCancel(context.Background())
	return s
}

// Close ends the month closes still running that requests started and waits for them: a close
// cut off so reads as failed and is completed by closing again (docs/invoicing.md). Calling it
// again does nothing more.
func (s *Server) Close() {
	s.stop()
	s.closes.Wait()
}

// Routes registers finance's pages and API and the documents' on e.
func (s *Server) Routes(e *echo.Echo) {
	// Documents' routes: each invoice, credit note and statement as its print-ready page, its PDF
	// and the CSV of its lines, for whoever may see it (see docs/invoicing.md, "Pages and API"):
	// finance and admins every document, drafts included; a developer only its own account's
	// invoices and credit notes, never a draft; a provider only its own statements, never a
	// draft. Any other is not found, as if it did not exist.
	m := s.Mount(e)
	for _, d := range []struct {
		path string
		load documentLoader
	}{
		{"/invoices/:id", s.invoiceDocument},
		{"/credit-notes/:id", s.creditNoteDocument},
		{"/statements/:id", s.statementDocument},
	} {
		m.GET(d.path, s.documentPageHandler(d.load), s.needsInvoicing)
		m.GET(d.path+"/pdf", s.documentPDF(d.load), s.needsInvoicing)
		m.GET(d.path+"/csv", s.documentCSV(d.load), s.needsInvoicing)
	}
	// GET /api/invoices/<id>.pdf arrives here by PDFSuffix.
	m.GET("/api/invoices/:id/pdf", s.documentPDF(s.invoiceDocument), s.needsInvoicing)

	// The review, the close, the audit log and the journal.
	m.GET("/finance/invoices", s.invoiceQueuePage, s.needsInvoicing)
	m.GET("/finance/invoices/:id", s.invoiceReviewPage, s.needsInvoicing)
	m.GET("/finance/statements", s.statementQueuePage, s.needsInvoicing)
	m.GET("/finance/statements/:id", s.statementReviewPage, s.needsInvoicing)
	// The actions that move money or cannot be undone: the GET, and any POST without its
	// confirmation, shows what the action would do; only the confirmed POST acts (core.Confirmation).
	for path, h := range map[string]echo.HandlerFunc{
		"/finance/invoices/approve": s.approveInvoicesSubmit, "/finance/invoices/:id/approve": s.approveInvoiceSubmit,
		"/finance/invoices/:id/void": s.voidInvoiceSubmit, "/finance/invoices/:id/paid": s.invoicePaidSubmit,
		"/finance/statements/approve": s.approveStatementsSubmit, "/finance/statements/:id/approve": s.approveStatementSubmit,
		"/finance/statements/:id/void": s.voidStatementSubmit, "/finance/statements/:id/paid": s.statementPaidSubmit,
	} {
		m.GET(path, h, s.needsInvoicing)
		m.POST(path, h, s.needsInvoicing)
	}
	m.GET("/finance/close", s.closePage, s.needsInvoicing)
	m.POST("/finance/close", s.closeSubmit, s.needsInvoicing)
	m.GET("/finance/close/progress", s.closeProgress, s.needsInvoicing)
	m.GET("/finance/audit", s.auditPage, s.needsInvoicing)

	m.GET("/api/finance/invoices", s.apiFinanceInvoices, s.needsInvoicing)
	m.POST("/api/finance/invoices/approve", s.apiApproveInvoices, s.needsInvoicing)
	m.GET("/api/finance/invoices/:id", s.apiFinanceInvoice, s.needsInvoicing)
	m.POST("/api/finance/invoices/:id/approve", s.apiApproveInvoice, s.needsInvoicing)
	m.POST("/api/finance/invoices/:id/void", s.apiVoidInvoice, s.needsInvoicing)
	m.POST("/api/finance/invoices/:id/paid", s.apiInvoicePaid, s.needsInvoicing)
	m.GET("/api/finance/credit-notes/:id", s.apiFinanceCreditNote, s.needsInvoicing)
	m.GET("/api/finance/statements", s.apiFinanceStatements, s.needsInvoicing)
	m.POST("/api/finance/statements/approve", s.apiApproveStatements, s.needsInvoicing)
	m.GET("/api/finance/statements/:id", s.apiFinanceStatement, s.needsInvoicing)
	m.POST("/api/finance/statements/:id/approve", s.apiApproveStatement, s.needsInvoicing)
	m.POST("/api/finance/statements/:id/void", s.apiVoidStatement, s.needsInvoicing)
	m.POST("/api/finance/statements/:id/paid", s.apiStatementPaid, s.needsInvoicing)
	m.POST("/api/finance/close", s.apiClose, s.needsInvoicing)
	m.GET("/api/finance/closes", s.apiCloses, s.needsInvoicing)
	m.GET("/api/finance/closes/:period", s.apiCloseProgress, s.needsInvoicing)
	m.GET("/api/finance/audit", s.apiAudit, s.needsInvoicing)
	m.GET("/api/finance/journal.csv", s.journalCSV, s.needsInvoicing)

	// Flagged requests and their resolution (flags.go).
	m.GET("/finance/flags", s.flagsPage, s.needsInvoicing)
	m.POST("/finance/flags/resolve", s.resolveFlagSubmit, s.needsInvoicing)
	m.GET("/api/finance/flags", s.apiFlags, s.needsInvoicing)
	m.POST("/api/finance/flags/resolve", s.apiResolveFlag, s.needsInvoicing)
}
