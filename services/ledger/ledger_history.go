package ledger

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
)

// PostingID names a posting. Postings are numbered in the order they were recorded, and a
// history page is cut at one.
type PostingID int64

// HistoryEntry is one posting to an account, with the transaction it belongs to.
type HistoryEntry struct {
	Posting     PostingID       `json:"posting_id"`
	Transaction string          `json:"transaction_id"`
	Kind        TransactionKind `json:"kind"`
	Memo        string          `json:"memo"`
	OccurredAt  time.Time       `json:"occurred_at"`
	Amount      money.BigPico   `json:"amount_pico"`
}

// HistoryPage is a page of an account's postings, newest first.
type HistoryPage struct {
	Entries []HistoryEntry `json:"entries"`
	// Next is the cursor of the following (older) page, to pass as before; 0 when this page
	// is the last.
	Next PostingID `json:"next_before"`
}

// History page size bounds.
const (
	DefaultHistoryLimit = 50
	MaxHistoryLimit     = 500
)

// History returns up to limit postings of the account recorded before the cursor before
// (0 means from the newest), newest first. Postings are ordered by when they were recorded,
// not by OccurredAt, so that a page boundary never moves when an older event is posted
// late. A limit outside 1..MaxHistoryLimit is brought into it (0 means DefaultHistoryLimit).
func (l *Ledger) History(ctx context.Context, id LedgerAccountID, limit int, before PostingID) (_ HistoryPage, err error) {
	defer services.Wrap(&err, "ledger.History(%s, %d, %d)", id, limit, before)
	if limit <= 0 {
		limit = DefaultHistoryLimit
	}
	limit = min(limit, MaxHistoryLimit)
	if !services.CanonicalUUID(string(id)) {
		return HistoryPage{}, ledgerAccountNotFound(id)
	}
	var exists bool
	if err := l.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM ledger_accounts WHERE id = $1)`, string(id)).Scan(&exists); err != nil {
		return HistoryPage{}, err
	}
	if !exists {
		return HistoryPage{}, ledgerAccountNotFound(id)
	}
	// One row more than asked tells whether an older page exists.
	rows, err := l.pool.Query(ctx, `
		SELECT p.id, t.id, t.kind, t.memo, t.occurred_at, p.amount
		FROM ledger_postings p
		JOIN ledger_transactions t ON t.id = p.transaction_id
		WHERE p.ledger_account_id = $1 AND ($2 = 0 OR p.id < $2)
		ORDER BY p.id DESC
		LIMIT $3`, string(id), int64(before), limit+1)
	if err != nil {
		return HistoryPage{}, err
	}
	entries, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (HistoryEntry, error) {
		var e HistoryEntry
		err := r.Scan(&e.Posting, &e.Transaction, &e.Kind, &e.Memo, &e.OccurredAt, &e.Amount)
		return e, err
	})
	if err != nil {
		return HistoryPage{}, err
	}
	page := HistoryPage{Entries: entries}
	if len(entries) > limit {
		page.Entries = entries[:limit]
		page.Next = entries[limit-1].Posting
	}
	return page, nil
}
