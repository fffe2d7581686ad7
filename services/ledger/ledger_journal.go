package ledger

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
)

// JournalPosting is one posting as the period's journal lists it, with its transaction and its ledger account.
type JournalPosting struct {
	OccurredAt      time.Time
	TransactionID   string
	TransactionKind string
	Memo            string
	PostingID       int64
	Account         LedgerAccountID
	AccountKind     AccountKind
	OwnerAccountID  string // "" for the platform's own accounts
	Amount          money.BigPico
}

// JournalPostings hands each a chunk of at most chunk postings of every transaction that occurred in [from, to),
// in the order of the transactions' times, then transaction ids, then posting ids, so that a transaction's
// postings are together and sum to zero. It reads through a cursor in tx, the caller's: open it REPEATABLE READ
// (and read-only) for the journal to be one snapshot however long each takes; only one chunk is held at a time.
func JournalPostings(ctx context.Context, tx pgx.Tx, from, to time.Time, chunk int, each func([]JournalPosting) error) (err error) {
	defer services.Wrap(&err, "ledger.JournalPostings")
	if chunk < 1 {
		return fmt.Errorf("a chunk of %d postings", chunk)
	}
	if _, err := tx.Exec(ctx, `
		DECLARE journal_postings NO SCROLL CURSOR FOR
		SELECT t.occurred_at, t.id::text, t.kind, t.memo, p.id, la.id::text, la.kind,
		       coalesce(la.owner_account_id::text, ''), p.amount
		FROM ledger_transactions t
		JOIN ledger_postings p ON p.transaction_id = t.id
		JOIN ledger_accounts la ON la.id = p.ledger_account_id
		WHERE t.occurred_at >= $1 AND t.occurred_at < $2
		ORDER BY t.occurred_at, t.id, p.id`, from.UTC(), to.UTC()); err != nil {
		return fmt.Errorf("open the journal's cursor: %w", err)
	}
	fetch := "FETCH FORWARD " + strconv.Itoa(chunk) + " FROM journal_postings"
	for {
		rows, err := tx.Query(ctx, fetch)
		if err != nil {
			return err
		}
		postings, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (JournalPosting, error) {
			var p JournalPosting
			err := r.Scan(&p.OccurredAt, &p.TransactionID, &p.TransactionKind, &p.Memo, &p.PostingID, &p.Account,
				&p.AccountKind, &p.OwnerAccountID, &p.Amount)
			return p, err
		})
		if err != nil {
			return err
		}
		if len(postings) > 0 {
			if err := each(postings); err != nil {
				return err
			}
		}
		if len(postings) < chunk {
			_, err := tx.Exec(ctx, `CLOSE journal_postings`)
			return err
		}
	}
}
