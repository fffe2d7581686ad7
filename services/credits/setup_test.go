package credits

// The ledger's test helpers that the tests of credits use: the ledger's own are in package ledger.

import (
	"context"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/fixtures"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/jackc/pgx/v5/pgxpool"
)

var testNow = time.Date(2026, 3, 14, 9, 30, 0, 0, time.UTC)

func newOrg(t testing.TB, pool *pgxpool.Pool, name string) string {
	t.Helper()
	return fixtures.Account(t, pool, name, fixtures.AccountCreatedAt(testNow))
}

func accountFor(t testing.TB, l *ledger.Ledger, kind ledger.AccountKind, owner string) ledger.LedgerAccountID {
	t.Helper()
	id, err := l.AccountFor(context.Background(), kind, owner)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func usd(t testing.TB, s string) money.Pico {
	t.Helper()
	p, err := money.ParseUSD(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func wantBalance(t testing.TB, l *ledger.Ledger, id ledger.LedgerAccountID, want money.Pico) {
	t.Helper()
	got, err := l.Balance(context.Background(), id)
	if err != nil {
		t.Fatalf("Balance(%s): %v", id, err)
	}
	if !got.Equal(want) {
		t.Fatalf("Balance(%s) = %s, want %s", id, got, want)
	}
}

// checkInvariants asserts the ledger's invariants over the whole database: every transaction
// has postings that sum to zero, every cached balance equals the sum of its postings, and so
// all balances together sum to zero. The sums are NUMERIC, exact at any size.
func checkInvariants(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	var unbalanced, empty, drifted int
	var total string
	err := pool.QueryRow(context.Background(), `
		SELECT
			(SELECT count(*) FROM (SELECT 1 FROM ledger_postings GROUP BY transaction_id HAVING sum(amount) <> 0) u),
			(SELECT count(*) FROM ledger_transactions t
			 WHERE NOT EXISTS (SELECT 1 FROM ledger_postings p WHERE p.transaction_id = t.id)),
			(SELECT count(*) FROM ledger_accounts a
			 WHERE a.balance <> (SELECT coalesce(sum(p.amount), 0) FROM ledger_postings p WHERE p.ledger_account_id = a.id)),
			(SELECT coalesce(sum(balance), 0)::text FROM ledger_accounts)`).Scan(&unbalanced, &empty, &drifted, &total)
	if err != nil {
		t.Fatal(err)
	}
	if unbalanced != 0 || empty != 0 || drifted != 0 || total != "0" {
		t.Fatalf("ledger invariants broken: %d unbalanced transactions, %d without postings, %d cached balances off their postings, balances sum to %s",
			unbalanced, empty, drifted, total)
	}
}

func countRows(t testing.TB, pool *pgxpool.Pool, table string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
