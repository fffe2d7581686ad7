package documents

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/fixtures"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/money"
)

// ledgerBook is a ledger with one customer, one provider and the platform's accounts.
type ledgerBook struct {
	pool                                *pgxpool.Pool
	ledger                              *ledger.Ledger
	customer, provider, revenue, stripe ledger.LedgerAccountID
}

func newLedgerBook(t *testing.T) ledgerBook {
	t.Helper()
	ctx := context.Background()
	pool := dbtest.New(t)
	l := ledger.NewLedger(pool, func() time.Time { return time.Date(2026, 4, 5, 9, 0, 0, 0, time.UTC) })
	org := func(name string) string { return fixtures.Account(t, pool, name) }
	account := func(kind ledger.AccountKind, owner string) ledger.LedgerAccountID {
		id, err := l.AccountFor(ctx, kind, owner)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	return ledgerBook{
		pool: pool, ledger: l,
		customer: account(ledger.AccountCustomerCredit, org(`=HYPERLINK("http://evil.example") Labs`)),
		provider: account(ledger.AccountProviderPayable, org("Łódź Rigs")),
		revenue:  account(ledger.AccountPlatformRevenue, ""),
		stripe:   account(ledger.AccountStripeClearing, ""),
	}
}

func (b ledgerBook) post(t *testing.T, kind ledger.TransactionKind, memo string, at time.Time, ps ...ledger.Posting) {
	t.Helper()
	if _, _, err := b.ledger.Post(context.Background(), ledger.TransactionInput{Kind: kind, Memo: memo, OccurredAt: at, Postings: ps}); err != nil {
		t.Fatalf("post %s at %s: %v", kind, at, err)
	}
}

// usage posts a batch: the customer pays charge, the provider earns its share, the platform
// keeps the rest.
func (b ledgerBook) usage(t *testing.T, at time.Time, charge, earned money.Pico) {
	t.Helper()
	b.post(t, ledger.TransactionUsage, "meter batch", at,
		ledger.Posting{Account: b.customer, Amount: -charge},
		ledger.Posting{Account: b.provider, Amount: earned},
		ledger.Posting{Account: b.revenue, Amount: charge - earned})
}

func journal(t *testing.T, pool *pgxpool.Pool, p Period) [][]string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteJournal(context.Background(), pool, p, &b); err != nil {
		t.Fatalf("WriteJournal(%s): %v", p, err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatalf("the journal does not parse: %v", err)
	}
	if !slices.Equal(rows[0], journalHeader) {
		t.Fatalf("journal header %q", rows[0])
	}
	return rows[1:]
}

// TestJournalSumsToZeroAndMatchesTheLedger writes the journal of March over a ledger with
// postings on both sides of each month's edges, in chunks of seven postings: March holds
// exactly its postings, each transaction's postings are together and sum to zero, the month
// sums to zero, amounts are exact to the picodollar, and the journals of every month add up
// to each ledger account's balance.
func TestJournalSumsToZeroAndMatchesTheLedger(t *testing.T) {
	defer func(n int) { journalChunk = n }(journalChunk)
	journalChunk = 7
	b := newLedgerBook(t)
	usd := func(s string) money.Pico {
		p, err := money.ParseUSD(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	lastOfFeb := time.Date(2026, 2, 28, 23, 59, 59, 999_999_000, time.UTC)
	firstOfMar := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	lastOfMar := time.Date(2026, 3, 31, 23, 59, 59, 999_999_000, time.UTC)
	firstOfApr := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)

	b.post(t, ledger.TransactionPurchase, "checkout February", lastOfFeb,
		ledger.Posting{Account: b.customer, Amount: usd("100")}, ledger.Posting{Account: b.stripe, Amount: -usd("100")})
	b.post(t, ledger.TransactionPurchase, "checkout March", firstOfMar,
		ledger.Posting{Account: b.customer, Amount: usd("50")}, ledger.Posting{Account: b.stripe, Amount: -usd("50")})
	var charged money.Pico
	for i := range 25 {
		charge := usd("1.234567890123") + money.Pico(i)
		b.usage(t, firstOfMar.Add(time.Duration(i+1)*time.Hour), charge, charge*7/10)
		charged += charge
	}
	// At the time of a usage batch: the two sort by transaction id.
	b.post(t, ledger.TransactionAdjustment, "=1+1", firstOfMar.Add(5*time.Hour),
		ledger.Posting{Account: b.customer, Amount: usd("0.000000000001")}, ledger.Posting{Account: b.revenue, Amount: -usd("0.000000000001")})
	b.usage(t, lastOfMar, usd("0.5"), usd("0.35"))
	b.usage(t, firstOfApr, usd("2"), usd("1.4"))

	march := journal(t, b.pool, Month(2026, time.March))
	if want := 2 + 25*3 + 2 + 3; len(march) != want {
		t.Fatalf("March's journal has %d postings, want %d", len(march), want)
	}
	var total money.BigPico
	perTxn := map[string]money.BigPico{}
	perAccount := map[string]money.BigPico{}
	seen := map[string]bool{}
	var prevTxn, prevTime string
	for i, r := range march {
		at, txn, memo, account, owner, amount := r[0], r[1], r[3], r[5], r[8], usd(r[9])
		if at < prevTime || (at == prevTime && txn < prevTxn) {
			t.Fatalf("row %d (%s, %s) comes after (%s, %s): not in the order of time and transaction", i, at, txn, prevTime, prevTxn)
		}
		if txn != prevTxn && seen[txn] {
			t.Fatalf("the postings of transaction %s are not together", txn)
		}
		seen[txn], prevTxn, prevTime = true, txn, at
		total = total.AddPico(amount)
		perTxn[txn] = perTxn[txn].AddPico(amount)
		perAccount[account] = perAccount[account].AddPico(amount)
		if at < "2026-03-01T00:00:00.000000Z" || at > "2026-03-31T23:59:59.999999Z" {
			t.Errorf("row %d occurred at %s, outside March", i, at)
		}
		if r[2] == "adjustment" && memo != "'=1+1" {
			t.Errorf("an adjustment's memo is written %q, want it defused", memo)
		}
		if account == string(b.customer) && owner != `'=HYPERLINK("http://evil.example") Labs` {
			t.Errorf("the customer's name is written %q, want it defused", owner)
		}
		if (account == string(b.revenue) || account == string(b.stripe)) && (r[7] != "" || owner != "") {
			t.Errorf("a platform account has an owner: %q %q", r[7], owner)
		}
	}
	if total.Sign() != 0 {
		t.Errorf("March's journal sums to %s, want 0", total)
	}
	for txn, sum := range perTxn {
		if sum.Sign() != 0 {
			t.Errorf("transaction %s sums to %s in the journal, want 0", txn, sum)
		}
	}
	wantCustomer := money.BigPicoOf(usd("50")).AddPico(usd("0.000000000001")).AddPico(-charged).AddPico(-usd("0.5"))
	if got := perAccount[string(b.customer)]; got != wantCustomer {
		t.Errorf("the customer's postings in March sum to %s, want %s", got, wantCustomer)
	}
	if march[0][0] != "2026-03-01T00:00:00.000000Z" || march[0][2] != "purchase" || march[0][9] != "50.000000000000" {
		t.Errorf("first row %q, want the purchase of the first microsecond of March", march[0])
	}
	if last := march[len(march)-1]; last[0] != "2026-03-31T23:59:59.999999Z" {
		t.Errorf("last row at %s, want the usage of the last microsecond of March", last[0])
	}
	if !slices.ContainsFunc(march, func(r []string) bool { return r[9] == "0.000000000001" }) {
		t.Error("a posting of one picodollar is not in the journal as 0.000000000001")
	}

	// Every month together holds every posting: per ledger account, the journals add up to
	// the balance the ledger keeps.
	all := map[string]money.BigPico{}
	for _, m := range []time.Month{time.February, time.March, time.April} {
		for _, r := range journal(t, b.pool, Month(2026, m)) {
			all[r[5]] = all[r[5]].AddPico(usd(r[9]))
		}
	}
	balances, err := b.ledger.Balances(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(balances) != 4 {
		t.Fatalf("%d ledger accounts, want 4", len(balances))
	}
	for _, a := range balances {
		if all[string(a.Account)] != a.Balance {
			t.Errorf("%s account: the journals sum to %s, the ledger's balance is %s", a.Kind, all[string(a.Account)], a.Balance)
		}
	}
}

// TestJournalOfAnEmptyMonthIsItsHeader writes a month without postings.
func TestJournalOfAnEmptyMonthIsItsHeader(t *testing.T) {
	b := newLedgerBook(t)
	b.usage(t, time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC), 1000, 700)
	if rows := journal(t, b.pool, Month(2026, time.May)); len(rows) != 0 {
		t.Errorf("May's journal has %d rows, want none", len(rows))
	}
}

type failingWriter struct{ left int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.left {
		return 0, errors.New("the client went away")
	}
	w.left -= len(p)
	return len(p), nil
}

// TestJournalStopsWhenTheWriterFails: a download cut off midway ends the journal with the
// writer's error, and the cursor's transaction with it.
func TestJournalStopsWhenTheWriterFails(t *testing.T) {
	defer func(n int) { journalChunk = n }(journalChunk)
	journalChunk = 2
	b := newLedgerBook(t)
	for i := range 10 {
		b.usage(t, time.Date(2026, 3, 10, i, 0, 0, 0, time.UTC), 1000, 700)
	}
	err := WriteJournal(context.Background(), b.pool, Month(2026, time.March), &failingWriter{left: 600})
	if err == nil || !strings.Contains(err.Error(), "the client went away") {
		t.Fatalf("err = %v, want the writer's error", err)
	}
	if n := b.pool.Stat().AcquiredConns(); n != 0 {
		t.Errorf("%d connections still held after the journal failed", n)
	}
	if err := WriteJournal(context.Background(), b.pool, Period{}, &bytes.Buffer{}); services.ErrorCode(err) != services.CodeInvalid {
		t.Errorf("a journal without a period: err = %v, want invalid", err)
	}
}
