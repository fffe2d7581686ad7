package documents

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
)

// journalHeader names the columns of WriteJournal.
var journalHeader = []string{"occurred_at", "transaction_id", "transaction_kind", "memo", "posting_id",
	"ledger_account_id", "ledger_account_kind", "owner_account_id", "owner_name", "amount_usd"}

// journalChunk is how many postings WriteJournal fetches and writes at a time.
var journalChunk = 1000

// journalTime writes a posting's time in UTC to the microsecond, PostgreSQL's precision, at a
// fixed width so that the column sorts as text too.
const journalTime = "2006-01-02T15:04:05.000000Z"

// WriteJournal writes the period's journal to w as CSV: every ledger posting of every ledger
// transaction that occurred in the period, with its transaction (id, kind, memo, time), its
// ledger account (id, kind, owning organisation's id and name, both "" for the platform's
// own accounts) and its amount, exact: dollars with twelve decimals, the picodollar. Rows
// come in the order of the transactions' times, then transaction ids, then posting ids, so a
// transaction's postings are together and sum to zero. A header row comes first.
//
// It reads services/ledger's tables through a cursor inside one read-only,
// repeatable-read database transaction: the journal is one consistent snapshot however long
// the writing takes, and only journalChunk postings are held in memory at a time.
func WriteJournal(ctx context.Context, pool *pgxpool.Pool, period Period, w io.Writer) (err error) {
	defer services.Wrap(&err, "documents.WriteJournal(%s)", period)
	if period.Start.IsZero() || !period.End.After(period.Start) {
		return services.Errorf(services.CodeInvalid, "The journal's period needs a start before its end.")
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(journalHeader); err != nil {
		return err
	}
	return pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
			DECLARE journal NO SCROLL CURSOR FOR
			SELECT t.occurred_at, t.id::text, t.kind, t.memo, p.id, la.id::text, la.kind,
			       coalesce(a.id::text, ''), coalesce(a.name, ''), p.amount
			FROM ledger_transactions t
			JOIN ledger_postings p ON p.transaction_id = t.id
			JOIN ledger_accounts la ON la.id = p.ledger_account_id
			LEFT JOIN accounts a ON a.id = la.owner_account_id
			WHERE t.occurred_at >= $1 AND t.occurred_at < $2
			ORDER BY t.occurred_at, t.id, p.id`, period.Start.UTC(), period.End.UTC()); err != nil {
			return fmt.Errorf("open the journal's cursor: %w", err)
		}
		fetch := "FETCH FORWARD " + strconv.Itoa(journalChunk) + " FROM journal"
		for {
			n, err := writeJournalChunk(ctx, tx, fetch, cw)
			if err != nil {
				return err
			}
			if n < journalChunk {
				return nil
			}
		}
	})
}

// writeJournalChunk writes the rows of one fetch from the cursor and flushes them to the
// writer, returning how many it wrote.
func writeJournalChunk(ctx context.Context, tx pgx.Tx, fetch string, cw *csv.Writer) (int, error) {
	rows, err := tx.Query(ctx, fetch)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var (
			occurred                                               time.Time
			txnID, kind, memo, accountID, accountKind, owner, name string
			postingID                                              int64
			amount                                                 money.BigPico
		)
		if err := rows.Scan(&occurred, &txnID, &kind, &memo, &postingID, &accountID, &accountKind, &owner, &name, &amount); err != nil {
			return n, err
		}
		if err := cw.Write([]string{occurred.UTC().Format(journalTime), txnID, kind, services.CSVText(memo),
			strconv.FormatInt(postingID, 10), accountID, accountKind, owner, services.CSVText(name),
			amount.Decimal(12)}); err != nil {
			return n, err
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return n, err
	}
	cw.Flush()
	return n, cw.Error()
}
