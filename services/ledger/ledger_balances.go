package ledger

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
)

// Balance is the ledger account's balance: the sum of its postings, read from the cached
// column that posting keeps equal to it, exactly, however far past the range of money.Pico
// (±$9.2 million) it has grown.
func (l *Ledger) Balance(ctx context.Context, id LedgerAccountID) (_ money.BigPico, err error) {
	defer services.Wrap(&err, "credits.Balance(%s)", id)
	if !services.CanonicalUUID(string(id)) {
		return money.BigPico{}, ledgerAccountNotFound(id)
	}
	var b money.BigPico
	err = l.pool.QueryRow(ctx, `SELECT balance FROM ledger_accounts WHERE id = $1`, string(id)).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return money.BigPico{}, ledgerAccountNotFound(id)
	}
	if err != nil {
		return money.BigPico{}, err
	}
	return b, nil
}

// BalanceTx is Balance read inside the caller's database transaction. After LockTx on the
// account it is the balance no other writer can change until the caller commits: what a
// payout checks before it lets money leave (services/payouts).
func (l *Ledger) BalanceTx(ctx context.Context, tx pgx.Tx, id LedgerAccountID) (_ money.BigPico, err error) {
	defer services.Wrap(&err, "ledger.BalanceTx(%s)", id)
	if !services.CanonicalUUID(string(id)) {
		return money.BigPico{}, ledgerAccountNotFound(id)
	}
	var b money.BigPico
	err = tx.QueryRow(ctx, `SELECT balance FROM ledger_accounts WHERE id = $1`, string(id)).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return money.BigPico{}, ledgerAccountNotFound(id)
	}
	return b, err
}

// AccountBalance is one ledger account on the finance page.
type AccountBalance struct {
	Account        LedgerAccountID
	Kind           AccountKind
	OwnerAccountID string // "" for the platform's own accounts
	OwnerName      string // the owning organisation's name; "" for the platform's own accounts
	Balance        money.BigPico
}

// Balances lists every ledger account with its balance: the platform's accounts first, then
// by kind and owner name. Like Balance, it reads every balance exactly, whatever its size.
func (l *Ledger) Balances(ctx context.Context) (_ []AccountBalance, err error) {
	defer services.Wrap(&err, "ledger.Balances")
	rows, err := l.pool.Query(ctx, `
		SELECT la.id, la.kind, coalesce(a.id::text, ''), coalesce(a.name, ''), la.balance
		FROM ledger_accounts la
		LEFT JOIN accounts a ON a.id = la.owner_account_id
		ORDER BY la.owner_account_id IS NOT NULL, la.kind, a.name, la.id`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (AccountBalance, error) {
		var b AccountBalance
		err := r.Scan(&b.Account, &b.Kind, &b.OwnerAccountID, &b.OwnerName, &b.Balance)
		return b, err
	})
}

func ledgerAccountNotFound(id LedgerAccountID) error {
	return services.Errorf(services.CodeNotFound, "No ledger account %q.", id)
}
