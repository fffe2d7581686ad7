package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/cmd/internal/devenv"
	"github.com/gpumarket/gpumarket/cmd/internal/dirlock"
	"github.com/gpumarket/gpumarket/db"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/demo/history"
	"github.com/gpumarket/gpumarket/services/invoicing"
)

func serve(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := cfg.requireServe(); err != nil {
		return err
	}
	p, err := Open(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer p.Close()
	return p.Run(ctx)
}

func migrate(ctx context.Context, cfg Config, log *slog.Logger) error {
	if cfg.DatabaseURL == "" {
		return fmt.Errorf("set DATABASE_URL")
	}
	pool, err := db.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := db.Migrate(ctx, pool, log); err != nil {
		return err
	}
	v, err := db.Version(ctx, pool)
	if err != nil {
		return err
	}
	log.Info("database is at the newest migration", "version", v)
	return nil
}

func seed(ctx context.Context, cfg Config, log *slog.Logger) error {
	if cfg.DatabaseURL == "" {
		return fmt.Errorf("set DATABASE_URL")
	}
	pool, err := db.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := db.Migrate(ctx, pool, log); err != nil {
		return err
	}
	// Seeding creates users but signs no session, so any key of the right length serves.
	acc, err := accounts.NewService(pool, accounts.Config{SessionKey: []byte(strings.Repeat("s", 32))})
	if err != nil {
		return err
	}
	// The demo's rigs are simulated on this machine, as `gpumarket dev` runs them, and qualify through the
	// platform's probes like any rig.
	if err := demo.Seed(ctx, acc, catalog.NewService(pool, catalog.Config{}), time.Now()); err != nil {
		return err
	}
	// The history's route tickets are signed with GPUMARKET_TICKET_KEY when it is set, else
	// with a key of the run's own: its meter checks them as it runs.
	if _, err := history.Seed(ctx, history.Config{Pool: pool, TicketKey: cfg.TicketKey, Log: log}, time.Now()); err != nil {
		return err
	}
	log.Info("demo data is in place")
	return nil
}

// dev runs the whole platform on this machine: it finds or starts PostgreSQL, embeds NATS
// unless NATS_URL is set, migrates, seeds the demo data and its past traffic, and serves.
func dev(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return err
	}
	// One platform a data directory: a second would share the first's simulated rigs' outboxes and its
	// PostgreSQL, on ports of its own.
	lock, err := dirlock.Take(cfg.DataDir, devLockName)
	if held := (*dirlock.HeldError)(nil); errors.As(err, &held) {
		at := ""
		if held.Note != "" {
			at = ", at " + held.Note
		}
		return fmt.Errorf("another gpumarket dev is running on the data directory %s (process %d%s): stop it first, "+
			"or give this one a data directory of its own (GPUMARKET_DATA_DIR)", cfg.DataDir, held.PID, at)
	}
	if err != nil {
		return err
	}
	defer lock.Release()
	if cfg.DatabaseURL, err = devenv.EnsurePostgres(ctx, cfg.DatabaseURL, cfg.DataDir, log); err != nil {
		return err
	}
	if len(cfg.SessionKey) < 32 {
		key, err := devSecret(cfg.DataDir, "session.key", "")
		if err != nil {
			return err
		}
		cfg.SessionKey = []byte(key)
	}
	if len(cfg.TicketKey) < 32 {
		key, err := devSecret(cfg.DataDir, "ticket.key", "")
		if err != nil {
			return err
		}
		cfg.TicketKey = []byte(key)
	}
	if len(cfg.RigKey) < 32 {
		key, err := devSecret(cfg.DataDir, "rig.key", "")
		if err != nil {
			return err
		}
		cfg.RigKey = []byte(key)
	}
	if len(cfg.StripeWebhookSecrets) == 0 {
		secret, err := devSecret(cfg.DataDir, "stripe-webhook.secret", "whsec_local_")
		if err != nil {
			return err
		}
		cfg.StripeWebhookSecrets = []string{secret}
	}
	// A local platform takes test payments unless given a Stripe key, and serves its metrics on
	// a loopback port of their own.
	if cfg.StripeSecretKey == "" && cfg.Payments == "" {
		cfg.Payments = PaymentsTest
	}
	// A local platform's webhook endpoints may be on this machine (docs/webhooks.md).
	cfg.WebhooksAllowPrivate = true
	if cfg.MetricsAddr == "" && cfg.MetricsToken == "" {
		cfg.MetricsAddr = "127.0.0.1:0"
	}
	// Its e-mail is caught on this machine unless an SMTP server is set.
	cfg.MailCatcher = true
	// Documents name a demo seller unless the environment names the real one.
	if cfg.Invoicing.Seller == (invoicing.Party{}) {
		cfg.Invoicing.Seller = demoSeller
	}
	if !cfg.Invoicing.MinimumPayoutSet {
		cfg.Invoicing.MinimumPayout = demoMinimumPayout
	}
	p, err := Open(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer p.Close()
	_ = lock.Note(p.URL()) // for a second `gpumarket dev` to say where this one is
	if err := p.Seed(ctx); err != nil {
		return err
	}
	if _, err := p.SeedHistory(ctx); err != nil {
		return err
	}
	if err := p.connectDemoProviders(ctx); err != nil {
		return err
	}
	rigs, err := p.startSimulatedRigs(ctx)
	if err != nil {
		return err
	}
	defer func() {
		for _, r := range rigs {
			r.stop()
		}
	}()
	fmt.Fprint(os.Stdout, welcome(p.URL(), p.MetricsURL(), p.MailCatcherURL(), cfg.Payments == PaymentsTest, len(rigs)))
	return p.Run(ctx)
}

// devLockName is the file in the data directory that `gpumarket dev` holds while it runs (package dirlock).
const devLockName = "dev.lock"

// welcome is what `gpumarket dev` prints once the platform is up: where it is, where its
// metrics and its caught e-mail are, whether payments are a test, and the demo logins.
func welcome(url, metricsURL, mailURL string, testPayments bool, rigs int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n  gpumarket is running at %s, with %d simulated GPU rigs\n\n", url, rigs)
	fmt.Fprintf(&b, "  catalog     %s/catalog\n  calculator  %s/calculator\n  API         %s/api/offerings\n", url, url, url)
	if metricsURL != "" {
		fmt.Fprintf(&b, "  metrics     %s\n", metricsURL)
	}
	if mailURL != "" {
		fmt.Fprintf(&b, "  e-mail      %s (caught here: nothing is sent off this machine)\n", mailURL)
	}
	b.WriteString("\n")
	if testPayments {
		b.WriteString("  payments    test mode (GPUMARKET_PAYMENTS=test): stripe-mock and a local test page; no card is charged\n\n")
	}
	fmt.Fprintf(&b, "  demo logins (password %q):\n", demo.Password)
	for _, l := range demo.Logins {
		fmt.Fprintf(&b, "    %-24s %-10s %s\n", l.Email, l.Role, l.What)
	}
	fmt.Fprintf(&b, "\n  Ctrl-C stops it; data stays under the data directory.\n\n")
	return b.String()
}

// devPostgres prints the admin URL of a PostgreSQL that tests can create databases on.
func devPostgres(ctx context.Context, cfg Config, log *slog.Logger) error {
	url, err := devenv.EnsureTestPostgres(ctx, cfg.DatabaseURL, cfg.DataDir, log)
	if err != nil {
		return err
	}
	fmt.Println(url)
	return nil
}
