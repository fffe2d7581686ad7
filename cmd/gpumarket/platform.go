package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/pprof"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	usageevent "github.com/gpumarket/gpumarket/services/usage"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpumarket/gpumarket/db"
	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/batch"
	"github.com/gpumarket/gpumarket/services/benchmarks"
	"github.com/gpumarket/gpumarket/services/budgets"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/credits/stripemock"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/demo/history"
	"github.com/gpumarket/gpumarket/services/documents"
	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/events/natsserver"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/mail"
	"github.com/gpumarket/gpumarket/services/mail/catcher"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/payouts"
	"github.com/gpumarket/gpumarket/services/performance"
	records "github.com/gpumarket/gpumarket/services/reliability"
	"github.com/gpumarket/gpumarket/services/reports"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/services/rigauth"
	"github.com/gpumarket/gpumarket/services/riglimits"
	"github.com/gpumarket/gpumarket/services/rigwire"
	"github.com/gpumarket/gpumarket/services/routing"
	"github.com/gpumarket/gpumarket/services/ticket"
	"github.com/gpumarket/gpumarket/services/usagestore"
	"github.com/gpumarket/gpumarket/services/webhooks"
	"github.com/gpumarket/gpumarket/web"
	"github.com/gpumarket/gpumarket/web/gateway"
)

// Platform is the running platform: its connections, services and HTTP server. Start it with
// Open and Run; Close releases everything. Tests start it on port 0.
type Platform struct {
	cfg Config
	// budgets are the member limits, account budgets and keys' spend per period; alerts fire their
	// alerts, in the meter's process (budgetAlerts).
	budgets    *budgets.Service
	alerts     *budgets.Alerts
	log        *slog.Logger
	pool       *pgxpool.Pool
	natsServer *server.Server // nil when NATS_URL names an external server
	natsURL    string         // where rigs connect, without credentials: what providers are shown
	// natsLocalURL is where this machine's simulated rigs connect, without credentials: the embedded server's
	// local address, else natsURL.
	natsLocalURL string
	// natsPlatformURL is where this process's own connection goes, with the platform's credentials: for
	// the embedded server, its local address and the password made at this start. A benchmark hands it
	// to the platform processes it starts beside this one (benchprocess.go); nothing shows it.
	natsPlatformURL string
	nc              *nats.Conn
	js              jetstream.JetStream
	meter           *metering.Meter // nil unless the meter role runs here
	feed            *metering.Feed  // the meter's feed of committed usage to the routers; nil with the meter
	registry        *prometheus.Registry
	accounts        *accounts.Service
	catalog         *catalog.Service
	audit           *audit.Log             // the finance audit log
	invoicing       *invoicing.Service     // the close, invoices and statements; it closes due periods by itself in Run
	router          *routing.Router        // nil unless the gateway runs here: the /v1 gateway routes with it
	rigCaller       *rigwire.Caller        // nil unless the gateway runs here: how it calls the rigs, over NATS
	rigNC           *nats.Conn             // the rig calls' own connection
	requestLog      *requestlog.RequestLog // what the gateway saw, reconciled with the meter
	// reliability holds the offerings' reliability records, which routing and the pages read; nil where
	// neither runs (reliabilityrecord.go).
	reliability *records.Board
	// reconcileEvery is how often the gateway's record is compared with the metered usage.
	reconcileEvery time.Duration
	stripeMock     *stripemock.Process // nil with a real Stripe key or STRIPE_API_URL
	listener       net.Listener
	http           *http.Server
	web            *web.Server
	// gateway serves /v1 (package web/gateway) beside web on the same address; nil where it
	// does not run here.
	gateway *gateway.Gateway
	// metricsListener and metricsHTTP serve /metrics on GPUMARKET_METRICS_ADDR; nil without it.
	metricsListener net.Listener
	metricsHTTP     *http.Server
	// rigLimits watches the rigs' use of the usage stream (riglimits); set once NATS is up, and
	// read by the embedded server's authenticator, which may run before. Nil where no web role
	// runs and NATS is not embedded.
	rigLimits   atomic.Pointer[riglimits.Watcher]
	rigLimitsNC *nats.Conn // the watcher's own connection
	// rigAuthNC answers the NATS auth callout for rigs (rigauth.Responder), and rigRevoker closes rigs'
	// connections through the system account; both nil where this process does not let rigs in (rigentry.go).
	rigAuthNC  *nats.Conn
	rigRevoker *rigauth.Revoker
	// payouts pays statements through Stripe Connect (nil where no web role runs); testPayments
	// says it runs on stripe-mock.
	payouts      *payouts.Service
	testPayments bool
	// topups charges saved cards when balances fall below their thresholds (nil where no web role
	// runs); its worker runs in Run.
	topups *credits.AutoTopup
	// batches are the Batch API's files and batches (nil where neither the web nor the gateway role
	// runs), and batchScheduler runs their lines (batches.go), with the gateway role.
	batches        *batch.Service
	batchScheduler *batch.Scheduler
	batchPollEvery time.Duration
	batchLease     time.Duration
	// webhooks records accounts' events and, with its key, delivers them to their endpoints.
	webhooks *webhooks.Service
	// outbox queues the platform's e-mail; mailSender sends it where the web role runs and an SMTP server (or
	// mailCatcher, under `gpumarket dev`) is there, else nil (mail.go).
	outbox      *mail.Outbox
	mailSender  *mail.Sender
	mailCatcher *catcher.Catcher
	// usageStore makes usage_events' monthly partitions ahead and applies the usage retention, at the start and
	// every day (docs/usage-storage.md).
	usageStore *usagestore.Store
}

