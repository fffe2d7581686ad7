// Package account is what every account holder does with its own account: signing up, logging
// in and out (the pages and /api/auth), setting a new password and proving its e-mail address by
// the links e-mailed to it, who it is (/api/me), the billing details a customer's invoices and a
// provider's statements carry (/settings/billing, /api/settings/billing), the user's own time zone
// (/settings/profile), its members and invitations (/account/members, /api/account/members,
// /api/account/invitations, /invitations/), and switching between the accounts a login belongs to
// (/account/switch).
//
// It imports web/internal/core and the services, never another audience's package nor web.
package account

import (
	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/services/webhooks"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// Config is what the account pages need beside the core's accounts.
type Config struct {
	// Invoicing keeps the billing details; nil answers that they are unavailable.
	Invoicing *invoicing.Service
	// Webhooks keeps the accounts' webhook endpoints and their log; nil, or without its key,
	// answers that webhooks are unavailable.
	Webhooks *webhooks.Service
	// KeyChanges tells every gateway that a removed member's API keys are revoked; nil tells none.
	KeyChanges KeyChanges
}

// Server serves the account pages and API.
type Server struct {
	*core.Core
	invoicing  *invoicing.Service
	webhooks   *webhooks.Service
	keyChanges KeyChanges
}

// New builds the account handlers over the shared core.
func New(c *core.Core, cfg Config) *Server {
	return &Server{Core: c, invoicing: cfg.Invoicing, webhooks: cfg.Webhooks, keyChanges: cfg.KeyChanges}
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

	// The user's own settings: the time zone the pages write moments in.
	m.GET("/settings/profile", s.profilePage)
	m.POST("/settings/profile", s.profileSubmit)

	// Billing details: a customer's for its invoices, a provider's for its statements.
	m.GET("/settings/billing", s.billingDetailsPage)
	m.POST("/settings/billing", s.billingDetailsSubmit)
	m.GET("/api/settings/billing", s.apiBillingDetails)
	m.PUT("/api/settings/billing", s.apiSetBillingDetails)

	// Webhooks: the account's endpoints, a test event, the deliveries' log and replay.
	m.GET("/settings/webhooks", s.webhooksPage)
	m.POST("/settings/webhooks", s.createWebhookSubmit)
	m.POST("/settings/webhooks/:id/enable", s.enableWebhookSubmit)
	m.POST("/settings/webhooks/:id/disable", s.disableWebhookSubmit)
	m.POST("/settings/webhooks/:id/delete", s.deleteWebhookSubmit)
	m.POST("/settings/webhooks/:id/test", s.testWebhookSubmit)
	m.POST("/settings/webhooks/deliveries/:id/replay", s.replayWebhookSubmit)
	m.GET("/api/webhooks", s.apiWebhooks)
	m.POST("/api/webhooks", s.apiCreateWebhook)
	m.PATCH("/api/webhooks/:id", s.apiUpdateWebhook)
	m.DELETE("/api/webhooks/:id", s.apiDeleteWebhook)
	m.POST("/api/webhooks/:id/test", s.apiTestWebhook)
	m.GET("/api/webhooks/deliveries", s.apiWebhookDeliveries)
	m.GET("/api/webhooks/deliveries/:id", s.apiWebhookDelivery)
	m.POST("/api/webhooks/deliveries/:id/replay", s.apiReplayWebhook)

	// The account's members and invitations (members.go, docs/members.md), switching between the
	// login's accounts, and the link an invitation's e-mail holds.
	m.GET("/account/members", s.membersPage)
	m.POST("/account/members/invite", s.inviteSubmit)
	m.POST("/account/members/invitations/:id/revoke", s.revokeInvitationSubmit)
	m.POST("/account/members/:id/role", s.memberRoleSubmit)
	m.GET("/account/members/:id/remove", s.removeMemberPage)
	m.POST("/account/members/:id/remove", s.removeMemberSubmit)
	m.GET("/api/account/members", s.apiMembers)
	m.PATCH("/api/account/members/:id", s.apiSetMemberRole)
	m.DELETE("/api/account/members/:id", s.apiRemoveMember)
	m.GET("/api/account/invitations", s.apiInvitations)
	m.POST("/api/account/invitations", s.apiInvite)
	m.DELETE("/api/account/invitations/:id", s.apiRevokeInvitation)
	m.POST("/account/switch", s.switchSubmit)
	m.POST("/api/account/switch", s.apiSwitch)
	m.GET("/invitations", s.invitationPage)
	m.POST("/invitations", s.invitationSubmit)
}
