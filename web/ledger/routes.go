// Package ledger is finance's desk for the money itself: every account's balance and the
// adjustments finance posts to it, the price book and its scheduled changes, the events Stripe
// sent, the usage events the meter refused, and every provider's payouts with the retry of a
// failed one. Its routes are under /finance and /api/finance (balances, adjustments, prices,
// stripe-events, usage-rejections, payouts), for the finance and admin roles.
//
// It imports web/internal/core and the services, never another audience's package nor web.
package ledger

import (
	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// Config is what finance's ledger pages need beside the core's accounts and payments.
type Config struct {
	Catalog *catalog.Service
	// Usage gives the usage events the meter refused.
	Usage *metering.Reports
}

// Server serves finance's ledger pages and API.
type Server struct {
	*core.Core
	catalog *catalog.Service
	usage   *metering.Reports
}

// New builds finance's ledger handlers over the shared core.
func New(c *core.Core, cfg Config) *Server {
	return &Server{Core: c, catalog: cfg.Catalog, usage: cfg.Usage}
}

// Routes registers finance's ledger pages and API on e.
func (s *Server) Routes(e *echo.Echo) {
	page := s.RequirePage(accounts.RoleFinance, accounts.RoleAdmin)
	finance := e.Group("/finance", page)
	finance.GET("/balances", s.balancesPage)
	finance.POST("/adjustments", s.adjustmentSubmit)
	finance.GET("/prices", s.pricesPage)
	finance.POST("/prices", s.priceSubmit)
	finance.GET("/stripe-events", s.stripeEventsPage)
	finance.GET("/usage-rejections", s.rejectionsPage)

	api := e.Group("/api/finance", s.RequireAPI(accounts.RoleFinance, accounts.RoleAdmin))
	api.GET("/balances", s.apiFinanceBalances)
	api.GET("/usage-rejections", s.apiRejections)
	api.POST("/adjustments", s.apiAdjust)
	api.GET("/prices", s.apiFinancePrices)
	api.POST("/prices", s.apiSchedulePrice)

	// Every provider's payouts. Retrying a failed one asks for its confirmation first.
	e.GET("/finance/payouts", s.financePayoutsPage, page)
	e.GET("/finance/payouts/:id/retry", s.retryPayoutSubmit, page)
	e.POST("/finance/payouts/:id/retry", s.retryPayoutSubmit, page)
	e.GET("/api/finance/payouts", s.apiFinancePayouts, s.RequireAPI(accounts.RoleFinance, accounts.RoleAdmin))
	e.POST("/api/finance/payouts/:id/retry", s.apiRetryPayout, s.RequireAPI(accounts.RoleFinance, accounts.RoleAdmin))
}