// Open connects to PostgreSQL (migrating it forward) and to NATS (embedding a server when no
// NATS_URL is set), and builds the services and routes.
func Open(ctx context.Context, cfg Config, log *slog.Logger) (_ *Platform, err error) {
	p := &Platform{cfg: cfg, log: log, reconcileEvery: defaultReconcileEvery, batchPollEvery: defaultBatchPollEvery}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	if p.pool, err = db.Open(ctx, cfg.DatabaseURL); err != nil {
		return nil, err
	}
	if err = db.Migrate(ctx, p.pool, log); err != nil {
		return nil, err
	}
	// The usage table's months ahead, and its retention, before anything writes usage; then once a day (Run).
	p.usageStore = usagestore.New(usagestore.Config{Pool: p.pool, RetentionMonths: cfg.UsageRetentionMonths,
		MonthNotFinal: invoicing.MonthNotFinal, RolledUpRequests: metering.RolledUpRequests,
		AttachMonth: metering.AttachMonth, DetachMonth: metering.DetachMonth, Log: log.With("part", "usage storage")})
	if err := p.usageStore.Maintain(ctx); err != nil {
		log.Warn("keeping the usage partitions failed; the meter makes the months it writes, and the next pass tries again", "err", err)
	}
	// The catalog is there before NATS: the answer to the auth callout reads it for each rig that connects.
	p.audit = audit.New(p.pool, nil)
	// Accounts' webhooks: every process records the events of what it does; a process with the key
	// (every web one) delivers them too (docs/webhooks.md).
	p.webhooks = webhooks.New(webhooks.Config{Pool: p.pool, Key: cfg.webhookKey(), AllowPrivate: cfg.WebhooksAllowPrivate,
		Schedule: cfg.WebhookRetrySchedule, Log: log.With("part", "webhooks")})
	p.catalog = catalog.NewService(p.pool, catalog.Config{Audit: p.audit, Delisted: p.disconnectRig, Events: p.webhooks})
	natsURL, systemURL := cfg.NATSURL, cfg.NATSSystemURL
	if natsURL == "" {
		// The embedded server is the rigs' entry point: it lets in this process's users (the platform's and the
		// system account's, with passwords made now) and puts every other name to the auth callout, which this
		// process answers (openRigEntry): each listed offering's rig with its own credential, in the rigs'
		// account, allowed only its own subjects (docs/usage-stream.md, "The rigs' entry point").
		platformPassword, systemPassword := randomToken(), randomToken()
		issuer, err := rigauth.IssuerPublicKey(cfg.RigKey)
		if err != nil {
			return nil, err
		}
		natsserver.TuneGCForEmbedded(cfg.GOGCSet)
		p.natsServer, err = natsserver.StartEmbedded(natsserver.EmbeddedOptions{
			Host: cfg.NATSHost, Port: cfg.NATSPort, StoreDir: filepath.Join(cfg.DataDir, "nats"), Log: log,
			Rigs: &natsserver.RigEntry{PlatformUser: "gpumarket", PlatformPassword: platformPassword,
				SystemUser: "system", SystemPassword: systemPassword, Issuer: issuer},
			RigsTLS: cfg.RigTLS,
		})
		if err != nil {
			return nil, err
		}
		local := localNATSURL(p.natsServer)
		p.natsURL = cfg.RigNATSURL
		if p.natsURL == "" {
			p.natsURL = p.natsServer.ClientURL()
			if unspecifiedHost(cfg.NATSHost) {
				// A wildcard is no address a rig can dial: show this machine's loopback, and say what to set.
				p.natsURL = local
				log.Warn("the embedded NATS listens on every address but GPUMARKET_RIG_NATS_URL is unset: providers are shown " +
					local + "; set GPUMARKET_RIG_NATS_URL to the address their rigs reach")
			}
		}
		p.natsLocalURL = local
		natsURL = withUserInfo(local, "gpumarket", platformPassword)
		systemURL = withUserInfo(local, "system", systemPassword)
		log.Info("embedded NATS with JetStream", "url", p.natsServer.ClientURL(), "rigs_url", p.natsURL,
			"store", filepath.Join(cfg.DataDir, "nats"))
	} else {
		// NATS_URL may carry the platform's own user and password: rigs get the address only, or the one
		// GPUMARKET_RIG_NATS_URL names.
		p.natsURL = cfg.RigNATSURL
		if p.natsURL == "" {
			p.natsURL = withoutUserInfo(natsURL)
		}
		p.natsLocalURL = withoutUserInfo(natsURL)
	}
	p.natsPlatformURL = natsURL
	if p.nc, p.js, err = events.Connect(ctx, natsURL, "gpumarket", log); err != nil {
		return nil, err
	}
	if err = p.openRigEntry(ctx, natsURL, systemURL); err != nil {
		return nil, err
	}
	p.registry = prometheus.NewRegistry()
	if cfg.Roles.Meter {
		if p.meter, err = p.openMeter(ctx); err != nil {
			return nil, err
		}
	}
	if cfg.Roles.Web || p.natsServer != nil {
		if err = p.watchRigLimits(ctx, natsURL); err != nil {
			return nil, err
		}
	}
	sessionKey := cfg.SessionKey
	if !cfg.Roles.Web {
		sessionKey = []byte(strings.Repeat("-", 32)) // signs nothing: no login routes run here
	}
	if err = p.openMail(); err != nil {
		return nil, err
	}
	if p.accounts, err = accounts.NewService(p.pool, accounts.Config{SessionKey: sessionKey, Outbox: p.outbox,
		SiteURL: p.siteURL}); err != nil {
		return nil, err
	}
	p.budgets = budgets.NewService(p.pool, p.accounts, nil)
	if cfg.Roles.Meter {
		p.alerts = p.budgetAlerts()
	}
	p.invoicing = newInvoicing(cfg.Invoicing, ledger.NewLedger(p.pool, nil), p.audit, p.pool, log.With("role", "invoicing"),
		p.webhooks, p.outbox)
	var payments web.Payments
	var gw gateway.Config
	if cfg.Roles.Web {
		if payments, err = p.payments(ctx); err != nil {
			return nil, err
		}
	}
	if cfg.Roles.Gateway {
		if gw, err = p.gatewayConfig(); err != nil {
			return nil, err
		}
		// The gateway reaches every rig over the NATS connection the rig's agent opened: it dials none
		// (docs/rig-transport.md). Its calls have a connection of their own, so that answers never wait in
		// line behind the meter's or routing's traffic on the platform's.
		var inProcess []nats.Option
		if p.natsServer != nil {
			// The embedded server is in this process: its calls skip the loopback's sockets.
			inProcess = append(inProcess, nats.InProcessServer(p.natsServer))
		}
		if p.rigNC, _, err = events.Connect(ctx, natsURL, "gpumarket-rigcalls", log, inProcess...); err != nil {
			return nil, err
		}
		if p.rigCaller, err = rigwire.NewCaller(p.rigNC, rigwire.Options{Log: log.With("role", "gateway")}); err != nil {
			return nil, err
		}
		gw.Rigs = p.rigCaller
		if cfg.wrapRigCalls != nil {
			gw.Rigs = cfg.wrapRigCalls(p.rigCaller)
		}
	}
	if cfg.Roles.Web || cfg.Roles.Gateway {
		// The batch pages (web) and the Batch API and its scheduler (gateway) share the files and batches.
		if p.batches, err = p.openBatches(ctx); err != nil {
			return nil, err
		}
	}
	ready := []web.ReadyCheck{
		{Name: "postgres", Check: p.pool.Ping},
		{Name: "nats", Check: func(ctx context.Context) error { return events.Ping(ctx, p.nc) }},
	}
	if p.router != nil {
		// The gateway is ready once its routing table is: catalog loaded and the rigs' heartbeats in.
		ready = append(ready, web.ReadyCheck{Name: "routing", Check: p.router.Ready})
	}
	keyChanges := &natsKeyChanges{nc: p.nc}
	shelf, err := agentDownloads(cfg, log)
	if err != nil {
		return nil, err
	}
	webCfg := web.Config{
		OpsOnly:  !cfg.Roles.Web,
		Accounts: p.accounts, Catalog: p.catalog, Payments: payments, Usage: metering.NewReports(p.pool), Rigs: p,
		Budgets:  p.budgets,
		Requests: p.requestLog, Log: log, Registry: p.registry, Ready: ready, UsageStream: p.usageStreamReport(),
		TrustedProxies: cfg.TrustedProxies, MetricsToken: cfg.MetricsToken, KeyChanges: keyChanges,
		Invoicing: p.invoicing, Audit: p.audit, Journal: p.journal, Performance: performance.NewService(p.pool, p.catalog),
		Reports: reports.New(p.pool), Batches: p.batches, Benchmarks: benchmarks.NewService(p.pool, p.catalog, nil),
		Downloads: shelf, Webhooks: p.webhooks,
	}
	if cfg.Roles.Web {
		webCfg.Reliability = p.reliabilityBoard()
	}
	if p.router != nil {
		webCfg.Router = p.router
		webCfg.BatchLoad = func() map[string]int { return p.gateway.BatchLoad() }
	}
	p.web = web.New(webCfg)
	// The gateway serves /v1 on the same address, through the same request ids, metrics and
	// access log as the pages; a process without it answers /v1 that it does not run here.
	var v1 http.Handler
	if p.router != nil {
		gw.Accounts, gw.Batches, gw.Log, gw.Middleware, gw.IPExtractor = p.accounts, p.batches, log, p.web.EdgeMiddleware(), p.web.IPExtractor()
		gw.Budgets = p.budgets
		p.gateway = gateway.New(gw)
		keyChanges.local = p.gateway
		if _, err = subscribeKeyChanges(p.nc, p.gateway, log); err != nil {
			return nil, err
		}
		v1 = p.gateway
	}
	if p.listener, err = net.Listen("tcp", cfg.Addr); err != nil {
		return nil, fmt.Errorf("listen on %s: %w (set GPUMARKET_ADDR to another address)", cfg.Addr, err)
	}
	p.http = newHTTPServer(gateway.Mount(v1, p.web))
	if cfg.MetricsAddr != "" {
		if p.metricsListener, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
			return nil, fmt.Errorf("listen on %s for /metrics: %w (set GPUMARKET_METRICS_ADDR to another address)", cfg.MetricsAddr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", p.web.MetricsHandler())
		// The Go runtime's profiles, for an operator looking into where a process's time goes: on this
		// internal address only, never on the public one (docs/web-security.md, "/metrics and /readyz").
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		p.metricsHTTP = newHTTPServer(mux)
	}
	return p, nil
}

// The platform's HTTP timeouts; why these, and what a longer response must do, is in
// docs/web-security.md ("Timeouts").
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 60 * time.Second
	idleTimeout       = 120 * time.Second
	maxHeaderBytes    = 64 << 10
)

