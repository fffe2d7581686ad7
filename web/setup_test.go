package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/credits/stripemock/stripemocktest"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/batch"
	"github.com/gpumarket/gpumarket/services/benchmarks"
	"github.com/gpumarket/gpumarket/services/budgets"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/documents"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/payouts"
	"github.com/gpumarket/gpumarket/services/performance"
	"github.com/gpumarket/gpumarket/services/reports"
	"github.com/gpumarket/gpumarket/services/webhooks"
	"github.com/gpumarket/gpumarket/web"
	"github.com/gpumarket/gpumarket/web/gateway"
)

// webhookSecret signs the Stripe events of the web tests.
const webhookSecret = "whsec_test_web"

var (
	stripeMock stripemocktest.Shared
)

// stripeMockURL starts one stripe-mock for the package's tests, stopped by TestMain.
func stripeMockURL(t *testing.T) string { return stripeMock.URL(t) }

func TestMain(m *testing.M) {
	code := m.Run()
	stripeMock.Stop()
	os.Exit(code)
}

// fastHasher keeps argon2id but with tiny parameters, so tests that log in often stay quick.
var fastHasher = accounts.PasswordHasher{MemoryKiB: 64, Time: 1, Threads: 1}

// env is a running web server on a fresh database with the demo data.
type env struct {
	srv    *httptest.Server
	server *web.Server
	// gateway serves /v1 beside server, as the platform mounts them (gateway.Mount).
	gateway  *gateway.Gateway
	ledger   *ledger.Ledger
	credits  *credits.Credits
	pool     *pgxpool.Pool
	accounts *accounts.Service
	catalog  *catalog.Service
	payouts  *payouts.Service
	// invoicing is joined to payouts both ways, as the platform joins them: approving a
	// statement pays it through payouts, and payouts records it paid through invoicing.
	invoicing *invoicing.Service
	audit     *audit.Log
	webhooks  *webhooks.Service
	// topups is auto top-up, whose worker a test runs by hand (RunOnce).
	topups *credits.AutoTopup
	// mail holds the e-mails the platform queued (invitations).
	mail *sentMail
}

// testSeller is the platform's details on the web tests' documents.
var testSeller = invoicing.Party{LegalName: "gpumarket Test Ltd", Address: "1 Dock Road\nDublin D01 X2Y3", Country: "IE",
	VATID: "IE1234567FA"}

// testMetricsToken is the bearer token /metrics asks for in the web tests.
const testMetricsToken = "metrics-token-for-the-web-tests"

func setup(t *testing.T) *env { return setupWith(t, nil) }

// qualify makes the offering's rig active, as its passing the platform's probes does: no rig runs in these tests.
func (e *env) qualify(t *testing.T, offeringID string) {
	t.Helper()
	if err := e.catalog.MarkQualified(context.Background(), offeringID); err != nil {
		t.Fatal(err)
	}
}

