package invoicing

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
)

// Bulk checks: what the benchmarks (cmd/closebench) use to check a close of thousands of accounts in a few
// statements, against the sums of what it was computed from.

// DocumentSums sums the lines of every invoice and statement, whatever their status, and counts the invoices that
// carry each flag.
type DocumentSums struct {
	InvoiceLines    int64
	InvoiceRequests int64         // the requests the invoices' lines count
	Charged         money.BigPico // the invoices' lines' charges
	Payable         money.BigPico // the statements' lines' payables
	Flagged         map[Flag]int64
}

// SumDocuments sums the lines of every invoice and statement, and counts the flagged invoices by flag.
func SumDocuments(ctx context.Context, pool *pgxpool.Pool) (_ DocumentSums, err error) {
	defer services.Wrap(&err, "invoicing.SumDocuments")
	s := DocumentSums{Flagged: map[Flag]int64{}}
	err = pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM invoice_lines), (SELECT coalesce(sum(requests), 0)::bigint FROM invoice_lines),
			(SELECT coalesce(sum(charge_pico), 0) FROM invoice_lines), (SELECT coalesce(sum(payable_pico), 0) FROM statement_lines)`).Scan(
		&s.InvoiceLines, &s.InvoiceRequests, &s.Charged, &s.Payable)
	if err != nil {
		return s, err
	}
	rows, err := pool.Query(ctx, `SELECT f, count(*) FROM invoices, unnest(flags) f GROUP BY f`)
	if err != nil {
		return s, err
	}
	var flag string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&flag, &n}, func() error {
		s.Flagged[Flag(flag)] = n
		return nil
	})
	return s, err
}