func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout,
		WriteTimeout: writeTimeout, IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes}
}

// MetricsURL is where /metrics answers on its own listener; "" when it has none.
func (p *Platform) MetricsURL() string {
	if p.metricsListener == nil {
		return ""
	}
	return "http://" + p.metricsListener.Addr().String() + "/metrics"
}

// payments connects to Stripe with STRIPE_SECRET_KEY; in test mode (GPUMARKET_PAYMENTS=test
// only, see Config.paymentsMode) to stripe-mock, started here unless STRIPE_API_URL names one,
// with the local test-payment page in front of it.
func (p *Platform) payments(ctx context.Context) (web.Payments, error) {
	cfg := p.cfg
	if len(cfg.StripeWebhookSecrets) == 0 {
		return web.Payments{}, fmt.Errorf("set STRIPE_WEBHOOK_SECRET")
	}
	testMode, err := cfg.paymentsMode()
	if err != nil {
		return web.Payments{}, err
	}
	ledger := ledger.NewLedger(p.pool, nil)
	key, apiURL := cfg.StripeSecretKey, ""
	if testMode {
		key, apiURL = "sk_test_gpumarketlocal", cfg.StripeAPIURL
		if apiURL == "" {
			bin, err := stripemock.Find(cfg.StripeMockBin, cfg.StripeMockDirs)
			if err != nil {
				return web.Payments{}, fmt.Errorf("GPUMARKET_PAYMENTS=test runs payments on stripe-mock: %w", err)
			}
			if p.stripeMock, err = stripemock.Start(ctx, bin, p.log); err != nil {
				return web.Payments{}, err
			}
			apiURL = p.stripeMock.URL
		}
		p.log.Warn("GPUMARKET_PAYMENTS=test: payments run on stripe-mock with a local test-payment page; no card is charged", "stripe_api", apiURL)
	}
	checkout := credits.NewStripeCheckout(key, apiURL)
	cr := credits.NewCredits(p.pool, ledger, checkout, nil).RecordTo(p.audit)
	webhook := credits.NewStripeWebhook(cr, cfg.StripeWebhookSecrets)
	// Providers' Stripe accounts and payouts, on the same Stripe (or stripe-mock); the webhook
	// hands them the account.updated events. Statements and payouts are joined both ways:
	// approving a statement pays it, and a payout asks invoicing for its statement and records
	// it paid (see docs/invoicing.md, "Paying statements").
	po := payouts.NewService(payouts.Config{Pool: p.pool, Ledger: ledger, Statements: p.invoicing, Events: p.webhooks,
		Stripe: payouts.NewStripeConnect(credits.NewStripeAPI(key, apiURL))})
	p.invoicing.PayWith(po)
	p.payouts, p.testPayments = po, testMode
	webhook.On("account.updated", po.AccountUpdated)
	// Auto top-up: saved cards charged off-session when a balance falls below its threshold,
	// credited by the same webhook (docs/auto-topup.md).
	topupCfg := credits.TopupConfig{Pool: p.pool, Ledger: ledger, Cards: credits.NewStripeCards(credits.NewStripeAPI(key, apiURL)),
		Events: p.webhooks, Mail: p.outbox}
	if testMode {
		// stripe-mock sends no webhooks: the platform sends itself the one Stripe would.
		topupCfg.Charged = p.localTopupSucceeded(cfg.StripeWebhookSecrets[0])
	}
	p.topups = credits.NewAutoTopup(topupCfg)
	webhook.WithAutoTopup(p.topups)
	pay := web.Payments{Credits: cr, Ledger: ledger, Webhook: webhook, Topups: p.topups, Payouts: po,
		PublicURL: cfg.PublicURL, CheckoutOrigins: checkoutOrigins(testMode)}
	if testMode {
		pay.LocalWebhookSecret = cfg.StripeWebhookSecrets[0]
	}
	return pay, nil
}

