package main

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	netmail "net/mail"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/services/batch"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/credits/stripemock"
	"github.com/gpumarket/gpumarket/services/events/natsserver"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/services/mail"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/web/gateway"
)

// Config is everything the platform reads from its environment. This file is the only one of the
// binary that reads the environment (configFromEnv and logLevel); packages under services/ and web/
// take their settings from here as typed values. Secrets come only from here. README.md's
// configuration table lists every variable read here, and TestReadmeConfigurationTables keeps it so.
type Config struct {
	DatabaseURL string
	NATSURL     string
	Addr        string
	DataDir     string
	// DownloadsDir (GPUMARKET_DOWNLOADS_DIR) holds the agent's binaries the platform publishes at /downloads/
	// (docs/agent-distribution.md); DataDir/downloads when unset.
	DownloadsDir string
	// NATSHost and NATSPort are where the embedded NATS listens: the rigs' entry point, which the platform's own
	// processes reach too (docs/usage-stream.md, "The rigs' entry point"). GPUMARKET_RIG_NATS_ADDR sets both;
	// else NATSHost is "" (127.0.0.1) and NATSPort is GPUMARKET_NATS_PORT.
	NATSHost   string
	NATSPort   int
	SessionKey []byte
	// RigNATSURL (GPUMARKET_RIG_NATS_URL) is the NATS address providers are shown for their rigs, one URL or
	// several comma-separated, without credentials: the entry point's public name. Empty shows the embedded
	// server's own listen URL, or NATS_URL without its credentials.
	RigNATSURL string
	// NATSSystemURL (GPUMARKET_NATS_SYSTEM_URL) is NATS_URL's servers with the system account's user and password:
	// where a web process closes a rig's connections on every node when its credential is re-issued, its offering
	// delisted or the rig shut out (rigauth.Revoker). Empty on an external NATS: the rig is then refused only when
	// it reconnects, and re-issuing is not offered. The embedded server makes its own.
	NATSSystemURL string
	// RigTLS (GPUMARKET_RIG_NATS_WSS_ADDR, host:port, with GPUMARKET_RIG_NATS_TLS_CERT and GPUMARKET_RIG_NATS_TLS_KEY)
	// is the embedded server's entry point for rigs over wss://, beside its client port; nil for none.
	RigTLS *natsserver.TLSEntry
	// Payments is "test" (GPUMARKET_PAYMENTS=test) for stripe-mock and the local test-payment
	// page; "" takes real payments and needs StripeSecretKey. See paymentsMode.
	Payments string
	// Stripe: the secret key takes real payments on Stripe Checkout.
	StripeSecretKey      string
	StripeWebhookSecrets []string // several, comma-separated, while a secret is rotated
	StripeAPIURL         string   // a stripe-mock already running; empty starts one when needed
	// StripeMockBin (STRIPE_MOCK_BIN) and StripeMockDirs (Go's bin folders, from GOBIN, GOPATH and HOME) are
	// where stripemock.Find looks for the stripe-mock the platform starts in test mode.
	StripeMockBin  string
	StripeMockDirs []string
	PublicURL      string
	// TopupEvery is how often auto top-up looks at the balances of the accounts that turned it on
	// (GPUMARKET_TOPUP_EVERY; docs/auto-topup.md).
	TopupEvery time.Duration
	// SMTP (GPUMARKET_SMTP_URL, such as smtp://user:password@host:587 or smtps://…:465) is the server the
	// platform's e-mail goes through; nil when unset: `gpumarket dev` then sends it to a mail catcher of its own
	// (MailCatcher), and `serve` keeps it queued, with a warning, until one is set (docs/email.md).
	SMTP *mail.SMTP
	// MailFrom (GPUMARKET_MAIL_FROM) is the From of every e-mail, "GPU Market <noreply@example.com>";
	// required with GPUMARKET_SMTP_URL.
	MailFrom string
	// MailCatcher says to catch the e-mail on this machine when no SMTP server is set: `gpumarket dev` sets it.
	MailCatcher bool

	Roles     Roles
	TicketKey []byte // signs and verifies route tickets: GPUMARKET_TICKET_KEY
	// RigKey (GPUMARKET_RIG_KEY) derives each rig's NATS password and the key that signs the platform's answers
	// to the auth callout (rigauth.Issuer), on the embedded server and a cluster alike.
	RigKey         []byte
	StreamReplicas int // 3 on a NATS cluster
	// StreamDuplicateWindow (GPUMARKET_STREAM_DUPLICATE_WINDOW) and StreamAckWait
	// (GPUMARKET_STREAM_ACK_WAIT) override the usage stream's deduplication window and the
	// meter consumer's ack wait; zero keeps metering's defaults. The meter applies them to the
	// stream at every start, so a process started without them puts the defaults back.
	StreamDuplicateWindow time.Duration
	StreamAckWait         time.Duration
	// MeterRecordWait (GPUMARKET_METER_RECORD_WAIT) is how long the meter waits for the gateway's record of a
	// request before it bills the rig's report within the ticket's bounds alone and flags it; zero keeps
	// metering.DefaultRecordWait (2 minutes).
	MeterRecordWait time.Duration
	// The per-rig limits on the usage stream (docs/usage-stream.md): StreamMaxPendingPerRig
	// (GPUMARKET_STREAM_MAX_PENDING_PER_RIG) events of one rig held unmetered, StreamMaxRatePerRig
	// (GPUMARKET_STREAM_MAX_RATE_PER_RIG) events a second one rig may publish, and StreamRateCooldown
	// (GPUMARKET_STREAM_RATE_COOLDOWN) how long a rig over its rate is shut out; zero keeps the defaults
	// (usage.DefaultMaxPendingPerRig, riglimits.DefaultMaxRate, riglimits.DefaultCooldown).
	StreamMaxPendingPerRig int64
	StreamMaxRatePerRig    float64
	StreamRateCooldown     time.Duration
	// RateLimitRPS (GPUMARKET_RATE_LIMIT_RPS) and RateLimitBurst (GPUMARKET_RATE_LIMIT_BURST) are the /v1
	// gateway's token bucket per API key: requests per second sustained, and requests at once. configFromEnv
	// defaults them to gateway.DefaultKeyRatePerSecond and gateway.DefaultKeyRateBurst; zero means those defaults too.
	// Each gateway process keeps its own buckets, so a key's limit is per process (docs/deploy.md, "Replicas").
	RateLimitRPS   float64
	RateLimitBurst int
	// BatchConcurrency (GPUMARKET_BATCH_CONCURRENCY) is how many batch lines this process sends at once: the
	// share of capacity batches may take (docs/batches.md); zero means batch.DefaultConcurrency.
	BatchConcurrency int
	// BatchS3 is the S3-compatible store of batch files (docs/batches.md, "The S3 store"), read by batchS3FromEnv:
	// GPUMARKET_BATCH_S3_ENDPOINT (a URL, its scheme saying TLS), _BUCKET, _PREFIX, _REGION, _CACHE_MB, and the
	// secrets GPUMARKET_BATCH_S3_ACCESS_KEY and _SECRET_KEY. With no endpoint the files stay under the data
	// directory, which only this process sees. The read cache's directory is set when the store opens.
	BatchS3 batch.S3Config
	// routingFlushEvery overrides how often routing writes figures and moves tiers; zero keeps its default.
	// bench-batch holds its zero-latency batch offering in the batch tier with it.
	routingFlushEvery time.Duration
	// TrustedProxies (GPUMARKET_TRUSTED_PROXIES, comma-separated CIDRs) are the proxies whose
	// X-Forwarded-For names the client; none means the connection's address is the client's.
	TrustedProxies []*net.IPNet
	// MetricsToken (GPUMARKET_METRICS_TOKEN) serves /metrics to requests bearing it; MetricsAddr
	// (GPUMARKET_METRICS_ADDR) serves it on a listener of its own. With neither, /metrics is not
	// served.
	MetricsToken string
	MetricsAddr  string
	// Invoicing is the documents' numbering, the close's grace, the minimum payout and the seller's details.
	Invoicing InvoicingConfig
	// GOGCSet says the GOGC variable is set: the Go runtime follows it, and a process that embeds NATS keeps it
	// rather than natsserver.EmbeddedGCPercent.
	GOGCSet bool
	// TestDatabaseURL (GPUMARKET_TEST_DATABASE_URL) is the admin connection bench-gateway and bench-batch create
	// their scratch databases through; empty finds or starts a PostgreSQL as `gpumarket dev postgres` does.
	TestDatabaseURL string
	// UsageRetentionMonths (GPUMARKET_USAGE_RETENTION_MONTHS) is how many whole months a month's raw usage rows are
	// kept after it ends, then dropped once its invoices and statements are final; 0, the default, keeps them
	// forever. Rollups and documents are always kept (docs/usage-storage.md, "Retention").
	UsageRetentionMonths int
	// WebhookKey (GPUMARKET_WEBHOOK_KEY, at least 32 bytes) seals the signing secrets of accounts' webhook
	// endpoints in the database; empty derives it from SessionKey (docs/webhooks.md, "Secrets").
	WebhookKey []byte
	// WebhooksAllowPrivate (GPUMARKET_WEBHOOKS_ALLOW_PRIVATE=1) lets webhook endpoints be plain http and
	// reach loopback, private and link-local addresses: development and tests only. `make run` sets it.
	WebhooksAllowPrivate bool
	// WebhookRetrySchedule (GPUMARKET_WEBHOOK_RETRY_SCHEDULE, comma-separated durations) is the wait after each
	// failed attempt of a webhook delivery; nil keeps webhooks.DefaultSchedule.
	WebhookRetrySchedule []time.Duration
	// MailRetention (GPUMARKET_MAIL_RETENTION_DAYS, whole days) is how long a sent e-mail stays in the outbox
	// before the periodic cleanup deletes it; 0 keeps mail.DefaultSentRetention (30 days).
	MailRetention time.Duration
	// WebhookLogRetention (GPUMARKET_WEBHOOK_LOG_RETENTION_DAYS, whole days) is how long a finished webhook
	// delivery and its attempts stay in the log before the periodic cleanup deletes them; 0 keeps
	// webhooks.DefaultLogRetention (30 days).
	WebhookLogRetention time.Duration

	// wrapRigCalls, set only by the benchmark harness (bench-gateway -compare-hop), wraps how the gateway calls
	// the rigs; nil, as everywhere else, leaves the calls over NATS (docs/rig-transport.md).
	wrapRigCalls func(gateway.RigCaller) gateway.RigCaller
}

