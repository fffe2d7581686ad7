package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/db"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/services/ledger"
)

// Invoicing's configuration, its automatic close and `gpumarket invoices close` (see
// docs/invoicing.md).

// InvoicingConfig is what the invoices, statements and the close take from the environment
// (invoicingConfigFromEnv, in config.go).
type InvoicingConfig struct {
	// InvoiceNumbers (GPUMARKET_INVOICE_NUMBER_FORMAT, GPUMARKET_INVOICE_FIRST_NUMBER) and
	// StatementNumbers (GPUMARKET_STATEMENT_NUMBER_FORMAT, GPUMARKET_STATEMENT_FIRST_NUMBER)
	// write the documents' numbers.
	InvoiceNumbers, StatementNumbers invoicing.NumberFormat
	// Grace (GPUMARKET_INVOICE_GRACE, default 72h) is how long after a period ends the
	// platform closes it by itself.
	Grace time.Duration
	// MinimumPayout (GPUMARKET_PAYOUT_MINIMUM, dollars, default 10.00) is the least a
	// statement pays out; MinimumPayoutSet says the environment set it, so that `gpumarket dev`
	// lowers only a default.
	MinimumPayout    invoicing.Cents
	MinimumPayoutSet bool
	// Seller is the platform's details on every document: GPUMARKET_SELLER_NAME,
	// GPUMARKET_SELLER_ADDRESS (lines separated by "\n" or "|"), GPUMARKET_SELLER_COUNTRY
	// (ISO 3166 code), GPUMARKET_SELLER_VAT_ID. Without a name, address and country documents
	// are drafted but not issued; `gpumarket dev` sets demo ones.
	Seller invoicing.Party
}

// demoSeller is the seller `gpumarket dev` writes on documents when the environment names none.
var demoSeller = invoicing.Party{LegalName: "gpumarket Demo Ltd", Address: "1 Grand Canal Square\nDublin 2\nD02 P820",
	Country: "IE", VATID: "IE1234567FA"}

// demoMinimumPayout is the least a statement pays out under `gpumarket dev` when the
// environment sets none: the demo's providers earn a few dollars a month, and approving one of
// their statements should show its transfer.
const demoMinimumPayout invoicing.Cents = 1_00

// newInvoicing builds the invoicing service on the platform's database.
// With an outbox, each invoice issued is e-mailed to its customer; nil (the close command, which
// issues none) e-mails nothing.
func newInvoicing(cfg InvoicingConfig, ledger *ledger.Ledger, log *audit.Log, pool *pgxpool.Pool, logger *slog.Logger,
	events invoicing.Events, outbox invoicing.Outbox) *invoicing.Service {
	c := invoicing.Config{Pool: pool, Ledger: ledger, Audit: log, Events: events, Seller: cfg.Seller,
		InvoiceNumbers: cfg.InvoiceNumbers, StatementNumbers: cfg.StatementNumbers, MinimumPayout: cfg.MinimumPayout,
		Grace: cfg.Grace, Log: logger}
	if outbox != nil {
		c.Outbox, c.Recipients = outbox, accounts.AccountEmails
	}
	return invoicing.New(c)
}

// How the platform closes periods by itself: the first look a minute after the start (so that
// a restart does not close before the meter has caught up with its backlog), then every
// quarter of an hour.
const (
	autoCloseFirst = time.Minute
	autoCloseEvery = 15 * time.Minute
)

// invoices runs `gpumarket invoices <command>`.
func invoices(ctx context.Context, cfg Config, log *slog.Logger, args []string, out io.Writer) error {
	if len(args) == 0 || args[0] != "close" {
		return errors.New("usage: gpumarket invoices close --period YYYY-MM")
	}
	fs := flag.NewFlagSet("invoices close", flag.ContinueOnError)
	period := fs.String("period", "", "the month to close, YYYY-MM (UTC)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	p, err := invoicing.ParsePeriod(*period)
	if err != nil {
		return fmt.Errorf("--period %q: write the month as YYYY-MM, like 2026-03", *period)
	}
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
	svc := newInvoicing(cfg.Invoicing, ledger.NewLedger(pool, nil), audit.New(pool, nil), pool, log, nil, nil)
	start := time.Now()
	pr, err := svc.Close(ctx, invoicing.CloseInput{Period: p, Progress: func(pr invoicing.CloseProgress) {
		if pr.Status == invoicing.CloseRunning {
			fmt.Fprintf(out, "close %s: customers %d of %d, providers %d of %d\n", pr.Period, pr.CustomersDone,
				pr.CustomersTotal, pr.ProvidersDone, pr.ProvidersTotal)
		}
	}})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "closed %s in %s: %d invoice and %d statement drafts, %d issued documents left as they were (run %d)\n",
		pr.Period, time.Since(start).Round(time.Millisecond), pr.Invoices, pr.Statements, pr.LeftIssued, pr.Runs)
	return nil
}
