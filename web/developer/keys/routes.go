// Package keys is a customer's API keys for the /v1 gateway and the limits on what they spend:
// the keys, each with its limit, period, default tier and routing order (/keys, /api/keys), and
// the budgets page and API (/budgets, /api/budgets): the limit per person on the keys they
// created, the account's monthly budget, the alerts and who is e-mailed them (docs/budgets.md).
// Revoking a key or changing its limit tells every gateway (KeyChanges). Every call reads and
// changes the caller's own account only.
//
// It imports web/internal/core and the services, never another audience's package nor web.
package keys

import (
	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/budgets"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// Config is what a customer's keys and budgets need beside the core's accounts.
type Config struct {
	// Router gives the models on offer, for the examples beside a new API key; nil where no
	// gateway runs here.
	Router core.Router
	// KeyChanges tells every gateway that an API key was revoked or its limit changed; nil tells
	// none (keychanges.go).
	KeyChanges KeyChanges
	// Budgets are the member limits, the account's budget and each key's spend in its period.
	Budgets *budgets.Service
}

// Server serves a customer's keys and budgets.
type Server struct {
	*core.Core
	router     core.Router
	keyChanges KeyChanges
	budgets    *budgets.Service
}

// New builds the keys' and budgets' handlers over the shared core.
func New(c *core.Core, cfg Config) *Server {
	return &Server{Core: c, router: cfg.Router, keyChanges: cfg.KeyChanges, budgets: cfg.Budgets}
}

// Routes registers the keys' and budgets' pages and API on e.
func (s *Server) Routes(e *echo.Echo) {
	m := s.Mount(e)
	// API keys for the /v1 gateway (package web/gateway). The secret is in the answer that
	// creates a key and nowhere else. Revoking a key or changing its limit tells every gateway
	// (keychanges.go).
	m.GET("/keys", s.keysPage)
	m.POST("/keys", s.createKeySubmit)
	m.GET("/keys/:id/revoke", s.revokeKeySubmit)
	m.POST("/keys/:id/revoke", s.revokeKeySubmit)
	m.POST("/keys/:id/limit", s.keyLimitSubmit)
	m.GET("/api/keys", s.apiKeys)
	m.POST("/api/keys", s.apiCreateKey)
	m.DELETE("/api/keys/:id", s.apiRevokeKey)
	m.PATCH("/api/keys/:id", s.apiUpdateKey)

	// Limits per person, the account's budget and the balance alert (budgets.go).
	m.GET("/budgets", s.budgetsPage, s.needsBudgets)
	m.POST("/budgets/members", s.memberLimitSubmit, s.needsBudgets)
	m.POST("/budgets/account", s.accountBudgetSubmit, s.needsBudgets)
	m.POST("/budgets/alerts", s.creditLowSubmit, s.needsBudgets)
	m.POST("/budgets/subscriptions", s.subscriptionsSubmit, s.needsBudgets)
	m.GET("/api/budgets", s.apiBudgets, s.needsBudgets)
	m.PUT("/api/budgets/members/:id", s.apiSetMemberLimit, s.needsBudgets)
	m.PUT("/api/budgets/account", s.apiSetAccountBudget, s.needsBudgets)
	m.GET("/api/budgets/alerts", s.apiAlerts, s.needsBudgets)
	m.PUT("/api/budgets/alerts", s.apiSetAlerts, s.needsBudgets)
	m.PUT("/api/budgets/subscriptions", s.apiSetSubscriptions, s.needsBudgets)
}