// PaymentsTest is the value of GPUMARKET_PAYMENTS that runs payments on stripe-mock and the
// local test-payment page, where no card is charged.
const PaymentsTest = "test"

// paymentsMode says whether payments run in test mode, or why the configuration cannot take
// payments at all. Test mode is never a fallback: it runs only when asked for in so many words,
// so that a production start without its Stripe key stops rather than hand out credit for
// nothing (see docs/web-security.md, "Test payments").
func (c Config) paymentsMode() (test bool, err error) {
	switch {
	case c.Payments == PaymentsTest && c.StripeSecretKey != "":
		return false, errors.New("GPUMARKET_PAYMENTS=test and STRIPE_SECRET_KEY are both set: unset GPUMARKET_PAYMENTS to take real payments with the key, or unset the key for test payments")
	case c.Payments == PaymentsTest:
		return true, nil
	case c.StripeSecretKey == "":
		return false, errors.New("no STRIPE_SECRET_KEY, so no payments can be taken: set it, or set GPUMARKET_PAYMENTS=test for test payments on stripe-mock (no card is charged, the credit is not real)")
	}
	return false, nil
}

// Roles says which parts of the platform a process runs: GPUMARKET_ROLES, a comma-separated
// subset of web, gateway and meter, in any order (default: all three). See docs/deploy.md
// ("The processes and their roles").
//   - web: the pages, the JSON API and payments (package web); /v1 answers 503 without gateway.
//   - gateway: the OpenAI-compatible /v1 gateway (package web/gateway) with its routing table,
//     the request log and its reconciliation, and the batch scheduler.
//   - meter: usage events from NATS into priced usage and the ledger.
//
// Every process serves /healthz, /readyz and, when configured, /metrics.
type Roles struct {
	Web, Gateway, Meter bool
}

