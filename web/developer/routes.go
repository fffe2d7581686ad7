// Package developer is a customer's own pages and API: buying credits and the balance (/credits,
// /api/credits, /api/balance, and Stripe's webhook that completes a purchase), auto top-up
// (/credits/card, /credits/auto-topup, /api/credits/auto-topup), the usage and what it cost
// (/usage, /api/usage), the batch page (/batches), the savings and carbon reports (/reports,
// /api/reports), and the invoices and credit notes (/invoices, /api/invoices). Every call reads
// and changes the caller's own account only. The API keys and the budgets (/keys, /budgets) are
// package web/developer/keys.
//
// It imports web/internal/core and the services, never another audience's package nor web.
package developer

import (
	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/batch"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// Config is what a customer's pages need beside the core's accounts and payments.
type Config struct {
	Catalog *catalog.Service
	// Usage is what requests cost.
	Usage *metering.Reports
	// Batches are the Batch API's files and batches; nil answers 503.
	Batches *batch.Service
	// Reports are each customer's savings and carbon; nil answers that they are unavailable.
	Reports ReportSource
	// Invoicing gives a customer's invoices and credit notes; nil answers that they are
	// unavailable.
	Invoicing *invoicing.Service
}

// Server serves a customer's pages and API.
type Server struct {
	*core.Core
	echo      *echo.Echo
	catalog   *catalog.Service
	usage     *metering.Reports
	batches   *batch.Service
	reports   ReportSource
	invoicing *invoicing.Service
}

// New builds a customer's handlers over the shared core.
func New(c *core.Core, cfg Config) *Server {
	return &Server{Core: c, catalog: cfg.Catalog, usage: cfg.Usage, batches: cfg.Batches, reports: cfg.Reports,
		invoicing: cfg.Invoicing}
}

// Routes registers a customer's pages and API on e.
func (s *Server) Routes(e *echo.Echo) {
	s.echo = e
	m := s.Mount(e)
	m.Guarded("/credits")
	m.GET("/credits", s.creditsPage)
	m.POST("/credits/checkout", s.checkoutSubmit)
	m.GET("/credits/return", s.purchaseReturnPage)
	m.GET("/credits/test-pay/:id", s.testPaymentPage)
	m.POST("/credits/test-pay/:id", s.testPaymentSubmit)
	// Auto top-up (topup.go): the saved card and the settings.
	m.POST("/credits/auto-topup", s.topupSubmit)
	m.POST("/credits/card", s.saveCardSubmit)
	m.POST("/credits/card/remove", s.removeCardSubmit)
	m.GET("/credits/test-card", s.testSaveCardPage)
	m.POST("/credits/test-card", s.testSaveCardSubmit)
	// Stripe's word that a purchase is paid: it proves itself by its signature, not a session.
	m.POST("/webhooks/stripe", s.stripeWebhook)
	m.POST("/api/credits/checkout", s.apiCheckout)
	m.GET("/api/credits/purchases/:id", s.apiPurchase)
	m.GET("/api/credits/history", s.apiHistory)
	m.GET("/api/credits/auto-topup", s.apiTopup)
	m.PUT("/api/credits/auto-topup", s.apiPutTopup)
	m.POST("/api/credits/card", s.apiSaveCard)
	m.DELETE("/api/credits/card", s.apiRemoveCard)
	m.GET("/api/balance", s.apiBalance)

	// A developer's requests and what they cost.
	m.GET("/usage", s.usagePage)
	m.GET("/usage.csv", s.usageCSV)
	m.GET("/api/usage", s.apiUsage)
	m.GET("/api/usage.csv", s.usageCSV)

	// The Batch API's page (batches_page.go).
	m.GET("/batches", s.batchesPage)
	m.POST("/batches", s.createBatchSubmit)
	m.POST("/batches/:id/cancel", s.cancelBatchSubmit)
	m.GET("/batches/files/:id", s.batchFileDownload)
	m.GET("/batches/:id", s.batchPage)
	m.GET("/batches/:id/progress", s.batchProgress)

	// The reports: the dashboard and its figures as CSV and JSON.
	m.GET("/reports", s.reportsPage, s.needsReports)
	m.GET("/reports/savings.csv", s.savingsCSV, s.needsReports)
	m.GET("/reports/carbon.csv", s.carbonCSV, s.needsReports)
	m.GET("/api/reports/savings", s.apiSavings)
	m.GET("/api/reports/carbon", s.apiCarbon)

	// Invoices and credit notes (invoices.go); their documents are web/finance's.
	m.GET("/invoices", s.invoicesPage)
	m.GET("/api/invoices", s.apiInvoices)
	m.GET("/api/invoices/:id", s.apiInvoice)
}
