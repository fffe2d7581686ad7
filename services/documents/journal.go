package documents

import (
	"context"
	"encoding/csv"
	"io"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/ledger"
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
// It reads the postings from package ledger (ledger.JournalPostings, through a cursor) and the
// owners' names from package accounts, inside one read-only, repeatable-read database
// transaction: the journal is one consistent snapshot however long the writing takes, and only
// journalChunk postings are held in memory at a time.
func WriteJournal(ctx context.Context, pool *pgxpool.Pool, period Period, w io.Writer) (err error) {
	defer services.Wrap(&err, "documents.WriteJournal(%s)", period)
	if period.Start.IsZero() || !period.End.After(period.Start) {
		return services.Errorf(services.CodeInvalid, "The journal's period needs a start before its end.")
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(journalHeader); err != nil {
		return err
	}
	names := map[string]string{} // owner names looked up so far, by account id
	err = pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		return ledger.JournalPostings(ctx, tx, period.Start, period.End, journalChunk, func(postings []ledger.JournalPosting) error {
			return writeJournalChunk(ctx, tx, postings, names, cw)
		})
	})
	if err != nil {
		return err
	}
	cw.Flush() // the header, when the period has no postings
	return cw.Error()
}

// writeJournalChunk writes one chunk of postings, with the names of their owners (looked up in tx, the journal's
// snapshot, for the owners not in names yet), and flushes them to the writer.
func writeJournalChunk(ctx context.Context, tx pgx.Tx, postings []ledger.JournalPosting, names map[string]string, cw *csv.Writer) error {
	var unknown []string
	for _, p := range postings {
		if _, ok := names[p.OwnerAccountID]; !ok && p.OwnerAccountID != "" {
			unknown = append(unknown, p.OwnerAccountID)
		}
	}
	found, err := accounts.NamesByID(ctx, tx, unknown)
	if err != nil {
		return err
	}
	for _, id := range unknown {
		names[id] = found[id]
	}
	for _, p := range postings {
		if err := cw.Write([]string{p.OccurredAt.UTC().Format(journalTime), p.TransactionID, p.TransactionKind,
			services.CSVText(p.Memo), strconv.FormatInt(p.PostingID, 10), string(p.Account), string(p.AccountKind),
			p.OwnerAccountID, services.CSVText(names[p.OwnerAccountID]), p.Amount.Decimal(12)}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
