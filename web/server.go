// Package web is the platform's HTTP face: pages rendered with templ, the JSON API beside
// them, static assets, and operations endpoints. It builds the router, runs every request
// through the edge middleware (request id, metrics, access log, recovery, security headers) and
// the session and CSRF checks, serves /static/, /healthz, /readyz and /metrics, and mounts the
// audiences' packages, each of which registers its own routes:
//
//   - web/public: the home page, catalog, calculator, planner, methodology, downloads;
//   - web/account: signing up, logging in and out, billing details;
//   - web/developer: credits, usage, batches, reports, invoices;
//   - web/developer/keys: API keys, the limits per person, the account's budget and the alerts;
//   - web/provider: rigs, connect, benchmarks, performance, earnings, statements, payouts;
//   - web/ledger: finance's balances, adjustments, prices, Stripe events, rejections, payouts;
//   - web/finance: the close, the review of invoices and statements, the audit log, flags, and
//     every document's page, PDF and CSV;
//   - web/admin: users and roles, rig reports, discrepancies, the batch queue, the usage stream;
//   - web/home: the first page after logging in, /home, whose panels follow the role in use.
//
// They share web/internal/core (sessions, role rules, CSRF, decoding, rendering, the one table
// of error statuses) and import nothing of each other nor of this package. Handlers are thin:
// decode, call a service, render. Business rules live in services.
package web

import (
	"context"
	"embed"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/batch"
	"github.com/gpumarket/gpumarket/services/benchmarks"
	"github.com/gpumarket/gpumarket/services/budgets"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/downloads"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/performance"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/services/webhooks"
	"github.com/gpumarket/gpumarket/web/account"
	"github.com/gpumarket/gpumarket/web/admin"
	"github.com/gpumarket/gpumarket/web/developer"
	"github.com/gpumarket/gpumarket/web/developer/keys"
	"github.com/gpumarket/gpumarket/web/finance"
	"github.com/gpumarket/gpumarket/web/home"
	"github.com/gpumarket/gpumarket/web/internal/core"
	"github.com/gpumarket/gpumarket/web/ledger"
	"github.com/gpumarket/gpumarket/web/provider"
	"github.com/gpumarket/gpumarket/web/public"
)

//go:embed static
var staticFS embed.FS

// ReadyCheck is a dependency that /readyz asks.
type ReadyCheck struct {
	Name  string
	Check func(context.Context) error
}

// Config wires the web server to the services.
type Config struct {
	Accounts *accounts.Service
	Catalog  *catalog.Service
	Payments Payments
	Usage    *metering.Reports // what requests cost and what rigs earned
	// Budgets are the keys' spend in their periods, the member limits and account budgets.
	Budgets  *budgets.Service
	Ready    []ReadyCheck
	Log      *slog.Logger
	Registry *prometheus.Registry // where HTTP metrics register; nil means a new one
	Now      func() time.Time
	// OpsOnly serves only health, readiness and metrics: a process that runs the meter alone.
	OpsOnly bool
	// Rigs gives a provider what its agent needs to connect; nil hides the page.
	Rigs RigCredentials
	// Downloads are the agent's binaries published at /downloads/ (web/public); nil publishes none, and the
	// Connect page then says so.
	Downloads *downloads.Shelf
	// Webhooks keeps the accounts' webhook endpoints (web/account); nil answers that they are unavailable.
	Webhooks *webhooks.Service
	// Router is the routing table of this process's gateway, for the models on offer (the
	// examples beside a new API key), the rigs' capacities (the provider's performance, the batch
	// queue); nil where no gateway runs here. The /v1 gateway itself is package web/gateway: its
	// requests never reach this server.
	Router Router
	// Requests is what the gateway saw of each request, for the admin's discrepancies; nil shows none.
	Requests *requestlog.RequestLog
	// BatchLoad is the batch lines this process's gateway has in flight on each offering
	// (gateway.Gateway.BatchLoad); nil where no gateway runs here.
	BatchLoad func() map[string]int
	// TrustedProxies are the networks whose connections may name, in X-Forwarded-For, the
	// client they forward; any other connection's own address is the client's. See
	// docs/web-security.md ("Client addresses").
	TrustedProxies []*net.IPNet
	// MetricsToken, when set, serves /metrics on this handler to requests that carry it as a
	// bearer token. Without it /metrics is not served here (404): MetricsHandler serves it on
	// a listener of its own.
	MetricsToken string
	// KeyChanges tells every gateway process that an API key was revoked or its limit changed;
	// nil tells none (web/developer/keys).
	KeyChanges KeyChanges
	// UsageStream says which rigs are at their limits on the usage stream; nil where this
	// process does not watch it.
	UsageStream UsageStreamReport
	// Invoicing is the close, the invoices, statements and credit notes, and their documents
	// (web/finance); Audit the finance audit log; Journal writes a
	// month's ledger postings as CSV (documents.WriteJournal). Without Invoicing those pages
	// answer that they are unavailable.
	Invoicing *invoicing.Service
	Audit     *audit.Log
	Journal   Journal
	// Reports are each customer's savings and carbon (web/developer: the dashboard, its CSV and
	// its JSON); nil answers that they are unavailable.
	Reports ReportSource
	// Performance is the provider's view of its rigs (web/provider); nil hides it.
	Performance *performance.Service
	// Reliability is each offering's reliability record (web/internal/core); nil shows every offering without
	// enough traffic yet.
	Reliability Records
	// Batches are the Batch API's files and batches (web/developer, web/admin); nil answers 503.
	Batches *batch.Service
	// Benchmarks are the results providers attach to their listings (web/provider, web/public); nil
	// answers that they are unavailable.
	Benchmarks *benchmarks.Service
}