// allRoles is what a process runs when GPUMARKET_ROLES is unset.
var allRoles = Roles{Web: true, Gateway: true, Meter: true}

func parseRoles(s string) (Roles, error) {
	if strings.TrimSpace(s) == "" {
		return allRoles, nil
	}
	var r Roles
	for _, part := range strings.Split(s, ",") {
		switch strings.ToLower(strings.TrimSpace(part)) {
		case "web":
			r.Web = true
		case "gateway":
			r.Gateway = true
		case "meter":
			r.Meter = true
		default:
			return r, fmt.Errorf("GPUMARKET_ROLES: unknown role %q (use web, gateway and meter, comma-separated)", strings.TrimSpace(part))
		}
	}
	return r, nil
}

func (r Roles) String() string {
	var parts []string
	if r.Web {
		parts = append(parts, "web")
	}
	if r.Gateway {
		parts = append(parts, "gateway")
	}
	if r.Meter {
		parts = append(parts, "meter")
	}
	return strings.Join(parts, ",")
}

func configFromEnv() (Config, error) {
	c := Config{
		DatabaseURL: os.Getenv("DATABASE_URL"),
		NATSURL:     os.Getenv("NATS_URL"),
		Addr:        envOr("GPUMARKET_ADDR", ":8080"),
		DataDir:     envOr("GPUMARKET_DATA_DIR", ".data"),
		NATSPort:    4222,
		SessionKey:  []byte(os.Getenv("GPUMARKET_SESSION_KEY")),

		StripeSecretKey: os.Getenv("STRIPE_SECRET_KEY"),
		StripeAPIURL:    os.Getenv("STRIPE_API_URL"),
		StripeMockBin:   os.Getenv("STRIPE_MOCK_BIN"),
		StripeMockDirs:  stripemock.GoBinDirs(os.Getenv("GOBIN"), os.Getenv("GOPATH"), os.Getenv("HOME")),
		TestDatabaseURL: os.Getenv("GPUMARKET_TEST_DATABASE_URL"),
		PublicURL:       strings.TrimRight(os.Getenv("GPUMARKET_PUBLIC_URL"), "/"),
		TicketKey:       []byte(os.Getenv("GPUMARKET_TICKET_KEY")),
		RigKey:          []byte(os.Getenv("GPUMARKET_RIG_KEY")),
		NATSSystemURL:   os.Getenv("GPUMARKET_NATS_SYSTEM_URL"),
		StreamReplicas:  1,
		RateLimitRPS:    gateway.DefaultKeyRatePerSecond,
		RateLimitBurst:  gateway.DefaultKeyRateBurst,
		Payments:        os.Getenv("GPUMARKET_PAYMENTS"),
		MetricsToken:    os.Getenv("GPUMARKET_METRICS_TOKEN"),
		MetricsAddr:     os.Getenv("GPUMARKET_METRICS_ADDR"),
	}
	_, c.GOGCSet = os.LookupEnv("GOGC")
	if c.Payments != "" && c.Payments != PaymentsTest {
		return c, fmt.Errorf("GPUMARKET_PAYMENTS=%q: the only value is test (stripe-mock and the local test-payment page); unset it to take real payments with STRIPE_SECRET_KEY", c.Payments)
	}
	if c.MetricsToken != "" && len(c.MetricsToken) < 16 {
		return c, errors.New("GPUMARKET_METRICS_TOKEN is shorter than 16 characters: use a long random token, such as `openssl rand -hex 24`")
	}
	proxies, err := parseTrustedProxies(os.Getenv("GPUMARKET_TRUSTED_PROXIES"))
	if err != nil {
		return c, err
	}
	c.TrustedProxies = proxies
	roles, err := parseRoles(os.Getenv("GPUMARKET_ROLES"))
	if err != nil {
		return c, err
	}
	c.Roles = roles
	if v := os.Getenv("GPUMARKET_BATCH_CONCURRENCY"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1024 {
			return c, fmt.Errorf("GPUMARKET_BATCH_CONCURRENCY=%q: use 1 to 1024 lines at once", v)
		}
		c.BatchConcurrency = n
	}
	if c.BatchS3, err = batchS3FromEnv(); err != nil {
		return c, err
	}
	if err := c.readWebhooks(os.Getenv("GPUMARKET_WEBHOOK_KEY"), os.Getenv("GPUMARKET_WEBHOOKS_ALLOW_PRIVATE"),
		os.Getenv("GPUMARKET_WEBHOOK_RETRY_SCHEDULE")); err != nil {
		return c, err
	}
	if c.SMTP, c.MailFrom, err = mailFromEnv(); err != nil {
		return c, err
	}
	if v := os.Getenv("GPUMARKET_USAGE_RETENTION_MONTHS"); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 || n > 1200 {
			return c, fmt.Errorf("GPUMARKET_USAGE_RETENTION_MONTHS=%q: use a whole number of months, such as 13, or 0 to keep usage rows forever", v)
		}
		c.UsageRetentionMonths = n
	}
	if c.MailRetention, err = envDays("GPUMARKET_MAIL_RETENTION_DAYS"); err != nil {
		return c, err
	}
	if c.WebhookLogRetention, err = envDays("GPUMARKET_WEBHOOK_LOG_RETENTION_DAYS"); err != nil {
		return c, err
	}
	if v := os.Getenv("GPUMARKET_STREAM_REPLICAS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 5 {
			return c, fmt.Errorf("GPUMARKET_STREAM_REPLICAS=%q: use 1 to 5", v)
		}
		c.StreamReplicas = n
	}
	if c.StreamDuplicateWindow, err = envDuration("GPUMARKET_STREAM_DUPLICATE_WINDOW"); err != nil {
		return c, err
	}
	if c.StreamAckWait, err = envDuration("GPUMARKET_STREAM_ACK_WAIT"); err != nil {
		return c, err
	}
	if c.MeterRecordWait, err = envDuration("GPUMARKET_METER_RECORD_WAIT"); err != nil {
		return c, err
	}
	if c.StreamRateCooldown, err = envDuration("GPUMARKET_STREAM_RATE_COOLDOWN"); err != nil {
		return c, err
	}
	if c.TopupEvery, err = envDuration("GPUMARKET_TOPUP_EVERY"); err != nil {
		return c, err
	}
	if c.TopupEvery == 0 {
		c.TopupEvery = credits.DefaultTopupEvery
	}
	if v := os.Getenv("GPUMARKET_STREAM_MAX_PENDING_PER_RIG"); v != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 1 {
			return c, fmt.Errorf("GPUMARKET_STREAM_MAX_PENDING_PER_RIG=%q: use a whole number of usage events, at least 1, such as 10000", v)
		}
		c.StreamMaxPendingPerRig = n
	}
	if v := os.Getenv("GPUMARKET_STREAM_MAX_RATE_PER_RIG"); v != "" {
		r, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsNaN(r) || math.IsInf(r, 0) || r <= 0 {
			return c, fmt.Errorf("GPUMARKET_STREAM_MAX_RATE_PER_RIG=%q: use a positive number of usage events per second per rig, such as 2000", v)
		}
		c.StreamMaxRatePerRig = r
	}
	if v := os.Getenv("GPUMARKET_RATE_LIMIT_RPS"); v != "" {
		r, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsNaN(r) || math.IsInf(r, 0) || r <= 0 {
			return c, fmt.Errorf("GPUMARKET_RATE_LIMIT_RPS=%q: use a positive number of requests per second per API key, such as 50 or 0.5", v)
		}
		c.RateLimitRPS = r
	}
	if v := os.Getenv("GPUMARKET_RATE_LIMIT_BURST"); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return c, fmt.Errorf("GPUMARKET_RATE_LIMIT_BURST=%q: use a whole number of requests, at least 1, such as 100", v)
		}
		c.RateLimitBurst = n
	}
	for _, sec := range strings.Split(os.Getenv("STRIPE_WEBHOOK_SECRET"), ",") {
		if sec = strings.TrimSpace(sec); sec != "" {
			c.StripeWebhookSecrets = append(c.StripeWebhookSecrets, sec)
		}
	}
	if c.Invoicing, err = invoicingConfigFromEnv(); err != nil {
		return c, err
	}
	if v := os.Getenv("GPUMARKET_NATS_PORT"); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 0 || p > 65535 {
			return c, fmt.Errorf("GPUMARKET_NATS_PORT=%q is not a port number", v)
		}
		c.NATSPort = p
	}
	if err := c.readRigEntryPoint(os.Getenv("GPUMARKET_RIG_NATS_ADDR"), os.Getenv("GPUMARKET_NATS_PORT") != "",
		os.Getenv("GPUMARKET_RIG_NATS_URL")); err != nil {
		return c, err
	}
	if c.RigTLS, err = readRigTLS(c.NATSURL != "", os.Getenv("GPUMARKET_RIG_NATS_WSS_ADDR"),
		os.Getenv("GPUMARKET_RIG_NATS_TLS_CERT"), os.Getenv("GPUMARKET_RIG_NATS_TLS_KEY")); err != nil {
		return c, err
	}
	if c.NATSSystemURL != "" && c.NATSURL == "" {
		return c, errors.New("GPUMARKET_NATS_SYSTEM_URL names the system account's user on an external NATS, and NATS_URL is unset: the embedded server has its own; set NATS_URL or unset GPUMARKET_NATS_SYSTEM_URL")
	}
	abs, err := filepath.Abs(c.DataDir)
	if err != nil {
		return c, err
	}
	c.DataDir = abs
	if dir := os.Getenv("GPUMARKET_DOWNLOADS_DIR"); dir != "" {
		if c.DownloadsDir, err = filepath.Abs(dir); err != nil {
			return c, err
		}
	}
	return c, nil
}

