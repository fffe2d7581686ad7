package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/services/rigaddr"
	"github.com/gpumarket/gpumarket/web"
)

// Config is everything the platform reads from its environment. Secrets come only from here.
type Config struct {
	DatabaseURL string
	NATSURL     string
	Addr        string
	DataDir     string
	NATSPort    int
	SessionKey  []byte
	// Payments is "test" (GPUMARKET_PAYMENTS=test) for stripe-mock and the local test-payment
	// page; "" takes real payments and needs StripeSecretKey. See paymentsMode.
	Payments string
	// Stripe: the secret key takes real payments on Stripe Checkout.
	StripeSecretKey      string
	StripeWebhookSecrets []string // several, comma-separated, while a secret is rotated
	StripeAPIURL         string   // a stripe-mock already running; empty starts one when needed
	PublicURL            string

	Roles          Roles
	TicketKey      []byte // signs and verifies route tickets: GPUMARKET_TICKET_KEY
	RigKey         []byte // derives each rig's NATS password on the embedded server: GPUMARKET_RIG_KEY
	StreamReplicas int    // 3 on a NATS cluster
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
	// defaults them to web.DefaultKeyRatePerSecond and web.DefaultKeyRateBurst; zero means those defaults too.
	// Each gateway process keeps its own buckets, so a key's limit is per process (docs/deploy.md, "Replicas").
	RateLimitRPS   float64
	RateLimitBurst int
	// BatchConcurrency (GPUMARKET_BATCH_CONCURRENCY) is how many batch lines this process sends at once: the
	// share of capacity batches may take (docs/batches.md); zero means batch.DefaultConcurrency.
	BatchConcurrency int
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
	// Development is set by `gpumarket dev`, which runs the simulated rigs on this machine: listings may then
	// point their agent URL at loopback, private and link-local addresses. Never set by the environment.
	Development bool
	// RigNetworks (GPUMARKET_RIG_NETWORKS, comma-separated CIDR networks) are internal networks the operator
	// allows rigs' agent URLs on, beyond the public internet: rigs on a private network of the operator's own.
	RigNetworks []netip.Prefix
	// Invoicing is the documents' numbering, the close's grace, the minimum payout and the seller's details.
	Invoicing InvoicingConfig
}

// RigPolicy is where listings may point their agent URL, and where the gateway may connect to reach a rig.
func (c Config) RigPolicy() rigaddr.Policy {
	return rigaddr.Policy{Development: c.Development, Allowed: c.RigNetworks}
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
// subset of web, meter (default: all).
type Roles struct {
	Web, Meter bool
}

func parseRoles(s string) (Roles, error) {
	if strings.TrimSpace(s) == "" {
		return Roles{Web: true, Meter: true}, nil
	}
	var r Roles
	for _, part := range strings.Split(s, ",") {
		switch strings.TrimSpace(part) {
		case "web":
			r.Web = true
		case "meter":
			r.Meter = true
		default:
			return r, fmt.Errorf("GPUMARKET_ROLES: unknown role %q (use web, meter)", part)
		}
	}
	return r, nil
}

func (r Roles) String() string {
	var parts []string
	if r.Web {
		parts = append(parts, "web")
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
		PublicURL:       strings.TrimRight(os.Getenv("GPUMARKET_PUBLIC_URL"), "/"),
		TicketKey:       []byte(os.Getenv("GPUMARKET_TICKET_KEY")),
		RigKey:          []byte(os.Getenv("GPUMARKET_RIG_KEY")),
		StreamReplicas:  1,
		RateLimitRPS:    web.DefaultKeyRatePerSecond,
		RateLimitBurst:  web.DefaultKeyRateBurst,
		Payments:        os.Getenv("GPUMARKET_PAYMENTS"),
		MetricsToken:    os.Getenv("GPUMARKET_METRICS_TOKEN"),
		MetricsAddr:     os.Getenv("GPUMARKET_METRICS_ADDR"),
	}
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
	if c.RigNetworks, err = rigaddr.ParseNetworks(os.Getenv("GPUMARKET_RIG_NETWORKS")); err != nil {
		return c, fmt.Errorf("GPUMARKET_RIG_NETWORKS: %w", err)
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
	abs, err := filepath.Abs(c.DataDir)
	if err != nil {
		return c, err
	}
	c.DataDir = abs
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
