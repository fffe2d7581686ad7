// Command gpumarket is the platform binary.
//
//	gpumarket serve     run the platform (roles web, gateway and meter; GPUMARKET_ROLES) on PostgreSQL and NATS
//	gpumarket meter     run only the meter (with health, readiness and metrics endpoints)
//	gpumarket migrate   apply database migrations and exit
//	gpumarket seed      load the demo data (idempotent) and exit
//	gpumarket dev       everything on one machine: find or start PostgreSQL, embed NATS,
//	                    migrate, seed the demo, serve, and print the URL and demo logins
//	gpumarket dev postgres
//	                    find or start PostgreSQL and print its admin URL (make test uses it)
//	gpumarket invoices close --period YYYY-MM
//	                    close a month: draft its invoices and provider statements
//	gpumarket nats-issuer
//	                    print the NATS auth callout's issuer public key, derived from GPUMARKET_RIG_KEY
//
// The gateway's and batches' benchmarks (make bench-gateway, make bench-batch) are built apart, as
// gpumarket-bench, so that this binary does not link the load generator (harness.go).
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	level, _ := logLevel()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], log); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "gpumarket:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, log *slog.Logger) error {
	if len(args) == 0 {
		usage()
		return errors.New("name a subcommand")
	}
	cfg, err := configFromEnv()
	if err != nil {
		return err
	}
	switch args[0] {
	case "serve":
		return serve(ctx, cfg, log)
	case "meter":
		cfg.Roles = Roles{Meter: true}
		return serve(ctx, cfg, log)
	case "migrate":
		return migrate(ctx, cfg, log)
	case "seed":
		return seed(ctx, cfg, log)
	case "dev":
		if len(args) > 1 && args[1] == "postgres" {
			return devPostgres(ctx, cfg, log)
		}
		return dev(ctx, cfg, log)
	case "bench-gateway", "bench-batch":
		return runHarness(ctx, cfg, args[0], args[1:])
	case "invoices":
		return invoices(ctx, cfg, log, args[1:], os.Stdout)
	case "nats-issuer":
		return natsIssuer(cfg, os.Stdout)
	case "help", "-h", "--help":
		usage()
		return nil
	}
	usage()
	return fmt.Errorf("unknown subcommand %q", args[0])
}

func usage() {
	if harnessBuilt {
		fmt.Fprint(os.Stderr, `usage: gpumarket-bench <subcommand>

  bench-gateway  measure the latency the /v1 gateway adds (make bench-gateway; -h for its flags)
  bench-batch    a 50,000-line batch's lines per second and overhead over direct calls (make bench-batch)

and every subcommand of gpumarket:

`)
	}
	fmt.Fprint(os.Stderr, `usage: gpumarket <subcommand>

  serve          run the platform on DATABASE_URL and NATS_URL (embedded NATS when unset)
  meter          run only the meter: usage events from NATS into priced usage and the ledger
  migrate        apply database migrations and exit
  seed           load the demo data (idempotent) and exit
  dev            the whole platform on this machine with demo data (what "make run" does)
  dev postgres   find or start PostgreSQL and print its admin URL
  invoices close --period YYYY-MM
                 close a month (UTC): draft its invoices and provider statements, printing progress
  nats-issuer    print the public key the NATS configuration names as the auth callout's issuer
                 (NATS_AUTH_CALLOUT_ISSUER), derived from GPUMARKET_RIG_KEY

environment:
  DATABASE_URL            PostgreSQL connection URL
  NATS_URL                NATS server URL; unset: an embedded nats-server with JetStream
  GPUMARKET_ADDR          listen address (default :8080)
  GPUMARKET_DATA_DIR      data directory (default .data)
  GPUMARKET_DOWNLOADS_DIR the agent's binaries published at /downloads/ (default <data directory>/downloads)
  GPUMARKET_NATS_PORT     embedded NATS port (default 4222)
  GPUMARKET_RIG_NATS_ADDR where the embedded NATS listens for rigs, host:port (default 127.0.0.1:4222)
  GPUMARKET_RIG_NATS_URL  the NATS URL providers' rigs are shown (default the embedded listener, or NATS_URL)
  GPUMARKET_RIG_NATS_WSS_ADDR, GPUMARKET_RIG_NATS_TLS_CERT, GPUMARKET_RIG_NATS_TLS_KEY
                          the embedded NATS's wss:// entry point for rigs (ip:port) and its certificate and key
  GPUMARKET_SESSION_KEY   at least 32 bytes signing session tokens (dev makes one)
  GPUMARKET_TICKET_KEY    at least 32 bytes signing route tickets (dev makes one)
  GPUMARKET_RIG_KEY       at least 32 bytes deriving each rig's NATS password and the auth callout's key (dev makes one)
  GPUMARKET_NATS_SYSTEM_URL
                          NATS_URL's servers with the system account's user: closes revoked rigs' connections
  GPUMARKET_ROLES         any of web,gateway,meter, comma-separated (default all three)
  GPUMARKET_STREAM_REPLICAS, GPUMARKET_STREAM_DUPLICATE_WINDOW, GPUMARKET_STREAM_ACK_WAIT
                          the usage stream's replicas (3 on a cluster), dedupe window (5m), redelivery wait (30s)
  GPUMARKET_RATE_LIMIT_RPS, GPUMARKET_RATE_LIMIT_BURST
                          each API key's /v1 requests per second (default 50) and burst (default 100)
  STRIPE_SECRET_KEY       Stripe secret key; serve refuses to start without it unless GPUMARKET_PAYMENTS=test
  STRIPE_WEBHOOK_SECRET   Stripe webhook secret(s), comma-separated
  GPUMARKET_PAYMENTS      test: stripe-mock and a local test-payment page, no card charged (dev sets it)
  GPUMARKET_TRUSTED_PROXIES
                          comma-separated CIDRs of proxies whose X-Forwarded-For names the client
  GPUMARKET_METRICS_TOKEN, GPUMARKET_METRICS_ADDR
                          /metrics for this bearer token, or on its own listen address; neither: not served
  GPUMARKET_LOG_LEVEL     debug, info, warn or error (default info)
  GPUMARKET_INVOICE_NUMBER_FORMAT, GPUMARKET_INVOICE_FIRST_NUMBER
                          invoice numbers: {year} and {seq:0N} (default GPM-{year}-{seq:06}) from a first number (1)
  GPUMARKET_STATEMENT_NUMBER_FORMAT, GPUMARKET_STATEMENT_FIRST_NUMBER
                          provider statement numbers (default GPS-{year}-{seq:06}, from 1)
  GPUMARKET_INVOICE_GRACE how long after a month ends it is closed by itself (default 72h)
  GPUMARKET_PAYOUT_MINIMUM
                          the least a provider statement pays out, in dollars (default 10.00); less carries over
  GPUMARKET_SELLER_NAME, GPUMARKET_SELLER_ADDRESS, GPUMARKET_SELLER_COUNTRY, GPUMARKET_SELLER_VAT_ID
                          the platform's details on its documents (address lines separated by | or \n);
                          documents are not issued without a name, address and country (dev sets demo ones)
`)
}