// Payments wires credits, payouts and the Stripe webhook into the web server (core.Payments).
type Payments = core.Payments

// Journal writes the period's journal of ledger postings to w as CSV (finance.Journal).
type Journal = finance.Journal

// RigCredentials derives a rig's secrets from the platform's keys (provider.RigCredentials).
type RigCredentials = provider.RigCredentials

// RigCredential is what one rig's agent needs to reach the platform (provider.RigCredential).
type RigCredential = provider.RigCredential

// KeyChanges carries word of a changed API key to every gateway process (keys.KeyChanges).
type KeyChanges = keys.KeyChanges

// ReportSource is what the reports pages need of services/reports (developer.ReportSource).
type ReportSource = developer.ReportSource

// UsageStreamReport says where the rigs stand against their limits on the usage stream
// (admin.UsageStreamReport).
type UsageStreamReport = admin.UsageStreamReport

// Router is what the pages and the API ask of this process's gateway's routing table (core.Router).
type Router = core.Router

// Records gives each offering's reliability record; *reliability.Board implements it.
type Records = core.Records

// Server is the platform's pages and API: the shared core (web/internal/core) and the audiences'
// packages over it, each registering its own routes on one router.
type Server struct {
	core           *core.Core
	echo           *echo.Echo
	edge           []echo.MiddlewareFunc
	metricsHandler http.Handler
	metricsToken   string
	ready          []ReadyCheck
	registry       *prometheus.Registry
	// finance holds the month closes that requests started; Close ends them.
	finance *finance.Server
}