// setupWith is setup with the web configuration changed by configure before the server is
// built: its accounts, payments and gateway are there to change, on the test's database.
func setupWith(t *testing.T, configure func(*web.Config, *pgxpool.Pool)) *env {
	t.Helper()
	pool := dbtest.New(t)
	sent := &sentMail{}
	acc, err := accounts.NewService(pool, accounts.Config{SessionKey: []byte(strings.Repeat("k", 32)), Hasher: fastHasher,
		Outbox: sent, SiteURL: func() string { return "http://gpumarket.test" }})
	if err != nil {
		t.Fatal(err)
	}
	cat := catalog.NewService(pool, catalog.Config{})
	if err := demo.Seed(context.Background(), acc, cat, time.Now()); err != nil {
		t.Fatal(err)
	}
	// Under `gpumarket dev` the platform's probes qualify the demo's rigs; here no rig runs, and the pages are
	// about rigs that qualified.
	seeded, err := cat.ListActive(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range seeded {
		if err := cat.MarkQualified(context.Background(), o.ID); err != nil {
			t.Fatal(err)
		}
	}
	ledger := ledger.NewLedger(pool, nil)
	cr := credits.NewCredits(pool, ledger, credits.NewStripeCheckout("sk_test_web", stripeMockURL(t)), nil)
	auditLog := audit.New(pool, nil)
	// The demo's providers earn a few dollars a month: their statements pay out from $1, as
	// under gpumarket dev.
	// Webhooks may go to this machine's test receivers, and are tried again at once.
	hooks := webhooks.New(webhooks.Config{Pool: pool, Key: []byte(strings.Repeat("w", 32)), AllowPrivate: true,
		Schedule: []time.Duration{10 * time.Millisecond}})
	inv := invoicing.New(invoicing.Config{Pool: pool, Ledger: ledger, Audit: auditLog, Seller: testSeller, MinimumPayout: 1_00,
		Events: hooks})
	po := payouts.NewService(payouts.Config{Pool: pool, Ledger: ledger, Statements: inv, Events: hooks,
		Stripe: payouts.NewStripeConnect(credits.NewStripeAPI("sk_test_web", stripeMockURL(t)))})
	inv.PayWith(po)
	webhook := credits.NewStripeWebhook(cr, []string{webhookSecret})
	webhook.On("account.updated", po.AccountUpdated)
	topups := credits.NewAutoTopup(credits.TopupConfig{Pool: pool, Ledger: ledger,
		Cards: credits.NewStripeCards(credits.NewStripeAPI("sk_test_web", stripeMockURL(t)))})
	webhook.WithAutoTopup(topups)
	payments := web.Payments{Credits: cr, Ledger: ledger, Webhook: webhook, Topups: topups, Payouts: po,
		LocalWebhookSecret: webhookSecret}
	cfg := web.Config{Accounts: acc, Catalog: cat, Payments: payments, Usage: metering.NewReports(pool),
		Budgets: budgets.NewService(pool, acc, nil),
		Ready:   []web.ReadyCheck{{Name: "postgres", Check: pool.Ping}}, MetricsToken: testMetricsToken,
		Invoicing: inv, Audit: auditLog, Journal: func(ctx context.Context, p documents.Period, w io.Writer) error {
			return documents.WriteJournal(ctx, pool, p, w)
		}, Performance: performance.NewService(pool, cat), Reports: reports.New(pool),
		Batches:    batch.NewService(batch.Config{Pool: pool, Storage: batch.LocalDir{Dir: t.TempDir()}}),
		Benchmarks: benchmarks.NewService(pool, cat, nil), Webhooks: hooks}
	if configure != nil {
		configure(&cfg, pool)
	}
	// A changed key is forgotten by the gateway at once, as the platform's own gateway is told.
	changes := &forgetAndTell{next: cfg.KeyChanges}
	cfg.KeyChanges = changes
	h := web.New(cfg)
	gw := gateway.New(gateway.Config{Accounts: cfg.Accounts, Batches: cfg.Batches, Log: cfg.Log, Now: cfg.Now,
		Middleware: h.EdgeMiddleware(), IPExtractor: h.IPExtractor()})
	changes.gw = gw
	srv := httptest.NewServer(gateway.Mount(gw, h))
	t.Cleanup(srv.Close)
	return &env{srv: srv, server: h, gateway: gw, pool: pool, accounts: cfg.Accounts, catalog: cat, ledger: ledger,
		credits: cfg.Payments.Credits, payouts: cfg.Payments.Payouts, invoicing: cfg.Invoicing, audit: cfg.Audit,
		webhooks: cfg.Webhooks, topups: cfg.Payments.Topups, mail: sent}
}

// forgetAndTell makes the test's gateway forget a changed key, then tells next, if any.
type forgetAndTell struct {
	gw   *gateway.Gateway
	next web.KeyChanges
}

func (f *forgetAndTell) KeyChanged(ctx context.Context, keyID string) error {
	f.gw.ForgetKey(keyID)
	if f.next == nil {
		return nil
	}
	return f.next.KeyChanged(ctx, keyID)
}

// token logs a user in through the API and returns the bearer token.
func (e *env) token(t *testing.T, email, password string) string {
	t.Helper()
	var out struct {
		Token string `json:"token"`
	}
	res := e.call(t, "", http.MethodPost, "/api/auth/login", map[string]string{"email": email, "password": password}, &out)
	if res.StatusCode != http.StatusOK || out.Token == "" {
		t.Fatalf("login %s: status %d", email, res.StatusCode)
	}
	return out.Token
}

// call sends a JSON request with an optional bearer token and decodes the JSON answer into out.
func (e *env) call(t *testing.T, token, method, path string, body any, out any) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decode %q: %v", method, path, raw, err)
		}
	}
	return res
}

// browserClient is an HTTP client with cookies that does not follow redirects, like a form
// post seen by a test.
func browserClient(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
