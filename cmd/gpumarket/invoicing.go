package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/db"
	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/billing"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/services/money"
)

// Invoicing's configuration, its automatic close and `gpumarket invoices close` (see
// docs/invoicing.md).

// InvoicingConfig is what the invoices, statements and the close read from the environment.
type InvoicingConfig struct {
	// InvoiceNumbers (GPUMARKET_INVOICE_NUMBER_FORMAT, GPUMARKET_INVOICE_FIRST_NUMBER) and
	// StatementNumbers (GPUMARKET_STATEMENT_NUMBER_FORMAT, GPUMARKET_STATEMENT_FIRST_NUMBER)
	// write the documents' numbers.
	InvoiceNumbers, StatementNumbers invoicing.NumberFormat
	// Grace (GPUMARKET_INVOICE_GRACE, default 72h) is how long after a period ends the
	// platform closes it by itself.
	Grace time.Duration
	// MinimumPayout (GPUMARKET_PAYOUT_MINIMUM, dollars, default 10.00) is the least a
	// statement pays out.
	MinimumPayout invoicing.Cents
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
		c.MinimumPayout = invoicing.Cents(p / money.PicoPerCent)
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

// newInvoicing builds the invoicing service on the platform's database.
func newInvoicing(cfg InvoicingConfig, ledger *billing.Ledger, log *audit.Log, pool *pgxpool.Pool, logger *slog.Logger) *invoicing.Service {
	return invoicing.New(invoicing.Config{Pool: pool, Ledger: ledger, Audit: log, Seller: cfg.Seller,
		InvoiceNumbers: cfg.InvoiceNumbers, StatementNumbers: cfg.StatementNumbers, MinimumPayout: cfg.MinimumPayout,
		Grace: cfg.Grace, Log: logger})
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
	svc := newInvoicing(cfg.Invoicing, billing.NewLedger(pool, nil), audit.New(pool, nil), pool, log)
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
