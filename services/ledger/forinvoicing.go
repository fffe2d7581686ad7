package ledger

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gpumarket/gpumarket/services/money"
)

// The ledger as package invoicing reads it into documents: when money first moved, who moved money in a period,
// and each owner's balance with its movements since a period began. The reads are queued on the caller's batch,
// so that the close reads them in the transaction, and the round trip, that reads its own tables.

// QueueFirstTransaction queues on b the read of when the earliest transaction occurred; found is false while the
// ledger has none.
func QueueFirstTransaction(b *pgx.Batch, first *time.Time, found *bool) {
	b.Queue(`SELECT min(occurred_at) FROM ledger_transactions`).QueryRow(func(row pgx.Row) error {
		var t pgtype.Timestamptz
		if err := row.Scan(&t); err != nil {
			return fmt.Errorf("ledger: the first transaction: %w", err)
		}
		*first, *found = t.Time, t.Valid
		return nil
	})
}

// QueuePostingBound queues on b the read of a lower bound of the ids of the postings of every transaction that
// occurred at or after t, as the ledger stands now: the least posting id among those transactions, or one past the
// last posting when there are none. Postings are numbered as they are recorded, so a reader of the movements since
// t reads only the postings from the bound on, through the index on (ledger account, id), whatever the ledger's
// history before (QueuePeriodMovements). A transaction recorded later has a larger id: the bound holds for the
// ledger as it was read.
func QueuePostingBound(b *pgx.Batch, t time.Time, bound *int64) {
	b.Queue(`
		SELECT coalesce(
			(SELECT min(p.id) FROM ledger_transactions t JOIN ledger_postings p ON p.transaction_id = t.id
			 WHERE t.occurred_at >= $1),
			(SELECT coalesce(max(id), 0) + 1 FROM ledger_postings))`, t).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(bound); err != nil {
			return fmt.Errorf("ledger: where the postings of %s start: %w", t.Format(time.RFC3339), err)
		}
		return nil
	})
}

// QueueOwnersMoved queues on b the read of the owners of ledger accounts of the kind with postings of transactions
// that occurred in [from, to), of the transaction kind txKind ("" for any), in no order, into owners.
func QueueOwnersMoved(b *pgx.Batch, kind AccountKind, txKind TransactionKind, from, to time.Time, owners *[]string) {
	b.Queue(`
		SELECT DISTINCT la.owner_account_id::text FROM ledger_transactions t
			JOIN ledger_postings p ON p.transaction_id = t.id
			JOIN ledger_accounts la ON la.id = p.ledger_account_id
		WHERE la.kind = $1 AND ($2 = '' OR t.kind = $2) AND t.occurred_at >= $3 AND t.occurred_at < $4`,
		string(kind), string(txKind), from, to).Query(func(rows pgx.Rows) error {
		list, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("ledger: the owners of %s accounts moved from %s: %w", kind, from.Format(time.RFC3339), err)
		}
		*owners = list
		return nil
	})
}

// PeriodMovement is a row of QueuePeriodMovements: an owner's ledger account of a kind with its balance, and one
// group of its movements since the period's start.
type PeriodMovement struct {
	Owner   string
	Balance money.BigPico // the account's balance as read
	// Moved is false for an account without movements since the period's start: the row gives its balance only.
	Moved bool
	Kind  TransactionKind
	// InPeriod says the group's transactions occurred before the period's end; otherwise since.
	InPeriod bool
	// TransactionID is set for a transaction other than usage in the period, which is a group of its own; the
	// other groups sum every transaction of their kind.
	TransactionID string
	Memo          string    // the least of the group's memos
	OccurredAt    time.Time // the earliest of the group's transactions
	Amount        money.BigPico
}

// QueuePeriodMovements queues on b the read of the owners' ledger accounts of the kind, each with its balance and
// its movements since start: by kind of transaction and whether they occurred before end, and each transaction
// other than usage in [start, end) on its own. bound is QueuePostingBound's of start, read before: a transaction
// recorded since has a larger id, so it still holds. It calls each with every row as the batch is read.
func QueuePeriodMovements(b *pgx.Batch, kind AccountKind, owners []string, bound int64, start, end time.Time,
	each func(PeriodMovement)) {
	b.Queue(`
		WITH acc AS (
			SELECT id, owner_account_id, balance FROM ledger_accounts
			WHERE kind = $1 AND owner_account_id = ANY ($2::text[]::uuid[])),
		moves AS (
			SELECT p.ledger_account_id, t.id, t.kind, t.memo, t.occurred_at, p.amount
			FROM acc
			JOIN ledger_postings p ON p.ledger_account_id = acc.id AND p.id >= $3
			JOIN ledger_transactions t ON t.id = p.transaction_id AND t.occurred_at >= $4)
		SELECT acc.owner_account_id::text, acc.balance, m.kind, m.occurred_at < $5,
			CASE WHEN m.kind <> 'usage' AND m.occurred_at < $5 THEN m.id::text END AS txn,
			coalesce(min(m.memo), ''), min(m.occurred_at), coalesce(sum(m.amount), 0)
		FROM acc
		LEFT JOIN moves m ON m.ledger_account_id = acc.id
		GROUP BY 1, 2, 3, 4, 5`, string(kind), owners, bound, start, end).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var m PeriodMovement
			var txKind, txn pgtype.Text
			var inPeriod pgtype.Bool
			var at pgtype.Timestamptz
			if err := rows.Scan(&m.Owner, &m.Balance, &txKind, &inPeriod, &txn, &m.Memo, &at, &m.Amount); err != nil {
				return err
			}
			m.Moved, m.Kind, m.InPeriod, m.TransactionID, m.OccurredAt = txKind.Valid, TransactionKind(txKind.String),
				inPeriod.Bool, txn.String, at.Time
			each(m)
		}
		return rows.Err()
	})
}