// invoicingConfigFromEnv reads the documents' numbering, the close's grace, the minimum payout and the seller.
func invoicingConfigFromEnv() (InvoicingConfig, error) {
	c := InvoicingConfig{Grace: invoicing.DefaultGrace, MinimumPayout: invoicing.DefaultMinimumPayout}
	var err error
	if c.InvoiceNumbers, err = numberFormatFromEnv("GPUMARKET_INVOICE_NUMBER_FORMAT", invoicing.DefaultInvoiceNumberFormat,
		"GPUMARKET_INVOICE_FIRST_NUMBER"); err != nil {
		return c, err
	}
	if c.StatementNumbers, err = numberFormatFromEnv("GPUMARKET_STATEMENT_NUMBER_FORMAT", invoicing.DefaultStatementNumberFormat,
		"GPUMARKET_STATEMENT_FIRST_NUMBER"); err != nil {
		return c, err
	}
	if d, err := envDuration("GPUMARKET_INVOICE_GRACE"); err != nil {
		return c, err
	} else if d > 0 {
		c.Grace = d
	}
	if v := strings.TrimSpace(os.Getenv("GPUMARKET_PAYOUT_MINIMUM")); v != "" {
		p, err := money.ParseUSD(v)
		if err != nil || p < 0 || p%money.PicoPerCent != 0 || p > 1_000_000*money.PicoPerUSD {
			return c, fmt.Errorf("GPUMARKET_PAYOUT_MINIMUM=%q: use dollars and cents from 0 to 1000000, such as 10.00", v)
		}
		c.MinimumPayout, c.MinimumPayoutSet = invoicing.Cents(p/money.PicoPerCent), true
	}
	c.Seller = invoicing.Party{
		LegalName: strings.TrimSpace(os.Getenv("GPUMARKET_SELLER_NAME")),
		Address:   strings.NewReplacer(`\n`, "\n", "|", "\n").Replace(strings.TrimSpace(os.Getenv("GPUMARKET_SELLER_ADDRESS"))),
		Country:   strings.ToUpper(strings.TrimSpace(os.Getenv("GPUMARKET_SELLER_COUNTRY"))),
		VATID:     strings.TrimSpace(os.Getenv("GPUMARKET_SELLER_VAT_ID")),
	}
	if c.Seller != (invoicing.Party{}) {
		if err := invoicing.ValidateSeller(c.Seller); err != nil {
			return c, fmt.Errorf("GPUMARKET_SELLER_*: %w", err)
		}
	}
	return c, nil
}

