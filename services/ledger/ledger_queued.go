package ledger

import (
	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services/money"
)

// QueueCustomerCredit queues into b the read of the account's prepaid credit: the cached balance of its
// customer_credit ledger account, into balance, left as it is when the account has none yet. For a caller that
// reads it with its own figures, in one round trip and one snapshot (admission reads it with its holds).
func QueueCustomerCredit(b *pgx.Batch, accountID string, balance *money.BigPico) {
	b.Queue(`SELECT balance FROM ledger_accounts WHERE kind = 'customer_credit' AND owner_account_id = $1::uuid`,
		accountID).Query(func(rows pgx.Rows) error {
		_, err := pgx.ForEachRow(rows, []any{balance}, func() error { return nil })
		return err
	})
}
