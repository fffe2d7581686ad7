// Package invoicing owns the month's close and the documents it makes: customers' invoices,
// providers' statements and credit notes, their numbering, review and approval, voiding, and
// customers' billing details. docs/invoicing.md says what each decision is and why.
//
// It reads what other packages keep through their functions, and writes none of it but through
// their rules: the hourly rollups and, for the exact check of a sample and the flagged
// requests, the usage rows of package metering; the gateway's log of package requestlog; the
// ledger of package ledger, to which a credit note posts through ledger.Ledger; the price book
// and offerings of package catalog; accounts' and users' names of package accounts; whether a
// month's usage rows were dropped, of package usagestore; and the payouts of package payouts,
// to tell whether a statement's payout is under way. The close reads them in each chunk's
// transaction, queued on the batch that reads its own tables. It pays approved statements
// through package payouts (PayWith), and is that package's payouts.Statements: it records a
// statement paid in the transaction that posts its payout.
//
// Its invariants:
//   - One document per account (or provider) and period that is not void, however often and
//     wherever the close runs: a unique index holds it. A re-close refreshes drafts and never
//     touches an issued document.
//   - A document's amounts come from the rollups' exact sums (charge_pico, payable_pico),
//     rounded to cents once per line (CentsOf); its total is the sum of its lines' cents.
//   - An issued document never changes: database triggers refuse any change to it or its lines
//     except recording its payment or its voiding. Usage of its period metered later goes on
//     the next document as a late-usage line naming the period.
//   - Issued documents are numbered without gaps or repeats per series and year, and a draft
//     holds no number.
//   - Every finance action is recorded in the audit log (package audit) in the transaction that
//     takes it.
//   - A statement is paid at most once and only as issued: it is marked paid in the transaction
//     that posts its payout, and is neither voided nor marked paid by hand while its payout is
//     under way.
//   - A customer or provider reads only its own documents that are not drafts, without
//     finance's flags, actions or staff.
//
// Its SQL names only its own tables (db.Owners).
package invoicing

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/ledger"
)

// Defaults of Config.
const (
	// DefaultGrace is how long after a period ends the platform closes it by itself: time for
	// late usage to arrive and for finance to look before drafts are made.
	DefaultGrace = 72 * time.Hour
	// DefaultMinimumPayout is the least a statement pays out; less carries over to the next.
	DefaultMinimumPayout Cents = 10_00
	// DefaultUsageChecks is how many accounts each close checks exactly against their usage rows.
	DefaultUsageChecks = 10
	// DefaultChunk is how many accounts the close computes in one database transaction.
	DefaultChunk = 500
)

// AuditLog records a finance action inside the transaction that takes it (audit.Log).
type AuditLog interface {
	RecordTx(ctx context.Context, tx pgx.Tx, r audit.Record) error
}

// Events records an event for an account's webhooks inside the transaction of what happened
// (webhooks.Service.Emit).
type Events interface {
	Emit(ctx context.Context, tx pgx.Tx, accountID, eventType, eventID string, data any) error
}

// Config wires the service.
type Config struct {
	Pool   *pgxpool.Pool
	Ledger *ledger.Ledger
	Audit  AuditLog
	// Events is told of each invoice issued, in the transaction that issues it (invoice.issued,
	// docs/webhooks.md); nil tells no one.
	Events Events
	// Seller is the platform's details, written on every document it issues. Approval is
	// refused while its name, address or country is missing.
	Seller Party
	// InvoiceNumbers and StatementNumbers write the two series' numbers; the zero value is
	// DefaultInvoiceNumberFormat (DefaultStatementNumberFormat) from DefaultFirstNumber.
	InvoiceNumbers   NumberFormat
	StatementNumbers NumberFormat
	// MinimumPayout is the least a statement pays out (0: DefaultMinimumPayout).
	MinimumPayout Cents
	// Grace is how long after its end a period is closed by itself (0: DefaultGrace).
	Grace time.Duration
	// UsageChecks is how many accounts a close checks exactly against usage_events
	// (0: DefaultUsageChecks; negative: none).
	UsageChecks int
	// Chunk is how many accounts or providers a close computes per transaction (0: DefaultChunk).
	Chunk int
	// Outbox and Recipients e-mail each invoice as it is issued, its PDF attached, to the
	// customer's addresses, queued in the transaction that issues it; nil e-mails none.
	Outbox     Outbox
	Recipients Recipients
	Now        func() time.Time
	Log        *slog.Logger
}

// Service is the close, the documents and billing details on PostgreSQL.
type Service struct {
	cfg  Config
	pool *pgxpool.Pool
	now  func() time.Time
	log  *slog.Logger
	// payer pays approved statements (PayWith); nil pays nothing.
	payer Payer
}

// New returns the service; it panics without a pool, a ledger or an audit log, which nothing
// can run without.
func New(cfg Config) *Service {
	if cfg.Pool == nil || cfg.Ledger == nil || cfg.Audit == nil {
		panic("invoicing.New: a pool, a ledger and an audit log are required")
	}
	if cfg.InvoiceNumbers.layout == "" {
		cfg.InvoiceNumbers, _ = ParseNumberFormat(DefaultInvoiceNumberFormat, DefaultFirstNumber)
	}
	if cfg.StatementNumbers.layout == "" {
		cfg.StatementNumbers, _ = ParseNumberFormat(DefaultStatementNumberFormat, DefaultFirstNumber)
	}
	if cfg.MinimumPayout <= 0 {
		cfg.MinimumPayout = DefaultMinimumPayout
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.UsageChecks == 0 {
		cfg.UsageChecks = DefaultUsageChecks
	}
	if cfg.Chunk <= 0 {
		cfg.Chunk = DefaultChunk
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Service{cfg: cfg, pool: cfg.Pool, now: cfg.Now, log: cfg.Log}
}

// Grace is how long after its end a period is closed by itself.
func (s *Service) Grace() time.Duration { return s.cfg.Grace }

// MinimumPayout is the least a statement pays out.
func (s *Service) MinimumPayout() Cents { return s.cfg.MinimumPayout }

// Seller is the platform's details as documents show them.
func (s *Service) Seller() Party { return s.cfg.Seller.withCountryName() }

// The advisory lock classes of the service (the first of the two keys of
// pg_advisory_lock(int, int)): a period's close, and a customer's or provider's documents.
const (
	lockClose    int32 = 0x47504d43 // "GPMC"
	lockCustomer int32 = 0x47504d49 // "GPMI"
	lockProvider int32 = 0x47504d53 // "GPMS"
)

// lockAccounts takes the transaction's locks on the documents of every account given, in
// the order of their keys: a close's chunk, an approval and a void of the same account queue
// on them, and two transactions that take them this way never deadlock. The keys are sorted
// here and locked in the order of the array, which a function scan keeps.
func lockAccounts(ctx context.Context, tx pgx.Tx, class int32, ids []string) error {
	keys := make([]int32, 0, len(ids))
	for _, id := range ids {
		h := fnv.New32a()
		h.Write([]byte(id))
		keys = append(keys, int32(h.Sum32()))
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, k) FROM unnest($2::int4[]) AS k`, class, keys)
	return err
}

// wrapf annotates err with what was being done.
func wrapf(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}