// localTopupSucceeded sends the platform's own webhook, through its whole HTTP stack, the signed
// payment_intent.succeeded that Stripe would send for an auto top-up's charge: with stripe-mock,
// which sends no webhooks, a top-up is credited by the code path a real one takes.
func (p *Platform) localTopupSucceeded(secret string) func(context.Context, credits.TopupCharge) {
	return func(ctx context.Context, c credits.TopupCharge) {
		now := time.Now()
		payload := credits.TopupIntentEvent("evt_local_"+randomToken()[:24], "payment_intent.succeeded", c, "", now)
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/webhooks/stripe", bytes.NewReader(payload))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Stripe-Signature", credits.SignEvent(payload, secret, now))
		rec := httptest.NewRecorder()
		p.web.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			p.log.Warn("test payments: the local top-up webhook was refused; the top-up stays pending", "status", rec.Code,
				"body", rec.Body.String())
		}
	}
}

// checkoutOrigins are the origins of the Stripe pages forms send people to, which the pages'
// CSP must let those forms reach: Stripe Checkout's, where buyers pay, and Stripe Connect's,
// where providers onboard. In test mode both happen on the platform's own test pages instead.
func checkoutOrigins(testMode bool) []string {
	if testMode {
		return nil
	}
	return []string{credits.StripeCheckoutOrigin, payouts.StripeConnectOrigin}
}

