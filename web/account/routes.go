// Package account is what every account holder does with its own account: signing up, logging
// in and out (the pages and /api/auth), who it is (/api/me), and the billing details a customer's
// invoices and a provider's statements carry (/settings/billing, /api/settings/billing).
//
// It imports web/internal/core and the services, never another audience's package nor web.
package account

import (
	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// Config is what the account pages need beside the core's accounts.
type Config struct {
	// Invoicing keeps the billing details; nil answers that they are unavailable.
	Invoicing *invoicing.Service
}

// Server serves the account pages and API.
type Server struct {
	*core.Core
	invoicing *invoicing.Service
}

// New builds the account handlers over the shared core.
func New(c *core.Core, cfg Config) *Server {
	return &Server{Core: c, invoicing: cfg.Invoicing}
}

// Routes registers the account pages and API on e.
func (s *Server) Routes(e *echo.Echo) {
	e.GET("/login", s.loginPage)
	e.POST("/login", s.loginSubmit)
	e.GET("/signup", s.signupPage)
	e.POST("/signup", s.signupSubmit)
	e.POST("/logout", s.logoutSubmit, s.RequirePage())

	api := e.Group("/api")
	api.POST("/auth/signup", s.apiSignup)
	api.POST("/auth/login", s.apiLogin)
	api.POST("/auth/logout", s.apiLogout, s.RequireAPI())
	api.GET("/me", s.apiMe, s.RequireAPI())

	// Billing details: a customer's for its invoices, a provider's for its statements.
	billedPage := s.RequirePage(accounts.RoleDeveloper, accounts.RoleProvider)
	billedAPI := s.RequireAPI(accounts.RoleDeveloper, accounts.RoleProvider)
	e.GET("/settings/billing", s.billingDetailsPage, billedPage)
	e.POST("/settings/billing", s.billingDetailsSubmit, billedPage)
	e.GET("/api/settings/billing", s.apiBillingDetails, billedAPI)
	e.PUT("/api/settings/billing", s.apiSetBillingDetails, billedAPI)
}
