// Package provider is a provider's own pages and API: its rigs and their listings (/provider/rigs,
// /api/provider/offerings), what a rig's agent needs to connect, the benchmarks it attaches to its
// listings, its rigs' performance, its earnings, its statements, and its Stripe account and
// payouts (/provider/payouts). Every call reads and changes the caller's own account only.
//
// It imports web/internal/core and the services, never another audience's package nor web.
package provider

import (
	"github.com/labstack/echo/v4"

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
	m := s.Mount(e)
	m.Guarded("/provider")
	m.GET("/provider/rigs", s.rigsPage)
	m.GET("/provider/rigs/new", s.newRigPage)
	m.POST("/provider/rigs", s.createRigSubmit)
	m.GET("/provider/rigs/:id/edit", s.editRigPage)
	m.GET("/provider/rigs/:id/connect", s.rigConnectPage)
	m.POST("/provider/rigs/:id/connect", s.rigCredentialReissueSubmit)
	m.POST("/provider/rigs/:id", s.updateRigSubmit)
	m.POST("/provider/rigs/:id/:action", s.rigStatusSubmit)
	// A rig's benchmark, attached by its provider: the page, the form and the API (the public
	// result is web/public's).
	m.GET("/provider/rigs/:id/benchmark", s.rigBenchmarkPage)
	m.POST("/provider/rigs/:id/benchmark", s.rigBenchmarkSubmit)
	m.POST("/provider/rigs/:id/benchmark/remove", s.rigBenchmarkRemoveSubmit)

	m.Guarded("/api/provider/offerings")
	m.GET("/api/provider/offerings", s.apiListRigs)
	m.POST("/api/provider/offerings", s.apiCreateRig)
	m.GET("/api/provider/offerings/:id", s.apiGetRig)
	m.PUT("/api/provider/offerings/:id", s.apiUpdateRig)
	m.DELETE("/api/provider/offerings/:id", s.apiDelistRig)
	m.POST("/api/provider/offerings/:id/pause", s.apiPauseRig)
	m.POST("/api/provider/offerings/:id/resume", s.apiResumeRig)
	m.GET("/api/provider/offerings/:id/benchmark", s.apiOwnBenchmark)
	m.PUT("/api/provider/offerings/:id/benchmark", s.apiAttachBenchmark)
	m.DELETE("/api/provider/offerings/:id/benchmark", s.apiRemoveBenchmark)

	// The traffic and what it earned, the rigs' performance, the statements.
	m.GET("/provider/earnings", s.earningsPage)
	m.GET("/provider/performance", s.performancePage)
	m.GET("/provider/statements", s.providerStatementsPage)
	m.GET("/api/provider/earnings", s.apiEarnings)
	m.GET("/api/provider/performance", s.apiPerformance)
	m.GET("/api/provider/statements", s.apiProviderStatements)

	// Payouts: the provider's Stripe account, its onboarding, and its payouts.
	m.GET("/provider/payouts", s.providerPayoutsPage)
	m.GET("/provider/payouts/progress", s.payoutRunProgress)
	m.POST("/provider/payouts/connect", s.connectPayoutsSubmit)
	m.GET(onboardingRefreshPath, s.onboardingRefresh)
	m.GET(onboardingReturnPath, s.onboardingReturn)
	m.GET(testOnboardingPath, s.testOnboardingPage)
	m.POST(testOnboardingPath, s.testOnboardingSubmit)
	m.GET("/api/provider/payouts", s.apiProviderPayouts)
}