// gatewayConfig builds what the /v1 gateway needs: the router (started in Run), route tickets,
// admission, the request log and the rate limit per API key.
func (p *Platform) gatewayConfig() (gateway.Config, error) {
	signer, err := ticket.NewSigner(p.cfg.TicketKey)
	if err != nil {
		return gateway.Config{}, err
	}
	p.router = routing.New(routing.Config{Pool: p.pool, Catalog: p.catalog, NATS: p.nc, Log: p.log.With("role", "gateway"),
		FlushEvery: p.cfg.routingFlushEvery, Reliability: p.reliabilityBoard()})
	p.requestLog = requestlog.NewRequestLog(p.pool, metering.GatewayReads{}, nil, p.log.With("role", "gateway"))
	return gateway.Config{
		Router: p.router, Tickets: signer, Requests: p.requestLog,
		RatePerSecond: p.cfg.RateLimitRPS, RateBurst: p.cfg.RateLimitBurst,
		Admission: admission.NewAdmission(admission.AdmissionConfig{Pool: p.pool, Prices: p.catalog, Usage: metering.GatewayReads{},
			Limits: budgets.AdmissionLimits{}, Log: p.log.With("role", "gateway")}),
	}, nil
}

// budgetAlerts is the evaluator of the budget and balance alerts, which runs beside the meter, where
// spend changes. Its e-mail and webhook deliveries are wired with budgets.AlertsConfig's Mail and
// Events; without them a firing is recorded and logged only.
func (p *Platform) budgetAlerts() *budgets.Alerts {
	l := ledger.NewLedger(p.pool, nil)
	return budgets.NewAlerts(budgets.AlertsConfig{Pool: p.pool, Accounts: p.accounts, Log: p.log.With("role", "alerts"),
		Events: p.webhooks, Mail: p.outbox,
		Balance: func(ctx context.Context, accountID string) (money.BigPico, error) {
			id, err := l.AccountFor(ctx, ledger.AccountCustomerCredit, accountID)
			if err != nil {
				return money.BigPico{}, err
			}
			return l.Balance(ctx, id)
		}})
}

