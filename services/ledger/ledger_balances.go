package ledger

import (
	"context"
	"errors"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
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
		SELECT la.id, la.kind, coalesce(la.owner_account_id::text, ''), la.balance
		FROM ledger_accounts la
		ORDER BY la.owner_account_id IS NOT NULL, la.kind, la.id`)
	if err != nil {
		return nil, err
	}
	balances, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (AccountBalance, error) {
		var b AccountBalance
		err := r.Scan(&b.Account, &b.Kind, &b.OwnerAccountID, &b.Balance)
		return b, err
	})
	if err != nil {
		return nil, err
	}
	owners := make([]string, len(balances))
	for i, b := range balances {
		owners[i] = b.OwnerAccountID
	}
	names, err := accounts.NamesByID(ctx, l.pool, owners)
	if err != nil {
		return nil, err
	}
	for i := range balances {
		balances[i].OwnerName = names[balances[i].OwnerAccountID]
	}
	// Within the query's order, by owner name: ties keep the ledger account's id order.
	sort.SliceStable(balances, func(i, j int) bool {
		a, b := balances[i], balances[j]
		if (a.OwnerAccountID != "") != (b.OwnerAccountID != "") {
			return a.OwnerAccountID == ""
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.OwnerName < b.OwnerName
	})
	return balances, nil
}

func ledgerAccountNotFound(id LedgerAccountID) error {
	return services.Errorf(services.CodeNotFound, "No ledger account %q.", id)
}