// numberFormatFromEnv reads one series' number layout and first number.
func numberFormatFromEnv(layoutVar, layoutDefault, firstVar string) (invoicing.NumberFormat, error) {
	layout := envOr(layoutVar, layoutDefault)
	first := int64(invoicing.DefaultFirstNumber)
	if v := strings.TrimSpace(os.Getenv(firstVar)); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return invoicing.NumberFormat{}, fmt.Errorf("%s=%q: use a whole number from 1, such as 418 to continue a sequence", firstVar, v)
		}
		first = n
	}
	f, err := invoicing.ParseNumberFormat(layout, first)
	if err != nil {
		return f, fmt.Errorf("%s / %s: %w", layoutVar, firstVar, err)
	}
	return f, nil
}

// readRigTLS reads the embedded server's wss:// entry point for rigs: its address and certificate, all three or none.
func readRigTLS(external bool, addr, certFile, keyFile string) (*natsserver.TLSEntry, error) {
	if addr == "" && certFile == "" && keyFile == "" {
		return nil, nil
	}
	switch {
	case external:
		return nil, errors.New("GPUMARKET_RIG_NATS_WSS_ADDR is the embedded NATS's entry point, and NATS_URL names an external one: its TLS is in its own configuration (deploy/nats/nats.conf)")
	case addr == "" || certFile == "" || keyFile == "":
		return nil, errors.New("set GPUMARKET_RIG_NATS_WSS_ADDR (host:port), GPUMARKET_RIG_NATS_TLS_CERT and GPUMARKET_RIG_NATS_TLS_KEY together, for rigs over wss://")
	}
	host, port, err := net.SplitHostPort(addr)
	n, perr := strconv.Atoi(port)
	if err != nil || perr != nil || n < 1 || n > 65535 || host != "" && net.ParseIP(host) == nil {
		return nil, fmt.Errorf("GPUMARKET_RIG_NATS_WSS_ADDR=%q: use ip:port, such as 0.0.0.0:8443", addr)
	}
	return &natsserver.TLSEntry{Host: host, Port: n, CertFile: certFile, KeyFile: keyFile}, nil
}

