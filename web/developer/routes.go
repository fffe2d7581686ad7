// Package developer is a customer's own pages and API: buying credits and the balance (/credits,
// /api/credits, /api/balance, and Stripe's webhook that completes a purchase), the API keys for
// the /v1 gateway (/keys, /api/keys), the usage and what it cost (/usage, /api/usage), the batch
// page (/batches), the savings and carbon reports (/reports, /api/reports), and the invoices and
// credit notes (/invoices, /api/invoices). Every call reads and changes the caller's own account
// only.
//
// It imports web/internal/core and the services, never another audience's package nor web.
package developer

import (
	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/accounts"
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
	// Router gives the models on offer, for the examples beside a new API key; nil where no
	// gateway runs here.
	Router core.Router
	// KeyChanges tells every gateway that an API key was revoked or its limit changed; nil tells
	// none (keychanges.go).
	KeyChanges KeyChanges
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
	echo       *echo.Echo
	catalog    *catalog.Service
	usage      *metering.Reports
	router     core.Router
	keyChanges KeyChanges
	batches    *batch.Service
	reports    ReportSource
	invoicing  *invoicing.Service
}

// New builds a customer's handlers over the shared core.
func New(c *core.Core, cfg Config) *Server {
	return &Server{Core: c, catalog: cfg.Catalog, usage: cfg.Usage, router: cfg.Router, keyChanges: cfg.KeyChanges,
		batches: cfg.Batches, reports: cfg.Reports, invoicing: cfg.Invoicing}
}

// Routes registers a customer's pages and API on e.
func (s *Server) Routes(e *echo.Echo) {
	s.echo = e
	page, api := s.RequirePage(accounts.RoleDeveloper), s.RequireAPI(accounts.RoleDeveloper)

	credits := e.Group("/credits", page)
	credits.GET("", s.creditsPage)
	credits.POST("/checkout", s.checkoutSubmit)
	credits.GET("/return", s.purchaseReturnPage)
	credits.GET("/test-pay/:id", s.testPaymentPage)
	credits.POST("/test-pay/:id", s.testPaymentSubmit)
	// Stripe's word that a purchase is paid: it proves itself by its signature, not a session.
	e.POST("/webhooks/stripe", s.stripeWebhook)
	e.POST("/api/credits/checkout", s.apiCheckout, api)
	e.GET("/api/credits/purchases/:id", s.apiPurchase, api)
	e.GET("/api/credits/history", s.apiHistory, api)
	e.GET("/api/balance", s.apiBalance, api)

	// A developer's requests and what they cost.
	e.GET("/usage", s.usagePage, page)
	e.GET("/usage.csv", s.usageCSV, page)
	e.GET("/api/usage", s.apiUsage, api)
	e.GET("/api/usage.csv", s.usageCSV, api)

	// The Batch API's page (batches_page.go).
	e.GET("/batches", s.batchesPage, page)
	e.POST("/batches", s.createBatchSubmit, page)
	e.POST("/batches/:id/cancel", s.cancelBatchSubmit, page)
	e.GET("/batches/files/:id", s.batchFileDownload, page)

	// The reports: the dashboard and its figures as CSV and JSON.
	e.GET("/reports", s.reportsPage, page, s.needsReports)
	e.GET("/reports/savings.csv", s.savingsCSV, page, s.needsReports)
	e.GET("/reports/carbon.csv", s.carbonCSV, page, s.needsReports)
	e.GET("/api/reports/savings", s.apiSavings, api)
	e.GET("/api/reports/carbon", s.apiCarbon, api)

	// API keys for the /v1 gateway (package web/gateway). The secret is in the answer that
	// creates a key and nowhere else. Revoking a key or changing its limit tells every gateway
	// (keychanges.go).
	e.GET("/keys", s.keysPage, page)
	e.POST("/keys", s.createKeySubmit, page)
	e.GET("/keys/:id/revoke", s.revokeKeySubmit, page)
	e.POST("/keys/:id/revoke", s.revokeKeySubmit, page)
	e.POST("/keys/:id/limit", s.keyLimitSubmit, page)
	e.GET("/api/keys", s.apiKeys, api)
	e.POST("/api/keys", s.apiCreateKey, api)
	e.DELETE("/api/keys/:id", s.apiRevokeKey, api)
	e.PATCH("/api/keys/:id", s.apiUpdateKey, api)

	// Invoices and credit notes (invoices.go); their documents are finance's package's.
	e.GET("/invoices", s.invoicesPage, page)
	e.GET("/api/invoices", s.apiInvoices, api)
	e.GET("/api/invoices/:id", s.apiInvoice, api)
}
