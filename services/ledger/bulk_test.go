package ledger

import (
	"context"
	"testing"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
)

// A loaded ledger keeps the ledger's invariants: balances follow the postings, a transaction that does not balance
// is refused with the whole load, and the sums read the postings.
func TestCopyTransactionsKeepTheLedger(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	id := func() string {
		id, err := services.NewUUID()
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	other := LedgerAccountID(id())
	if _, err := CopyAccounts(ctx, b.pool, []LoadedAccount{
		{ID: other, Kind: AccountCustomerCredit, OwnerAccountID: newOrg(t, b.pool, "Beta Corp"), CreatedAt: testNow},
	}); err != nil {
		t.Fatal(err)
	}
	ten, three := usd(t, "10"), usd(t, "3")
	bought := func(account LedgerAccountID, amount money.Pico, key string) Transaction {
		return Transaction{ID: id(), Kind: TransactionPurchase, IdempotencyKey: key, Memo: "Credits bought with Stripe",
			OccurredAt: testNow, CreatedAt: testNow,
			Postings: []Posting{{Account: account, Amount: amount}, {Account: b.stripe, Amount: -amount}}}
	}
	unbalanced := bought(other, three, "")
	unbalanced.Postings[1].Amount = -three + 1
	if _, err := CopyTransactions(ctx, b.pool, []Transaction{bought(b.customer, ten, "a"), unbalanced}); err == nil {
		t.Fatal("a load with a transaction that does not balance was written")
	}
	if n := countRows(t, b.pool, "ledger_transactions"); n != 0 {
		t.Fatalf("%d transactions written by a refused load", n)
	}

	n, err := CopyTransactions(ctx, b.pool, []Transaction{bought(b.customer, ten, "a"), bought(other, three, "")})
	if err != nil || n != 4 {
		t.Fatalf("CopyTransactions: %d postings, %v; want 4", n, err)
	}
	wantBalance(t, b.ledger, b.customer, ten)
	wantBalance(t, b.ledger, other, three)
	wantBalance(t, b.ledger, b.stripe, -ten-three)
	checkInvariants(t, b.pool)

	sums, err := SumPosted(ctx, b.pool)
	if err != nil {
		t.Fatal(err)
	}
	if !sums.ByKind[AccountCustomerCredit].Equal(ten+three) || !sums.ByKind[AccountStripeClearing].Equal(-ten-three) ||
		sums.Total.Sign() != 0 || sums.StaleBalances != 0 {
		t.Fatalf("SumPosted: %+v", sums)
	}
}
