// Package public is what anyone may read without an account: the home page, the catalog of
// offerings with their reliability and their providers' benchmarks, the price calculator, the
// capacity planner, the methodology behind the figures, the agent's downloads, and the JSON
// API of the same (/api/offerings, /api/prices, /api/calculator, /api/planner,
// /api/reference).
//
// It imports web/internal/core and the services, never another audience's package nor web.
package public

import (
	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/benchmarks"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/downloads"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// Config is what the public pages read.
type Config struct {
	Catalog *catalog.Service
	// Benchmarks are the results providers attach to their listings; nil shows none.
	Benchmarks *benchmarks.Service
	// Downloads are the agent's binaries published at /downloads/; nil publishes none.
	Downloads *downloads.Shelf
}

// Server serves the public pages and API.
type Server struct {
	*core.Core
	echo       *echo.Echo
	catalog    *catalog.Service
	benchmarks *benchmarks.Service
	downloads  *downloads.Shelf
}

// New builds the public handlers over the shared core.
func New(c *core.Core, cfg Config) *Server {
	return &Server{Core: c, catalog: cfg.Catalog, benchmarks: cfg.Benchmarks, downloads: cfg.Downloads}
}

// Routes registers the public pages and API on e.
func (s *Server) Routes(e *echo.Echo) {
	s.echo = e
	e.GET("/", s.homePage)
	e.GET("/catalog", s.catalogPage)
	e.GET("/calculator", s.calculatorPage)
	e.GET("/methodology", s.methodologyPage)
	e.GET("/planner", s.plannerPage)
	s.downloadRoutes()

	api := e.Group("/api")
	api.GET("/offerings", s.apiOfferings)
	api.GET("/offerings/:id", s.apiOffering)
	api.GET("/offerings/:id/benchmark", s.apiPublicBenchmark)
	api.GET("/prices", s.apiPrices)
	api.GET("/calculator", s.apiCalculator)
	api.GET("/planner", s.apiPlanner)
	api.GET("/reference", s.apiReference)
}
