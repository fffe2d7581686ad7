// Package provider is a provider's own pages and API: its rigs and their listings (/provider/rigs,
// /api/provider/offerings), what a rig's agent needs to connect, the benchmarks it attaches to its
// listings, its rigs' performance, its earnings, its statements, and its Stripe account and
// payouts (/provider/payouts). Every call reads and changes the caller's own account only.
//
// It imports web/internal/core and the services, never another audience's package nor web.
package provider

import (
	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/benchmarks"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/downloads"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/performance"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// Config is what a provider's pages need beside the core's accounts and payments.
type Config struct {
	Catalog *catalog.Service
	// Rigs gives a provider what its agent needs to connect; nil hides the page.
	Rigs RigCredentials
	// Downloads are the agent's binaries, which the Connect page names; nil publishes none.
	Downloads *downloads.Shelf
	// Benchmarks are the results providers attach to their listings; nil answers that they
	// are unavailable.
	Benchmarks *benchmarks.Service
	// Performance is the provider's view of its rigs; nil hides it.
	Performance *performance.Service
	// Router gives the rigs' capacities by their last heartbeat; nil where no gateway runs here.
	Router core.Router
	// Usage is what the provider's rigs earned.
	Usage *metering.Reports
	// Invoicing gives the provider's statements; nil answers that they are unavailable.
	Invoicing *invoicing.Service
}

// Server serves a provider's pages and API.
type Server struct {
	*core.Core
	catalog     *catalog.Service
	rigs        RigCredentials
	downloads   *downloads.Shelf
	benchmarks  *benchmarks.Service
	performance *performance.Service
	router      core.Router
	usage       *metering.Reports
	invoicing   *invoicing.Service
}

// New builds a provider's handlers over the shared core.
func New(c *core.Core, cfg Config) *Server {
	return &Server{Core: c, catalog: cfg.Catalog, rigs: cfg.Rigs, downloads: cfg.Downloads, benchmarks: cfg.Benchmarks,
		performance: cfg.Performance, router: cfg.Router, usage: cfg.Usage, invoicing: cfg.Invoicing}
}

// Routes registers a provider's pages and API on e.
func (s *Server) Routes(e *echo.Echo) {
	page, api := s.RequirePage(accounts.RoleProvider), s.RequireAPI(accounts.RoleProvider)

	provider := e.Group("/provider", page)
	provider.GET("/rigs", s.rigsPage)
	provider.GET("/rigs/new", s.newRigPage)
	provider.POST("/rigs", s.createRigSubmit)
	provider.GET("/rigs/:id/edit", s.editRigPage)
	provider.GET("/rigs/:id/connect", s.rigConnectPage)
	provider.POST("/rigs/:id/connect", s.rigCredentialReissueSubmit)
	provider.POST("/rigs/:id", s.updateRigSubmit)
	provider.POST("/rigs/:id/:action", s.rigStatusSubmit)
	// A rig's benchmark, attached by its provider: the page, the form and the API (the public
	// result is the public package's).
	provider.GET("/rigs/:id/benchmark", s.rigBenchmarkPage)
	provider.POST("/rigs/:id/benchmark", s.rigBenchmarkSubmit)
	provider.POST("/rigs/:id/benchmark/remove", s.rigBenchmarkRemoveSubmit)

	rigs := e.Group("/api/provider/offerings", api)
	rigs.GET("", s.apiListRigs)
	rigs.POST("", s.apiCreateRig)
	rigs.GET("/:id", s.apiGetRig)
	rigs.PUT("/:id", s.apiUpdateRig)
	rigs.DELETE("/:id", s.apiDelistRig)
	rigs.POST("/:id/pause", s.apiPauseRig)
	rigs.POST("/:id/resume", s.apiResumeRig)
	e.GET("/api/provider/offerings/:id/benchmark", s.apiOwnBenchmark, api)
	e.PUT("/api/provider/offerings/:id/benchmark", s.apiAttachBenchmark, api)
	e.DELETE("/api/provider/offerings/:id/benchmark", s.apiRemoveBenchmark, api)

	// The traffic and what it earned, the rigs' performance, the statements.
	e.GET("/provider/earnings", s.earningsPage, page)
	e.GET("/provider/performance", s.performancePage, page)
	e.GET("/provider/statements", s.providerStatementsPage, page)
	e.GET("/api/provider/earnings", s.apiEarnings, api)
	e.GET("/api/provider/performance", s.apiPerformance, api)
	e.GET("/api/provider/statements", s.apiProviderStatements, api)

	// Payouts: the provider's Stripe account, its onboarding, and its payouts.
	e.GET("/provider/payouts", s.providerPayoutsPage, page)
	e.POST("/provider/payouts/connect", s.connectPayoutsSubmit, page)
	e.GET(onboardingRefreshPath, s.onboardingRefresh, page)
	e.GET(onboardingReturnPath, s.onboardingReturn, page)
	e.GET(testOnboardingPath, s.testOnboardingPage, page)
	e.POST(testOnboardingPath, s.testOnboardingSubmit, page)
	e.GET("/api/provider/payouts", s.apiProviderPayouts, api)
}