// New builds the server and its routes.
func New(cfg Config) *Server {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.IPExtractor = core.ClientIPExtractor(cfg.TrustedProxies)
	c := &core.Core{Accounts: cfg.Accounts, Payments: cfg.Payments, Reliability: cfg.Reliability, Log: cfg.Log, Now: cfg.Now}
	s := &Server{core: c, echo: e, ready: cfg.Ready, registry: cfg.Registry, metricsToken: cfg.MetricsToken,
		finance: finance.New(c, finance.Config{Invoicing: cfg.Invoicing, Audit: cfg.Audit, Journal: cfg.Journal})}
	e.HTTPErrorHandler = c.HandleError
	s.edge = []echo.MiddlewareFunc{core.RequestID, newHTTPMetrics(cfg.Registry).middleware, s.accessLog, c.Recoverer(),
		middleware.SecureWithConfig(middleware.SecureConfig{
			XSSProtection: "0", ContentTypeNosniff: "nosniff", XFrameOptions: "DENY",
			ReferrerPolicy:        "same-origin",
			ContentSecurityPolicy: contentSecurityPolicy(cfg.Payments.CheckoutOrigins),
		})}
	e.Use(s.edge...)
	e.Use(middleware.BodyLimit("1M"))
	if cfg.OpsOnly {
		s.opsRoutes()
		return s
	}
	e.Pre(finance.PDFSuffix)
	e.Use(c.Authenticate)
	e.Use(c.CSRF())
	s.opsRoutes()
	e.GET("/static/*", echo.WrapHandler(http.FileServer(http.FS(staticFS))), cacheStatic)
	public.New(c, public.Config{Catalog: cfg.Catalog, Benchmarks: cfg.Benchmarks, Downloads: cfg.Downloads}).Routes(e)
	account.New(c, account.Config{Invoicing: cfg.Invoicing, Webhooks: cfg.Webhooks, KeyChanges: cfg.KeyChanges}).Routes(e)
	developer.New(c, developer.Config{Catalog: cfg.Catalog, Usage: cfg.Usage, Batches: cfg.Batches, Reports: cfg.Reports,
		Invoicing: cfg.Invoicing}).Routes(e)
	keys.New(c, keys.Config{Router: cfg.Router, KeyChanges: cfg.KeyChanges, Budgets: cfg.Budgets}).Routes(e)
	provider.New(c, provider.Config{Catalog: cfg.Catalog, Rigs: cfg.Rigs, Downloads: cfg.Downloads,
		Benchmarks: cfg.Benchmarks, Performance: cfg.Performance, Router: cfg.Router, Usage: cfg.Usage,
		Invoicing: cfg.Invoicing}).Routes(e)
	ledger.New(c, ledger.Config{Catalog: cfg.Catalog, Usage: cfg.Usage}).Routes(e)
	s.finance.Routes(e)
	admin.New(c, admin.Config{Catalog: cfg.Catalog, Requests: cfg.Requests, Audit: cfg.Audit, Batches: cfg.Batches, BatchLoad: cfg.BatchLoad,
		Router: cfg.Router, UsageStream: cfg.UsageStream}).Routes(e)
	home.New(c, home.Config{Catalog: cfg.Catalog, Usage: cfg.Usage, Reports: cfg.Reports, Budgets: cfg.Budgets,
		Invoicing: cfg.Invoicing, Batches: cfg.Batches, Requests: cfg.Requests}).Routes(e)
	return s
}

// EdgeMiddleware is what every request to the platform's address goes through first, whichever
// handler serves it: the request id, the HTTP metrics (on this server's registry), the access
// log, panic recovery and the security headers. The /v1 gateway (package web/gateway) runs it on
// its own router, so that its requests are counted, logged and identified as every other is.
// Its errors go to the router that runs it.
func (s *Server) EdgeMiddleware() []echo.MiddlewareFunc { return s.edge }

// IPExtractor says where a request comes from, by Config.TrustedProxies.
func (s *Server) IPExtractor() echo.IPExtractor { return s.echo.IPExtractor }

// Close ends the month closes still running that requests started, once the HTTP server has
// finished the requests themselves, and waits for them: a close cut off so reads as failed and is
// completed by closing again (docs/invoicing.md). Calling it again does nothing more.
func (s *Server) Close() { s.finance.Close() }

// ServeHTTP makes the server an http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

// Echo exposes the router for tests that list its routes.
func (s *Server) Echo() *echo.Echo { return s.echo }

func (s *Server) opsRoutes() {
	s.echo.GET("/healthz", s.healthz)
	s.echo.GET("/readyz", s.readyz)
	s.metricsHandler = s.metrics()
	if s.metricsToken != "" {
		s.echo.GET("/metrics", echo.WrapHandler(s.metricsHandler))
	}
}

// contentSecurityPolicy is the pages' CSP. Chromium applies form-action to every redirect
// after a form is posted, so the buy form's redirect to the payment page needs the payment
// page's origin in it (checkoutOrigins) beside the site's own.
func contentSecurityPolicy(checkoutOrigins []string) string {
	formAction := append([]string{"'self'"}, checkoutOrigins...)
	return "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; form-action " +
		strings.Join(formAction, " ") + "; frame-ancestors 'none'"
}

func cacheStatic(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Response().Header().Set("Cache-Control", "public, max-age=3600")
		return next(c)
	}
}