// readRigEntryPoint reads where the embedded NATS listens for rigs (GPUMARKET_RIG_NATS_ADDR, host:port) and the URL
// providers are shown for it (GPUMARKET_RIG_NATS_URL).
func (c *Config) readRigEntryPoint(addr string, portSet bool, rigURL string) error {
	if addr = strings.TrimSpace(addr); addr != "" {
		switch {
		case c.NATSURL != "":
			return errors.New("GPUMARKET_RIG_NATS_ADDR is where the embedded NATS listens, and NATS_URL names an external one: unset GPUMARKET_RIG_NATS_ADDR and set GPUMARKET_RIG_NATS_URL to the address your NATS server gives rigs")
		case portSet:
			return errors.New("GPUMARKET_RIG_NATS_ADDR and GPUMARKET_NATS_PORT are both set: GPUMARKET_RIG_NATS_ADDR (host:port) says all, unset GPUMARKET_NATS_PORT")
		}
		host, port, err := net.SplitHostPort(addr)
		n, perr := strconv.Atoi(port)
		if err != nil || perr != nil || n < 0 || n > 65535 {
			return fmt.Errorf("GPUMARKET_RIG_NATS_ADDR=%q: use host:port, such as 0.0.0.0:4222 or 203.0.113.7:4222", addr)
		}
		if host != "" && net.ParseIP(host) == nil {
			return fmt.Errorf("GPUMARKET_RIG_NATS_ADDR=%q: the host must be an IP address of this machine (0.0.0.0 for all of them)", addr)
		}
		if host == "" {
			host = "0.0.0.0"
		}
		c.NATSHost, c.NATSPort = host, n
	}
	u, err := parseRigNATSURL(rigURL)
	if err != nil {
		return err
	}
	c.RigNATSURL = u
	return nil
}

// parseRigNATSURL checks GPUMARKET_RIG_NATS_URL: NATS URLs (nats://, tls://, ws://, wss://) with a host and no
// credentials, comma-separated, since every provider is shown them.
func parseRigNATSURL(raw string) (string, error) {
	if strings.TrimSpace(raw) == "" {
		return "", nil
	}
	var out []string
	for _, part := range strings.Split(raw, ",") {
		part = strings.TrimSpace(part)
		u, err := url.Parse(part)
		switch {
		case err != nil || u.Host == "" || u.Port() == "":
			return "", fmt.Errorf("GPUMARKET_RIG_NATS_URL: %q is not a NATS URL: use scheme://host:port, such as tls://nats.example.com:4222", part)
		case u.Scheme != "nats" && u.Scheme != "tls" && u.Scheme != "ws" && u.Scheme != "wss":
			return "", fmt.Errorf("GPUMARKET_RIG_NATS_URL: %q: the scheme must be nats, tls, ws or wss", part)
		case u.User != nil:
			return "", fmt.Errorf("GPUMARKET_RIG_NATS_URL: %q holds credentials: every provider is shown this URL, so give it none (each rig has its own)", u.Redacted())
		case u.Path != "" && u.Path != "/" || u.RawQuery != "":
			return "", fmt.Errorf("GPUMARKET_RIG_NATS_URL: %q: give only scheme://host:port", part)
		}
		out = append(out, u.Scheme+"://"+u.Host)
	}
	return strings.Join(out, ","), nil
}