// defaultReconcileEvery is how often Run reconciles the gateway's record with the meter.
const defaultReconcileEvery = 30 * time.Second

// reconcile compares what the gateway saw with what the meter billed, every reconcileEvery
// until ctx ends.
func (p *Platform) reconcile(ctx context.Context) {
	t := time.NewTicker(p.reconcileEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		res, err := p.requestLog.Reconcile(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			p.log.Warn("reconciling the gateway's record with the meter failed", "err", err)
		case res.Flagged > 0:
			p.log.Warn("gateway requests flagged for review: their usage differs from the metered usage",
				"flagged", res.Flagged, "matched", res.Matched, "unmetered", res.Unmetered)
		}
	}
}

// RigCredentials gives a provider what its agent needs: where the rigs' entry point is (never with the
// platform's own user and password), the rig's user and the password of its credential's current issue, and the
// key that verifies the offering's route tickets (never the platform's). The password is the one the platform's
// answer to the auth callout checks; without GPUMARKET_RIG_KEY on an external NATS there is none to show.
func (p *Platform) RigCredentials(ctx context.Context, offeringID string) (web.RigCredential, error) {
	cred := web.RigCredential{NATSURL: p.natsURL, NATSUser: events.RigUsername(offeringID),
		OfferingKey: hex.EncodeToString(ticket.OfferingKey(p.cfg.TicketKey, offeringID)), Reissuable: p.rigRevoker != nil}
	if p.natsServer != nil || len(p.cfg.RigKey) >= 32 {
		_, issue, err := p.catalog.RigCredentialIssue(ctx, offeringID)
		if err != nil {
			return web.RigCredential{}, err
		}
		cred.NATSPassword = events.RigPasswordIssue(p.cfg.RigKey, offeringID, issue)
	}
	return cred, nil
}

// ReissueRigCredential moves the provider's rig on to its credential's next issue and closes the connections the
// earlier one opened, on every NATS node: from now on the auth callout lets the rig in with the new password only.
func (p *Platform) ReissueRigCredential(ctx context.Context, providerAccountID, offeringID string) error {
	if p.rigRevoker == nil {
		return services.Errorf(services.CodeUnavailable,
			"This platform's NATS is run by its operator: ask them for a new password for your rig.")
	}
	issue, err := p.catalog.ReissueRigCredential(ctx, providerAccountID, offeringID)
	if err != nil {
		return err
	}
	closed, err := p.rigRevoker.Disconnect(ctx, events.RigUsername(offeringID))
	if err != nil {
		return err
	}
	p.log.Info("rig credential re-issued", "offering", offeringID, "issue", issue, "connections_closed", closed)
	return nil
}

