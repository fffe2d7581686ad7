package accounts

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// LockAccount takes, in tx, the lock of the account's row until tx ends: what a package holds to make a check of
// its own rows of the account and a write one step (credits counts the buyer's unpaid checkouts and starts one
// under it). An id of no account locks nothing.
func LockAccount(ctx context.Context, tx pgx.Tx, id string) error {
	_, err := tx.Exec(ctx, `SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE`, id)
	return err
}
