package accounts

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
)

// What other packages read or lock of accounts beside their own rows: documents name their parties and filter
// by name, a customer's billing details are set by one of its users, a purchase of credit is started under its
// account's lock.

// NamedAccount is an account as documents name it: its name, and when it was made (what its billing details
// date from until it gives some).
type NamedAccount struct {
	ID        string
	Name      string
	CreatedAt time.Time
}

// QueueAccountsByID queues on b the read of the accounts of ids, and calls each with every one found as the batch
// is read: an id of no account is left out.
func QueueAccountsByID(b *pgx.Batch, ids []string, each func(NamedAccount)) {
	b.Queue(`SELECT id::text, name, created_at FROM accounts WHERE id = ANY ($1::text[]::uuid[])`, ids).
		Query(func(rows pgx.Rows) error {
			var a NamedAccount
			_, err := pgx.ForEachRow(rows, []any{&a.ID, &a.Name, &a.CreatedAt}, func() error {
				each(a)
				return nil
			})
			if err != nil {
				return fmt.Errorf("accounts: the accounts of %d ids: %w", len(ids), err)
			}
			return nil
		})
}

// IDsNamedLike returns the ids of the accounts whose name holds s, in any case, in no order: what a list of
// another package's rows filtered by its accounts' names selects by.
func IDsNamedLike(ctx context.Context, q Querier, s string) (_ []string, err error) {
	defer services.Wrap(&err, "accounts.IDsNamedLike")
	pattern := "%" + strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(s) + "%"
	rows, err := q.Query(ctx, `SELECT id::text FROM accounts WHERE name ILIKE $1`, pattern)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// AccountAndUser says whether the account of accountID exists, and whether the user of userID ("" for none) is
// one of its people: a user of the account itself, not a member from another account.
func AccountAndUser(ctx context.Context, q Querier, accountID, userID string) (account, user bool, err error) {
	defer services.Wrap(&err, "accounts.AccountAndUser")
	rows, err := q.Query(ctx, `SELECT EXISTS (SELECT 1 FROM accounts WHERE id = $1),
		EXISTS (SELECT 1 FROM users WHERE id = nullif($2, '')::uuid AND account_id = $1)`, accountID, userID)
	if err != nil {
		return false, false, err
	}
	_, err = pgx.ForEachRow(rows, []any{&account, &user}, func() error { return nil })
	return account, user, err
}

// LockAccount takes, in tx, the lock of the account's row until tx ends: what a package holds to make a check of
// its own rows of the account and a write one step (credits counts the buyer's unpaid checkouts and starts one
// under it). An id of no account locks nothing.
func LockAccount(ctx context.Context, tx pgx.Tx, id string) error {
	_, err := tx.Exec(ctx, `SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE`, id)
	return err
}