// batchS3FromEnv reads the S3 store of batch files; no endpoint is no store, and then no other of its
// settings may be set, so a half-made setting is not silently the local directory.
func batchS3FromEnv() (batch.S3Config, error) {
	c := batch.S3Config{
		Endpoint:  strings.TrimSpace(os.Getenv("GPUMARKET_BATCH_S3_ENDPOINT")),
		Bucket:    strings.TrimSpace(os.Getenv("GPUMARKET_BATCH_S3_BUCKET")),
		Prefix:    strings.TrimSpace(os.Getenv("GPUMARKET_BATCH_S3_PREFIX")),
		Region:    strings.TrimSpace(os.Getenv("GPUMARKET_BATCH_S3_REGION")),
		AccessKey: os.Getenv("GPUMARKET_BATCH_S3_ACCESS_KEY"),
		SecretKey: os.Getenv("GPUMARKET_BATCH_S3_SECRET_KEY"),
	}
	cacheMB := strings.TrimSpace(os.Getenv("GPUMARKET_BATCH_S3_CACHE_MB"))
	if c.Endpoint == "" {
		if c.Bucket != "" || c.Prefix != "" || c.Region != "" || c.AccessKey != "" || c.SecretKey != "" || cacheMB != "" {
			return c, errors.New("GPUMARKET_BATCH_S3_* settings are set but not GPUMARKET_BATCH_S3_ENDPOINT: set the endpoint (such as http://minio:9000) for the S3 store of batch files, or unset them to keep the files in the data directory")
		}
		return c, nil
	}
	if _, _, err := batch.S3Endpoint(c.Endpoint); err != nil {
		return c, fmt.Errorf("GPUMARKET_BATCH_S3_ENDPOINT: %w", err)
	}
	var missing []string
	if c.Bucket == "" {
		missing = append(missing, "GPUMARKET_BATCH_S3_BUCKET")
	}
	if c.AccessKey == "" {
		missing = append(missing, "GPUMARKET_BATCH_S3_ACCESS_KEY")
	}
	if c.SecretKey == "" {
		missing = append(missing, "GPUMARKET_BATCH_S3_SECRET_KEY")
	}
	if len(missing) > 0 {
		return c, fmt.Errorf("GPUMARKET_BATCH_S3_ENDPOINT is set: set %s too", strings.Join(missing, " and "))
	}
	if cacheMB != "" {
		n, err := strconv.ParseInt(cacheMB, 10, 64)
		if err != nil || n < batch.MaxFileBytes>>20 || n > 1<<24 {
			return c, fmt.Errorf("GPUMARKET_BATCH_S3_CACHE_MB=%q: use a whole number of megabytes, at least %d (the largest file), such as 2000", cacheMB, batch.MaxFileBytes>>20)
		}
		c.CacheBytes = n << 20
	}
	return c, nil
}

// parseTrustedProxies reads comma-separated CIDRs (a bare address is one host).
func parseTrustedProxies(s string) ([]*net.IPNet, error) {
	var out []*net.IPNet
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !strings.Contains(part, "/") {
			if ip := net.ParseIP(part); ip != nil {
				bits := 128
				if ip.To4() != nil {
					ip, bits = ip.To4(), 32
				}
				out = append(out, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
				continue
			}
		}
		_, n, err := net.ParseCIDR(part)
		if err != nil {
			return nil, fmt.Errorf("GPUMARKET_TRUSTED_PROXIES: %q is not a network: use CIDRs such as 10.0.0.0/8 or 2001:db8::/32, comma-separated", part)
		}
		out = append(out, n)
	}
	return out, nil
}

// logLevel reads GPUMARKET_LOG_LEVEL (debug, info, warn or error; info when it cannot be read), and whether it
// is set at all. main reads it before the rest, to log the configuration's errors.
func logLevel() (level slog.Level, set bool) {
	v := os.Getenv("GPUMARKET_LOG_LEVEL")
	if err := level.UnmarshalText([]byte(v)); err != nil {
		level = slog.LevelInfo
	}
	return level, v != ""
}

// envOr reads a variable, or def when it is unset or empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// envDuration reads a positive Go duration ("2s", "5m") from the environment; unset is zero.
func envDuration(name string) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: use a positive duration such as 30s or 5m", name, v)
	}
	return d, nil
}

// envDays reads a whole number of days, 1 to 3650, as a duration; unset is 0.
func envDays(name string) (time.Duration, error) {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 3650 {
		return 0, fmt.Errorf("%s=%q: use a whole number of days from 1 to 3650, such as 30", name, v)
	}
	return time.Duration(n) * 24 * time.Hour, nil
}

