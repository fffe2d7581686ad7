// Package public is what anyone may read without an account: the home page, the catalog of
// offerings with their reliability and their providers' benchmarks, the price calculator, the
// capacity planner, the methodology behind the figures, the agent's downloads, and the JSON
// API of the same (/api/offerings, /api/prices, /api/calculator, /api/planner,
// /api/reference).
//
// It imports web/internal/core and the services, never another audience's package nor web.
package public

import (
	"net/http"

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
	m := s.Mount(e)
	m.GET("/", s.homePage)
	m.GET("/catalog", s.catalogPage)
	m.GET("/calculator", s.calculatorPage)
	m.GET("/methodology", s.methodologyPage)
	m.GET("/planner", s.plannerPage)
	// What a rig fetches: public, without a login, and the same for everyone (downloads.go).
	e.Match([]string{http.MethodGet, http.MethodHead}, "/downloads/:name", s.download)

	m.GET("/api/offerings", s.apiOfferings)
	m.GET("/api/offerings/:id", s.apiOffering)
	m.GET("/api/offerings/:id/benchmark", s.apiPublicBenchmark)
	m.GET("/api/prices", s.apiPrices)
	m.GET("/api/calculator", s.apiCalculator)
	m.GET("/api/planner", s.apiPlanner)
	m.GET("/api/reference", s.apiReference)
}
