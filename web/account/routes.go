// Package account is what every account holder does with its own account: signing up, logging
// in and out (the pages and /api/auth), setting a new password and proving its e-mail address by
// the links e-mailed to it, who it is (/api/me), and the billing details a customer's
// invoices and a provider's statements carry (/settings/billing, /api/settings/billing).
//
// It imports web/internal/core and the services, never another audience's package nor web.
package account

import (
	"github.com/labstack/echo/v4"

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
	m := s.Mount(e)
	m.GET("/login", s.loginPage)
	m.POST("/login", s.loginSubmit)
	m.GET("/signup", s.signupPage)
	m.POST("/signup", s.signupSubmit)
	m.POST("/logout", s.logoutSubmit)
	m.GET("/forgot-password", s.forgotPage)
	m.POST("/forgot-password", s.forgotSubmit)
	m.GET("/reset-password", s.resetPage)
	m.POST("/reset-password", s.resetSubmit)
	m.GET("/verify-email", s.verifyEmail)
	m.POST("/verify-email/resend", s.verifyResend)

	m.POST("/api/auth/signup", s.apiSignup)
	m.POST("/api/auth/login", s.apiLogin)
	m.POST("/api/auth/logout", s.apiLogout)
	m.GET("/api/me", s.apiMe)

	// Billing details: a customer's for its invoices, a provider's for its statements.
	m.GET("/settings/billing", s.billingDetailsPage)
	m.POST("/settings/billing", s.billingDetailsSubmit)
	m.GET("/api/settings/billing", s.apiBillingDetails)
	m.PUT("/api/settings/billing", s.apiSetBillingDetails)
}
