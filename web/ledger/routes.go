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
	m := s.Mount(e)
	m.Guarded("/finance")
	m.GET("/finance/balances", s.balancesPage)
	m.POST("/finance/adjustments", s.adjustmentSubmit)
	m.GET("/finance/prices", s.pricesPage)
	m.POST("/finance/prices", s.priceSubmit)
	m.GET("/finance/stripe-events", s.stripeEventsPage)
	m.GET("/finance/usage-rejections", s.rejectionsPage)

	m.Guarded("/api/finance")
	m.GET("/api/finance/balances", s.apiFinanceBalances)
	m.GET("/api/finance/usage-rejections", s.apiRejections)
	m.POST("/api/finance/adjustments", s.apiAdjust)
	m.GET("/api/finance/prices", s.apiFinancePrices)
	m.POST("/api/finance/prices", s.apiSchedulePrice)

	// Every provider's payouts. Retrying a failed one asks for its confirmation first.
	m.GET("/finance/payouts", s.financePayoutsPage)
	m.GET("/finance/payouts/progress", s.payoutRunProgress)
	m.GET("/finance/payouts/:id/retry", s.retryPayoutSubmit)
	m.POST("/finance/payouts/:id/retry", s.retryPayoutSubmit)
	m.GET("/api/finance/payouts", s.apiFinancePayouts)
	m.POST("/api/finance/payouts/:id/retry", s.apiRetryPayout)
}
