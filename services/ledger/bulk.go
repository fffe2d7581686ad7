package ledger

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
)

// Bulk loads and checks: what the benchmarks (cmd/closebench, cmd/meterbench) and data loads use to write ledger
// accounts, transactions and postings by the thousand, and to check the ledger's sums. A load writes by COPY what
// it is given, with the ids it is given. The database still adds each posting to its account's cached balance and
// checks at commit that each transaction has postings that sum to zero; but a load validates nothing before and
// takes none of Post's locks: it is for a ledger no one else posts to meanwhile.

// Loader is what a bulk load writes through: the pool, or a caller's transaction.
type Loader interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, rows pgx.CopyFromSource) (int64, error)
}

var (
	_ Loader = (*pgxpool.Pool)(nil)
	_ Loader = (pgx.Tx)(nil)
)

// LoadedAccount is a ledger account as CopyAccounts writes it, with the id the caller chose.
type LoadedAccount struct {
	ID             LedgerAccountID
	Kind           AccountKind
	OwnerAccountID string // "" for the platform's own accounts
	CreatedAt      time.Time
}

// CopyAccounts writes the ledger accounts by one COPY, each at a zero balance, and returns how many it wrote.
func CopyAccounts(ctx context.Context, db Loader, accounts []LoadedAccount) (_ int64, err error) {
	defer services.Wrap(&err, "ledger.CopyAccounts")
	return db.CopyFrom(ctx, pgx.Identifier{"ledger_accounts"}, []string{"id", "kind", "owner_account_id", "created_at"},
		pgx.CopyFromSlice(len(accounts), func(i int) ([]any, error) {
			a := &accounts[i]
			return []any{string(a.ID), string(a.Kind), orNull(a.OwnerAccountID),
				a.CreatedAt}, nil
		}))
}

// CopyTransactions writes the transactions, with the ids the caller chose, by one COPY, and then all their
// postings by another, in a database transaction of their own (a savepoint when db is the caller's transaction),
// so that each transaction has its postings when the database checks it at commit. An empty idempotency key or
// creator is none. It returns how many postings it wrote.
func CopyTransactions(ctx context.Context, db Loader, txns []Transaction) (postings int64, err error) {
	defer services.Wrap(&err, "ledger.CopyTransactions")
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"ledger_transactions"},
			[]string{"id", "kind", "idempotency_key", "memo", "created_by", "occurred_at", "created_at"},
			pgx.CopyFromSlice(len(txns), func(i int) ([]any, error) {
				t := &txns[i]
				return []any{t.ID, string(t.Kind), orNull(t.IdempotencyKey), t.Memo,
					orNull(t.CreatedBy), t.OccurredAt, t.CreatedAt}, nil
			}))
		if err != nil {
			return err
		}
		var rows [][]any
		for _, t := range txns {
			for _, p := range t.Postings {
				rows = append(rows, []any{t.ID, string(p.Account), int64(p.Amount)})
			}
		}
		postings, err = tx.CopyFrom(ctx, pgx.Identifier{"ledger_postings"}, []string{"transaction_id", "ledger_account_id", "amount"},
			pgx.CopyFromRows(rows))
		return err
	})
	return postings, err
}

// PostedSums is what the postings moved, summed from the postings themselves and not from the cached balances.
type PostedSums struct {
	ByKind map[AccountKind]money.BigPico // into the accounts of each kind
	Total  money.BigPico                 // into every account: zero in a ledger that balances
	// StaleBalances counts the accounts whose cached balance is not the sum of their postings: none, in a ledger
	// whose invariants hold.
	StaleBalances int64
}

// SumPosted sums every posting by the kind of its account, and checks each account's cached balance against its
// postings.
func SumPosted(ctx context.Context, pool *pgxpool.Pool) (_ PostedSums, err error) {
	defer services.Wrap(&err, "ledger.SumPosted")
	rows, err := pool.Query(ctx, `
		WITH sums AS (
			SELECT a.id, a.kind, a.balance, coalesce(sum(p.amount), 0) AS posted
			FROM ledger_accounts a LEFT JOIN ledger_postings p ON p.ledger_account_id = a.id
			GROUP BY a.id)
		SELECT kind, sum(posted), count(*) FILTER (WHERE balance <> posted) FROM sums GROUP BY kind`)
	if err != nil {
		return PostedSums{}, err
	}
	s := PostedSums{ByKind: map[AccountKind]money.BigPico{}}
	var kind string
	var posted money.BigPico
	var stale int64
	_, err = pgx.ForEachRow(rows, []any{&kind, &posted, &stale}, func() error {
		s.ByKind[AccountKind(kind)] = posted
		s.Total = s.Total.Add(posted)
		s.StaleBalances += stale
		return nil
	})
	return s, err
}

// orNull is s, or NULL for "".
func orNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}
