// Package admin is the administrators' pages and API: the users and their roles, the rigs whose
// own reports disagree with the gateway's, the requests whose usage the gateway saw differently
// from what was metered (which finance reads too), the batch queue, and the rigs at their limits
// on the usage stream. Its routes are under /admin and /api/admin, and /finance/discrepancies.
// An administrator marks a discrepancy resolved with a note, recorded in the audit log.
//
// It imports web/internal/core and the services, never another audience's package nor web.
package admin

import (
	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/batch"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// Config is what the administrators' pages read.
type Config struct {
	Catalog *catalog.Service
	// Requests is what the gateway saw of each request, for the discrepancies; nil shows none.
	Requests *requestlog.RequestLog
	// Audit records an administrator's resolution of a discrepancy; without it (or Requests)
	// none can be resolved.
	Audit *audit.Log
	// Batches is the Batch API's queue; nil answers 503.
	Batches *batch.Service
	// BatchLoad is the batch lines this process's gateway has in flight on each offering; nil
	// where no gateway runs here.
	BatchLoad func() map[string]int
	// Router gives the rigs' capacities by their last heartbeat; nil where no gateway runs here.
	Router core.Router
	// UsageStream says which rigs are at their limits; nil where this process does not watch
	// the usage stream.
	UsageStream UsageStreamReport
}

// Server serves the administrators' pages and API.
type Server struct {
	*core.Core
	catalog     *catalog.Service
	requests    *requestlog.RequestLog
	audit       *audit.Log
	batches     *batch.Service
	batchLoad   func() map[string]int
	router      core.Router
	usageStream UsageStreamReport
}

// New builds the administrators' handlers over the shared core.
func New(c *core.Core, cfg Config) *Server {
	return &Server{Core: c, catalog: cfg.Catalog, requests: cfg.Requests, audit: cfg.Audit, batches: cfg.Batches,
		batchLoad: cfg.BatchLoad, router: cfg.Router, usageStream: cfg.UsageStream}
}

// Routes registers the administrators' pages and API on e.
func (s *Server) Routes(e *echo.Echo) {
	m := s.Mount(e)
	m.Guarded("/admin")
	m.GET("/admin/users", s.usersPage)
	m.POST("/admin/users/:id/role", s.grantRoleSubmit)
	m.GET("/admin/discrepancies", s.discrepanciesPage)
	m.POST("/admin/discrepancies/resolve", s.resolveDiscrepancySubmit)
	m.GET("/admin/rig-reports", s.rigReportsPage)
	m.GET("/admin/batches", s.batchQueuePage)
	m.GET("/admin/batches/progress", s.batchQueueProgress)
	m.GET("/admin/usage-stream", s.usageStreamPage)
	// Finance reads the discrepancies too, beside its flags.
	m.GET("/finance/discrepancies", s.discrepanciesPage)

	m.GET("/api/admin/users", s.apiUsers)
	m.POST("/api/admin/users/:id/role", s.apiGrantRole)
	m.GET("/api/admin/discrepancies", s.apiDiscrepancies)
	m.POST("/api/admin/discrepancies/resolve", s.apiResolveDiscrepancy)
	m.GET("/api/admin/rig-reports", s.apiRigReports)
	m.GET("/api/admin/batches", s.apiBatchQueue)
	m.GET("/api/admin/usage-stream", s.apiUsageStream)
}
