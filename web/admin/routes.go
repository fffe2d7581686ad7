// Package admin is the administrators' pages and API: the users and their roles, the rigs whose
// own reports disagree with the gateway's, the requests whose usage the gateway saw differently
// from what was metered (which finance reads too), the batch queue, and the rigs at their limits
// on the usage stream. Its routes are under /admin and /api/admin, and /finance/discrepancies.
//
// It imports web/internal/core and the services, never another audience's package nor web.
package admin

import (
	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/batch"
	"github.com/gpumarket/gpumarket/services/billing"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// Config is what the administrators' pages read.
type Config struct {
	Catalog *catalog.Service
	// Requests is what the gateway saw of each request, for the discrepancies; nil shows none.
	Requests *billing.RequestLog
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
	requests    *billing.RequestLog
	batches     *batch.Service
	batchLoad   func() map[string]int
	router      core.Router
	usageStream UsageStreamReport
}

// New builds the administrators' handlers over the shared core.
func New(c *core.Core, cfg Config) *Server {
	return &Server{Core: c, catalog: cfg.Catalog, requests: cfg.Requests, batches: cfg.Batches,
		batchLoad: cfg.BatchLoad, router: cfg.Router, usageStream: cfg.UsageStream}
}

// Routes registers the administrators' pages and API on e.
func (s *Server) Routes(e *echo.Echo) {
	admin := e.Group("/admin", s.RequirePage(accounts.RoleAdmin))
	admin.GET("/users", s.usersPage)
	admin.POST("/users/:id/role", s.grantRoleSubmit)
	admin.GET("/discrepancies", s.discrepanciesPage)
	admin.GET("/rig-reports", s.rigReportsPage)
	admin.GET("/batches", s.batchQueuePage)
	admin.GET("/usage-stream", s.usageStreamPage)
	// Finance reads the discrepancies too, beside its flags.
	e.GET("/finance/discrepancies", s.discrepanciesPage, s.RequirePage(accounts.RoleFinance, accounts.RoleAdmin))

	api, admins := e.Group("/api"), s.RequireAPI(accounts.RoleAdmin)
	api.GET("/admin/users", s.apiUsers, admins)
	api.POST("/admin/users/:id/role", s.apiGrantRole, admins)
	api.GET("/admin/discrepancies", s.apiDiscrepancies, admins)
	api.GET("/admin/rig-reports", s.apiRigReports, admins)
	api.GET("/admin/batches", s.apiBatchQueue, admins)
	api.GET("/admin/usage-stream", s.apiUsageStream, admins)
}
