package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/cmd/internal/devenv"
	"github.com/gpumarket/gpumarket/db"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/rigaddr"
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
	// The demo's rigs are simulated on this machine, as `gpumarket dev` runs them: their agent URLs are
	// loopback ones, which the development policy allows.
	if err := demo.Seed(ctx, acc, catalog.NewService(pool, catalog.Config{Rigs: rigaddr.Policy{Development: true}}), time.Now()); err != nil {
		return err
	}
	log.Info("demo data is in place")
	return nil
}

// dev runs the whole platform on this machine: it finds or starts PostgreSQL, embeds NATS
// unless NATS_URL is set, migrates, seeds the demo data and serves.
func dev(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return err
	}
	cfg.Development = true // the simulated rigs listen on this machine
	var err error
	if cfg.DatabaseURL, err = devenv.EnsurePostgres(ctx, cfg.DataDir, log); err != nil {
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
	p, err := Open(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer p.Close()
	if err := p.Seed(ctx); err != nil {
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
	printWelcome(p.URL(), len(rigs))
	return p.Run(ctx)
}

func printWelcome(url string, rigs int) {
	var b strings.Builder
	fmt.Fprintf(&b, "\n  gpumarket is running at %s, with %d simulated GPU rigs\n\n", url, rigs)
	fmt.Fprintf(&b, "  catalog     %s/catalog\n  calculator  %s/calculator\n  API         %s/api/offerings\n\n", url, url, url)
	fmt.Fprintf(&b, "  demo logins (password %q):\n", demo.Password)
	for _, l := range demo.Logins {
		fmt.Fprintf(&b, "    %-24s %-10s %s\n", l.Email, l.Role, l.What)
	}
	fmt.Fprintf(&b, "\n  Ctrl-C stops it; data stays under the data directory.\n\n")
	fmt.Fprint(os.Stdout, b.String())
}

// devPostgres prints the admin URL of a PostgreSQL that tests can create databases on.
func devPostgres(ctx context.Context, cfg Config, log *slog.Logger) error {
	url, err := devenv.EnsureTestPostgres(ctx, cfg.DataDir, log)
	if err != nil {
		return err
	}
	fmt.Println(url)
	return nil
}