// readWebhooks reads the webhooks' key, whether private addresses are allowed, and the retry schedule.
func (c *Config) readWebhooks(key, allowPrivate, schedule string) error {
	if key != "" && len(key) < 32 {
		return errors.New("GPUMARKET_WEBHOOK_KEY is shorter than 32 bytes: use a long random key, such as `openssl rand -hex 32`")
	}
	if key != "" {
		c.WebhookKey = []byte(key)
	}
	switch strings.TrimSpace(allowPrivate) {
	case "", "0", "false":
	case "1", "true":
		c.WebhooksAllowPrivate = true
	default:
		return fmt.Errorf("GPUMARKET_WEBHOOKS_ALLOW_PRIVATE=%q: use 1 to allow private addresses (development only), or leave it unset", allowPrivate)
	}
	if strings.TrimSpace(schedule) == "" {
		return nil
	}
	parts := strings.Split(schedule, ",")
	if len(parts) > 20 {
		return fmt.Errorf("GPUMARKET_WEBHOOK_RETRY_SCHEDULE has %d waits: at most 20", len(parts))
	}
	for _, part := range parts {
		d, err := time.ParseDuration(strings.TrimSpace(part))
		if err != nil || d <= 0 || d > 7*24*time.Hour {
			return fmt.Errorf("GPUMARKET_WEBHOOK_RETRY_SCHEDULE=%q: use comma-separated durations such as 5s,5m,30m,2h,5h,10h", schedule)
		}
		c.WebhookRetrySchedule = append(c.WebhookRetrySchedule, d)
	}
	return nil
}

// webhookKey is the key that seals webhook endpoints' secrets: GPUMARKET_WEBHOOK_KEY, else one derived from
// the session key, else none (a process without the web role that only records events).
func (c Config) webhookKey() []byte {
	if len(c.WebhookKey) > 0 {
		return c.WebhookKey
	}
	if len(c.SessionKey) < 32 {
		return nil
	}
	mac := hmac.New(sha256.New, c.SessionKey)
	mac.Write([]byte("gpumarket webhook secrets"))
	return mac.Sum(nil)
}

func (c Config) requireServe() error {
	var missing []string
	if c.DatabaseURL == "" {
		missing = append(missing, "DATABASE_URL")
	}
	if c.Roles.Web && len(c.SessionKey) < 32 {
		missing = append(missing, "GPUMARKET_SESSION_KEY (at least 32 bytes)")
	}
	if c.Roles.Web && len(c.StripeWebhookSecrets) == 0 {
		missing = append(missing, "STRIPE_WEBHOOK_SECRET")
	}
	if len(c.TicketKey) < 32 {
		missing = append(missing, "GPUMARKET_TICKET_KEY (at least 32 bytes)")
	}
	if c.NATSURL == "" && len(c.RigKey) < 32 {
		missing = append(missing, "GPUMARKET_RIG_KEY (at least 32 bytes, for rigs on the embedded NATS)")
	}
	if len(missing) > 0 {
		return errors.New("set " + strings.Join(missing, " and ") + "; or run `gpumarket dev` (make run) for a local platform")
	}
	if c.Roles.Web {
		if _, err := c.paymentsMode(); err != nil {
			return err
		}
	}
	return nil
}

// devSecret reads a development secret from the data directory, making one the first time,
// so that sessions and test webhooks survive a restart of `make run`. Production sets its
// secrets in the environment instead.
func devSecret(dataDir, name, prefix string) (string, error) {
	path := filepath.Join(dataDir, name)
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) >= 32 {
		return strings.TrimSpace(string(b)), nil
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}
	secret := prefix + hex.EncodeToString(buf)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		return "", err
	}
	return secret, nil
}

// DefaultMailFrom is the From of e-mail when no SMTP server is set: what `gpumarket dev` catches.
const DefaultMailFrom = "GPU Market <noreply@gpumarket.localhost>"

// mailFromEnv reads the SMTP server (GPUMARKET_SMTP_URL) and the From address (GPUMARKET_MAIL_FROM), which
// a server needs; neither set is no server.
func mailFromEnv() (*mail.SMTP, string, error) {
	raw, from := strings.TrimSpace(os.Getenv("GPUMARKET_SMTP_URL")), strings.TrimSpace(os.Getenv("GPUMARKET_MAIL_FROM"))
	if from != "" {
		if _, err := netmail.ParseAddress(from); err != nil {
			return nil, "", fmt.Errorf("GPUMARKET_MAIL_FROM=%q: use an address such as \"GPU Market <noreply@example.com>\"", from)
		}
	}
	if raw == "" {
		if from == "" {
			from = DefaultMailFrom
		}
		return nil, from, nil
	}
	s, err := mail.ParseSMTPURL(raw)
	if err != nil {
		return nil, "", fmt.Errorf("GPUMARKET_SMTP_URL: %w", err)
	}
	if from == "" {
		return nil, "", errors.New("GPUMARKET_SMTP_URL is set but not GPUMARKET_MAIL_FROM: set the address e-mail comes from, such as \"GPU Market <noreply@example.com>\"")
	}
	return &s, from, nil
}