// rigOf tells the auth callout whose offering a rig serves and which issue of its credential is valid.
func (p *Platform) rigOf(ctx context.Context, offeringID string) (string, int, bool) {
	provider, issue, err := p.catalog.RigCredentialIssue(ctx, offeringID)
	if err != nil && services.ErrorCode(err) != services.CodeNotFound {
		p.log.Warn("a rig's listing could not be read; its connection is refused", "offering", offeringID, "err", err)
	}
	return provider, issue, err == nil
}

// localNATSURL is where this process reaches the embedded server it started: its listen address, or loopback when
// it listens on every address.
func localNATSURL(s *server.Server) string {
	addr := s.Addr().(*net.TCPAddr)
	host := addr.IP.String()
	if addr.IP.IsUnspecified() {
		host = "127.0.0.1"
		if addr.IP.To4() == nil {
			host = "::1"
		}
	}
	return "nats://" + net.JoinHostPort(host, strconv.Itoa(addr.Port))
}

func unspecifiedHost(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

func withUserInfo(rawURL, user, password string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL
	}
	u.User = url.UserPassword(user, password)
	return u.String()
}

// withoutUserInfo drops any user, password or token from a NATS URL, or from each of a
// comma-separated list of them.
func withoutUserInfo(rawURLs string) string {
	parts := strings.Split(rawURLs, ",")
	for i, raw := range parts {
		raw = strings.TrimSpace(raw)
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			// Not a URL we can read: keep only what follows the last @, if any.
			if at := strings.LastIndex(raw, "@"); at >= 0 {
				raw = raw[at+1:]
			}
			parts[i] = raw
			continue
		}
		u.User = nil
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}

func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// URL is where the platform answers, for people and tests.
func (p *Platform) URL() string {
	addr := p.listener.Addr().(*net.TCPAddr)
	host := addr.IP.String()
	if addr.IP.IsUnspecified() {
		host = "localhost"
	}
	return fmt.Sprintf("http://%s", net.JoinHostPort(host, fmt.Sprint(addr.Port)))
}

// journal writes a month's journal of ledger postings for finance's download.
func (p *Platform) journal(ctx context.Context, period documents.Period, w io.Writer) error {
	return documents.WriteJournal(ctx, p.pool, period, w)
}

// Seed loads the demo data.
func (p *Platform) Seed(ctx context.Context) error {
	return demo.Seed(ctx, p.accounts, p.catalog, time.Now())
}

// SeedHistory adds what is missing of the demo's past traffic (services/demo/history), its
// route tickets signed with the platform's ticket key. The demo data must be seeded first.
func (p *Platform) SeedHistory(ctx context.Context) (history.Result, error) {
	return history.Seed(ctx, history.Config{Pool: p.pool, TicketKey: p.cfg.TicketKey, Log: p.log}, time.Now())
}

// openMeter ensures the usage streams and builds the meter, which feeds the routers what it stores.
func (p *Platform) openMeter(ctx context.Context) (*metering.Meter, error) {
	signer, err := ticket.NewSigner(p.cfg.TicketKey)
	if err != nil {
		return nil, err
	}
	cons, err := usageevent.EnsureStreams(ctx, p.js, usageevent.StreamOptions{
		Replicas: p.cfg.StreamReplicas, DuplicateWindow: p.cfg.StreamDuplicateWindow, AckWait: p.cfg.StreamAckWait,
		MaxPendingPerRig: p.cfg.StreamMaxPendingPerRig, Log: p.log.With("role", "meter"),
	})
	if err != nil {
		return nil, err
	}
	log := p.log.With("role", "meter")
	// Each committed batch's stored events go to every gateway's router on core NATS (metering.Feed), in this
	// process or another.
	p.feed = metering.NewFeed(p.nc, log)
	return metering.NewMeter(metering.MeterConfig{
		Pool: p.pool, Ledger: ledger.NewLedger(p.pool, nil), Tickets: signer, JS: p.js, Consumer: cons,
		Log: log, Metrics: metering.NewMetrics(p.registry), OnCommit: p.feed.OnCommit,
		RecordWait: p.cfg.MeterRecordWait,
	}), nil
}
