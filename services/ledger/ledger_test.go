package ledger

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/fixtures"
	"github.com/gpumarket/gpumarket/services/money"
)

var testNow = time.Date(2026, 3, 14, 9, 30, 0, 0, time.UTC)

// bundle is what a ledger test works with: the ledger, its pool, and the accounts of one
// customer, one provider and the platform.
type bundle struct {
	ledger   *Ledger
	pool     *pgxpool.Pool
	customer LedgerAccountID
	provider LedgerAccountID
	revenue  LedgerAccountID
	stripe   LedgerAccountID
}

func setup(t *testing.T) bundle {
	t.Helper()
	pool := dbtest.New(t)
	l := NewLedger(pool, func() time.Time { return testNow })
	return bundle{
		ledger:   l,
		pool:     pool,
		customer: accountFor(t, l, AccountCustomerCredit, newOrg(t, pool, "Acme Labs")),
		provider: accountFor(t, l, AccountProviderPayable, newOrg(t, pool, "Rigs R Us")),
		revenue:  accountFor(t, l, AccountPlatformRevenue, ""),
		stripe:   accountFor(t, l, AccountStripeClearing, ""),
	}
}

func newOrg(t testing.TB, pool *pgxpool.Pool, name string) string {
	t.Helper()
	return fixtures.Account(t, pool, name, fixtures.AccountCreatedAt(testNow))
}

func accountFor(t testing.TB, l *Ledger, kind AccountKind, owner string) LedgerAccountID {
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

func post(t testing.TB, l *Ledger, in TransactionInput) Transaction {
	t.Helper()
	txn, created, err := l.Post(context.Background(), in)
	if err != nil {
		t.Fatalf("Post(%s): %v", in.Kind, err)
	}
	if !created {
		t.Fatalf("Post(%s): created = false, want true", in.Kind)
	}
	return txn
}

func purchase(b bundle, amount money.Pico) TransactionInput {
	return TransactionInput{Kind: TransactionPurchase, Postings: []Posting{
		{Account: b.customer, Amount: amount}, {Account: b.stripe, Amount: -amount}}}
}

func wantBalance(t testing.TB, l *Ledger, id LedgerAccountID, want money.Pico) {
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

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func TestAccountForGetsOrCreates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	org := newOrg(t, b.pool, "Second Customer")
	var wg sync.WaitGroup
	ids := make([]LedgerAccountID, 8)
	errs := make([]error, 8)
	for i := range ids {
		wg.Go(func() { ids[i], errs[i] = b.ledger.AccountFor(ctx, AccountCustomerCredit, org) })
	}
	wg.Wait()
	for i := range ids {
		if errs[i] != nil || ids[i] != ids[0] {
			t.Fatalf("concurrent AccountFor: %v, %v; want one account", ids, errs)
		}
	}
	if ids[0] == b.customer {
		t.Fatal("two organisations share a credit account")
	}
	if got := accountFor(t, b.ledger, AccountPlatformRevenue, ""); got != b.revenue {
		t.Fatalf("platform revenue account %s, then %s: want one", b.revenue, got)
	}
	if got := countRows(t, b.pool, "ledger_accounts"); got != 5 {
		t.Fatalf("%d ledger accounts, want 5", got)
	}

	for _, c := range []struct {
		kind  AccountKind
		owner string
		code  services.Code
	}{
		{AccountCustomerCredit, "", services.CodeInvalid},
		{AccountPlatformRevenue, org, services.CodeInvalid},
		{"savings", org, services.CodeInvalid},
		{AccountProviderPayable, "0b7c2d7e-0000-4000-8000-000000000000", services.CodeNotFound},
		{AccountProviderPayable, "not-a-uuid", services.CodeNotFound},
	} {
		if _, err := b.ledger.AccountFor(ctx, c.kind, c.owner); services.ErrorCode(err) != c.code {
			t.Errorf("AccountFor(%s, %q) = %v, want %s", c.kind, c.owner, err, c.code)
		}
	}
}

func TestPostRecordsTransactionAndMovesBalances(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	occurred := testNow.Add(-time.Hour)
	txn := post(t, b.ledger, TransactionInput{
		Kind: TransactionPurchase, IdempotencyKey: "checkout:cs_test_1", Memo: "Credits, $25",
		OccurredAt: occurred.In(time.FixedZone("CET", 3600)),
		Postings:   []Posting{{b.customer, usd(t, "25")}, {b.stripe, usd(t, "-25")}},
	})
	if txn.ID == "" || txn.Kind != TransactionPurchase || !txn.OccurredAt.Equal(occurred) ||
		txn.OccurredAt.Location() != time.UTC || !txn.CreatedAt.Equal(testNow) || len(txn.Postings) != 2 {
		t.Fatalf("transaction = %+v", txn)
	}
	// 1,234,567 tokens at $0.60 per million is $0.7407402: the provider's ask is $0.45.
	charge, _ := money.ChargeFor(1_234_567, 600_000)
	ask, _ := money.ChargeFor(1_234_567, 450_000)
	post(t, b.ledger, TransactionInput{Kind: TransactionUsage, Memo: "batch 1", Postings: []Posting{
		{b.customer, -charge}, {b.provider, ask}, {b.revenue, charge - ask}}})

	wantBalance(t, b.ledger, b.customer, usd(t, "24.2592598"))
	wantBalance(t, b.ledger, b.provider, usd(t, "0.55555515"))
	wantBalance(t, b.ledger, b.revenue, usd(t, "0.18518505"))
	wantBalance(t, b.ledger, b.stripe, usd(t, "-25"))
	checkInvariants(t, b.pool)

	all, err := b.ledger.Balances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range all {
		got = append(got, fmt.Sprintf("%s %s %s", a.Kind, a.OwnerName, a.Balance))
	}
	want := []string{
		"platform_revenue  $0.18518505", "stripe_clearing  $-25.00",
		"customer_credit Acme Labs $24.2592598", "provider_payable Rigs R Us $0.55555515",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Balances = %q\nwant %q", got, want)
	}

	page, err := b.ledger.History(ctx, b.customer, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Entries) != 2 || page.Next != 0 ||
		page.Entries[0].Kind != TransactionUsage || !page.Entries[0].Amount.Equal(-charge) || page.Entries[0].Memo != "batch 1" ||
		page.Entries[1].Kind != TransactionPurchase || page.Entries[1].Transaction != txn.ID ||
		!page.Entries[1].OccurredAt.Equal(occurred) {
		t.Fatalf("History = %+v", page)
	}
	if _, err := b.ledger.Balance(ctx, "0b7c2d7e-0000-4000-8000-000000000000"); services.ErrorCode(err) != services.CodeNotFound {
		t.Fatalf("Balance of no account: %v, want not_found", err)
	}
	if _, err := b.ledger.History(ctx, "nope", 10, 0); services.ErrorCode(err) != services.CodeNotFound {
		t.Fatalf("History of no account: %v, want not_found", err)
	}
}

func TestPostRefusesTransactionsThatDoNotBalance(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	post(t, b.ledger, purchase(b, usd(t, "10")))

	cases := []struct {
		name  string
		in    TransactionInput
		field string
	}{
		{"no postings", TransactionInput{Kind: TransactionAdjustment}, "postings"},
		{"off by one picodollar", TransactionInput{Kind: TransactionAdjustment, Postings: []Posting{
			{b.customer, usd(t, "1")}, {b.revenue, usd(t, "-0.999999999999")}}}, "postings"},
		{"one-sided", TransactionInput{Kind: TransactionRefund, Postings: []Posting{{b.customer, -1}}}, "postings"},
		{"moves nothing", TransactionInput{Kind: TransactionAdjustment, Postings: []Posting{{b.customer, 0}, {b.revenue, 0}}}, "postings"},
		{"wraps around int64", TransactionInput{Kind: TransactionAdjustment, Postings: []Posting{
			{b.customer, math.MaxInt64}, {b.customer, math.MaxInt64}, {b.revenue, 2}}}, "postings"},
		{"balanced only after wrapping", TransactionInput{Kind: TransactionAdjustment, Postings: []Posting{
			{b.customer, math.MaxInt64}, {b.revenue, math.MaxInt64}, {b.stripe, 2}}}, "postings"},
		{"unknown account", TransactionInput{Kind: TransactionAdjustment, Postings: []Posting{
			{b.customer, 5}, {"0b7c2d7e-0000-4000-8000-000000000000", -5}}}, "postings"},
		{"malformed account", TransactionInput{Kind: TransactionAdjustment, Postings: []Posting{{b.customer, 5}, {"x", -5}}}, "postings"},
		{"unknown kind", TransactionInput{Kind: "gift", Postings: []Posting{{b.customer, 5}, {b.revenue, -5}}}, "kind"},
		{"malformed creator", TransactionInput{Kind: TransactionAdjustment, CreatedBy: "admin",
			Postings: []Posting{{b.customer, 5}, {b.revenue, -5}}}, "created_by"},
		{"unknown creator", TransactionInput{Kind: TransactionAdjustment, CreatedBy: "0b7c2d7e-0000-4000-8000-000000000000",
			Postings: []Posting{{b.customer, 5}, {b.revenue, -5}}}, "created_by"},
	}
	for _, c := range cases {
		_, created, err := b.ledger.Post(ctx, c.in)
		var e *services.Error
		if created || !errors.As(err, &e) || e.Code != services.CodeInvalid || e.Fields[c.field] == "" {
			t.Errorf("%s: Post = created %v, %v; want invalid %s", c.name, created, err, c.field)
		}
	}
	if got := countRows(t, b.pool, "ledger_transactions"); got != 1 {
		t.Fatalf("%d transactions stored, want only the purchase", got)
	}
	wantBalance(t, b.ledger, b.customer, usd(t, "10"))
	wantBalance(t, b.ledger, b.revenue, 0)
	checkInvariants(t, b.pool)
}

// TestDatabaseRefusesUnbalancedTransactions goes around Post: the schema itself refuses a
// transaction that does not balance or has no postings, at commit.
func TestDatabaseRefusesUnbalancedTransactions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	balanced := post(t, b.ledger, purchase(b, 10))

	attempts := map[string]func(tx pgx.Tx) error{
		"one-sided": func(tx pgx.Tx) error {
			var id string
			if err := tx.QueryRow(ctx, `INSERT INTO ledger_transactions (kind, occurred_at, created_at)
				VALUES ('adjustment', now(), now()) RETURNING id`).Scan(&id); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO ledger_postings (transaction_id, ledger_account_id, amount) VALUES ($1, $2, 5)`, id, b.customer)
			return err
		},
		"no postings": func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO ledger_transactions (kind, occurred_at, created_at) VALUES ('adjustment', now(), now())`)
			return err
		},
		"appended to an old transaction": func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO ledger_postings (transaction_id, ledger_account_id, amount) VALUES ($1, $2, 7)`, balanced.ID, b.customer)
			return err
		},
	}
	for name, attempt := range attempts {
		err := pgx.BeginFunc(ctx, b.pool, attempt)
		if pgCode(err) != "23514" {
			t.Errorf("%s: commit = %v, want a check violation", name, err)
		}
	}
	if got := countRows(t, b.pool, "ledger_transactions"); got != 1 {
		t.Fatalf("%d transactions stored, want 1", got)
	}
	wantBalance(t, b.ledger, b.customer, 10)
	checkInvariants(t, b.pool)
}

func TestIdempotencyKeyPostsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	in := purchase(b, usd(t, "20"))
	in.IdempotencyKey = "checkout:cs_test_a1"
	first := post(t, b.ledger, in)

	// The same event again, its postings listed in another order and with another memo:
	// the stored transaction comes back and nothing is posted.
	again := in
	again.Memo = "retried webhook"
	again.Postings = []Posting{in.Postings[1], in.Postings[0]}
	second, created, err := b.ledger.Post(ctx, again)
	if err != nil || created || second.ID != first.ID || second.Memo != first.Memo || len(second.Postings) != 2 {
		t.Fatalf("second Post = %+v, created %v, %v; want the first transaction, not created", second, created, err)
	}

	// The key used for a different amount is a conflict, not a silent replay.
	other := purchase(b, usd(t, "2000"))
	other.IdempotencyKey = in.IdempotencyKey
	if _, _, err := b.ledger.Post(ctx, other); services.ErrorCode(err) != services.CodeConflict {
		t.Fatalf("Post with a reused key and other postings: %v, want conflict", err)
	}

	// Eight deliveries of one new event at once: exactly one posts.
	race := purchase(b, usd(t, "5"))
	race.IdempotencyKey = "checkout:cs_test_b2"
	var wg sync.WaitGroup
	var mu sync.Mutex
	createdCount, ids := 0, map[string]bool{}
	for range 8 {
		wg.Go(func() {
			txn, created, err := b.ledger.Post(ctx, race)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("concurrent Post: %v", err)
				return
			}
			ids[txn.ID] = true
			if created {
				createdCount++
			}
		})
	}
	wg.Wait()
	if createdCount != 1 || len(ids) != 1 {
		t.Fatalf("concurrent deliveries: %d created, %d distinct transactions; want 1 and 1", createdCount, len(ids))
	}

	wantBalance(t, b.ledger, b.customer, usd(t, "25"))
	if got := countRows(t, b.pool, "ledger_transactions"); got != 2 {
		t.Fatalf("%d transactions, want 2", got)
	}
	checkInvariants(t, b.pool)
}

func TestLedgerIsAppendOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	post(t, b.ledger, purchase(b, usd(t, "10")))

	for _, stmt := range []string{
		`UPDATE ledger_postings SET amount = amount * 2`,
		`DELETE FROM ledger_postings`,
		`TRUNCATE ledger_postings CASCADE`,
		`UPDATE ledger_transactions SET memo = 'edited'`,
		`DELETE FROM ledger_transactions`,
		`TRUNCATE ledger_transactions CASCADE`,
		`UPDATE ledger_accounts SET balance = balance + 1`,
		`UPDATE ledger_accounts SET kind = 'customer_credit', owner_account_id = NULL WHERE kind = 'platform_revenue'`,
		`DELETE FROM ledger_accounts WHERE kind = 'platform_revenue'`,
		`TRUNCATE ledger_accounts CASCADE`,
	} {
		if _, err := b.pool.Exec(ctx, stmt); err == nil {
			t.Errorf("%s: succeeded, want refused", stmt)
		} else if pgCode(err) != "23001" {
			t.Errorf("%s: %v, want a restrict violation", stmt, err)
		}
	}
	wantBalance(t, b.ledger, b.customer, usd(t, "10"))
	if got := countRows(t, b.pool, "ledger_postings"); got != 2 {
		t.Fatalf("%d postings, want 2", got)
	}
	checkInvariants(t, b.pool)
}

// TestPostTxCommitsWithTheCaller: a service posts inside its own database transaction, and
// the posting lives or dies with that transaction.
func TestPostTxCommitsWithTheCaller(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	errLater := errors.New("the caller's own write failed")
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, _, err := b.ledger.PostTx(ctx, tx, purchase(b, usd(t, "3"))); err != nil {
			return err
		}
		return errLater
	})
	if !errors.Is(err, errLater) {
		t.Fatal(err)
	}
	wantBalance(t, b.ledger, b.customer, 0)

	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		// An invalid input leaves the caller's transaction usable.
		if _, _, err := b.ledger.PostTx(ctx, tx, TransactionInput{Kind: TransactionPurchase}); services.ErrorCode(err) != services.CodeInvalid {
			t.Errorf("PostTx with no postings: %v, want invalid", err)
		}
		_, _, err := b.ledger.PostTx(ctx, tx, purchase(b, usd(t, "3")))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	wantBalance(t, b.ledger, b.customer, usd(t, "3"))
	checkInvariants(t, b.pool)
}

// TestPostAllTxPostsEachTransactionWhole: several transactions posted in one go are each stored
// with their own postings and memo, move the balances as posting them one by one would, and
// input one of them breaks posts none of them, leaving the caller's transaction usable.
func TestPostAllTxPostsEachTransactionWhole(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	other := accountFor(t, b.ledger, AccountCustomerCredit, newOrg(t, b.pool, "Other Labs"))
	post(t, b.ledger, purchase(b, usd(t, "10")))
	usage := func(customer LedgerAccountID, charge, payable, memo string) TransactionInput {
		return TransactionInput{Kind: TransactionUsage, Memo: memo, Postings: []Posting{
			{Account: customer, Amount: -usd(t, charge)}, {Account: b.provider, Amount: usd(t, payable)},
			{Account: b.revenue, Amount: usd(t, charge) - usd(t, payable)}}}
	}
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		keyed := usage(b.customer, "1", "0.5", "keyed")
		keyed.IdempotencyKey = "usage-1"
		if err := b.ledger.PostAllTx(ctx, tx, []TransactionInput{usage(b.customer, "1", "0.5", "fine"), keyed}); services.ErrorCode(err) != services.CodeInvalid {
			t.Errorf("PostAllTx with an idempotency key: %v, want invalid", err)
		}
		unbalanced := usage(other, "1", "0.5", "unbalanced")
		unbalanced.Postings[2].Amount++
		if err := b.ledger.PostAllTx(ctx, tx, []TransactionInput{usage(b.customer, "1", "0.5", "fine"), unbalanced}); services.ErrorCode(err) != services.CodeInvalid {
			t.Errorf("PostAllTx with an unbalanced transaction: %v, want invalid", err)
		}
		return b.ledger.PostAllTx(ctx, tx, []TransactionInput{
			usage(b.customer, "2", "1.5", "Usage: 3 requests"), usage(other, "0.75", "0.25", "Usage: 1 requests")})
	})
	if err != nil {
		t.Fatal(err)
	}
	wantBalance(t, b.ledger, b.customer, usd(t, "8"))
	wantBalance(t, b.ledger, other, -usd(t, "0.75"))
	wantBalance(t, b.ledger, b.provider, usd(t, "1.75"))
	wantBalance(t, b.ledger, b.revenue, usd(t, "1"))

	// Each transaction holds its own three postings, the customer's among them.
	rows, err := b.pool.Query(ctx, `SELECT t.memo, count(*), sum(p.amount)::text,
			bool_or(p.ledger_account_id = ANY ($1::uuid[]))
		FROM ledger_transactions t JOIN ledger_postings p ON p.transaction_id = t.id
		WHERE t.kind = 'usage' GROUP BY t.id, t.memo ORDER BY t.memo`, []string{string(b.customer), string(other)})
	if err != nil {
		t.Fatal(err)
	}
	type txnRow struct {
		memo     string
		postings int
		sum      string
		customer bool
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (x txnRow, err error) {
		return x, r.Scan(&x.memo, &x.postings, &x.sum, &x.customer)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []txnRow{{"Usage: 1 requests", 3, "0", true}, {"Usage: 3 requests", 3, "0", true}}
	if !slices.Equal(got, want) {
		t.Fatalf("usage transactions %v, want %v", got, want)
	}
	checkInvariants(t, b.pool)
}

// TestLedgerPropertyRandomOperations runs 2,000 random purchases, usage batches, refunds,
// adjustments, payouts and replays across several accounts, from a fixed seed. After each,
// every transaction sums to zero, every cached balance equals the sum of its postings, and
// each balance equals the one an in-memory model of the same operations expects.
func TestLedgerPropertyRandomOperations(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(2026, 3))

	customers := []LedgerAccountID{b.customer}
	providers := []LedgerAccountID{b.provider}
	for i := range 2 {
		customers = append(customers, accountFor(t, b.ledger, AccountCustomerCredit, newOrg(t, b.pool, fmt.Sprintf("Customer %d", i))))
		providers = append(providers, accountFor(t, b.ledger, AccountProviderPayable, newOrg(t, b.pool, fmt.Sprintf("Provider %d", i))))
	}
	prices := []money.MicroUSD{80_000, 150_000, 300_000, 600_000}
	model := map[LedgerAccountID]money.Pico{}
	var posted []TransactionInput

	for i := range 2000 {
		cust := customers[rng.IntN(len(customers))]
		prov := providers[rng.IntN(len(providers))]
		cents := money.Pico(1+rng.IntN(100_000)) * money.PicoPerCent
		var in TransactionInput
		switch op := rng.IntN(10); {
		case op < 3:
			in = TransactionInput{Kind: TransactionPurchase, Postings: []Posting{{cust, cents}, {b.stripe, -cents}}}
		case op < 7:
			tokens := rng.Int64N(5_000_000) + 1
			price := prices[rng.IntN(len(prices))]
			charge, _ := money.ChargeFor(tokens, price)
			ask, _ := money.ChargeFor(tokens, price*money.MicroUSD(50+rng.IntN(50))/100)
			in = TransactionInput{Kind: TransactionUsage, Postings: []Posting{{cust, -charge}, {prov, ask}, {b.revenue, charge - ask}}}
		case op < 8:
			in = TransactionInput{Kind: TransactionRefund, Postings: []Posting{{cust, -cents / 3}, {b.stripe, cents / 3}}}
		case op < 9:
			amount := money.Pico(rng.Int64N(2_000_000_000_000) - 1_000_000_000_000)
			if amount == 0 {
				amount = 1
			}
			in = TransactionInput{Kind: TransactionAdjustment, Postings: []Posting{{cust, amount}, {b.revenue, -amount}}}
		default:
			payout := max(model[prov]/2, 1)
			in = TransactionInput{Kind: TransactionPayout, Postings: []Posting{{prov, -payout}, {b.stripe, payout}}}
		}
		rng.Shuffle(len(in.Postings), func(i, j int) { in.Postings[i], in.Postings[j] = in.Postings[j], in.Postings[i] })
		if rng.IntN(4) == 0 {
			in.IdempotencyKey = fmt.Sprintf("op-%d", i)
		}
		// Now and then, replay an earlier keyed transaction instead: it must change nothing.
		replaying := len(posted) > 0 && rng.IntN(10) == 0
		if replaying {
			in = posted[rng.IntN(len(posted))]
		}

		_, created, err := b.ledger.Post(ctx, in)
		if err != nil {
			t.Fatalf("operation %d (%s): %v", i, in.Kind, err)
		}
		if created == replaying {
			t.Fatalf("operation %d (%s): created = %v, replay = %v", i, in.Kind, created, replaying)
		}
		if created {
			for _, p := range in.Postings {
				model[p.Account] += p.Amount
			}
			if in.IdempotencyKey != "" {
				posted = append(posted, in)
			}
		}

		checkInvariants(t, b.pool)
		all, err := b.ledger.Balances(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range all {
			if !a.Balance.Equal(model[a.Account]) {
				t.Fatalf("after operation %d: %s %s has %s, model says %s", i, a.Kind, a.OwnerName, a.Balance, model[a.Account])
			}
		}
	}
}

// TestConcurrentPostsOnSharedAccounts: 16 workers post 50 transactions each, charging and
// crediting one customer account and sharing the platform accounts, half of them listing
// the postings in reverse order. Every transaction commits (no deadlock, since accounts are
// locked in id order), and the balances are exactly what the postings add up to.
func TestConcurrentPostsOnSharedAccounts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const workers, perWorker = 16, 50
	topUp := usd(t, "0.25")
	charge, _ := money.ChargeFor(123_457, 600_000) // $0.0740742
	ask, _ := money.ChargeFor(123_457, 410_000)
	var wg sync.WaitGroup
	errs := make(chan error, workers*perWorker)
	for w := range workers {
		wg.Go(func() {
			for j := range perWorker {
				in := TransactionInput{Kind: TransactionUsage, Postings: []Posting{{b.customer, -charge}, {b.provider, ask}, {b.revenue, charge - ask}}}
				if j%2 == 0 {
					in = TransactionInput{Kind: TransactionPurchase, Postings: []Posting{{b.stripe, -topUp}, {b.customer, topUp}, {b.revenue, 0}}}
				}
				if w%2 == 1 {
					slices.Reverse(in.Postings)
				}
				if _, _, err := b.ledger.Post(ctx, in); err != nil {
					errs <- fmt.Errorf("worker %d, transaction %d: %w", w, j, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	n := money.Pico(workers * perWorker / 2)
	wantBalance(t, b.ledger, b.customer, n*topUp-n*charge)
	wantBalance(t, b.ledger, b.provider, n*ask)
	wantBalance(t, b.ledger, b.revenue, n*(charge-ask))
	wantBalance(t, b.ledger, b.stripe, -n*topUp)
	if got := countRows(t, b.pool, "ledger_transactions"); got != workers*perWorker {
		t.Fatalf("%d transactions, want %d", got, workers*perWorker)
	}
	checkInvariants(t, b.pool)
}

// TestFieldCase13SmallTopUpsAndBurnsNeverDrift (docs/failure-cases.md, case 13): many one-cent
// top-ups and many burns of a few tokens each, every one far below a cent. The balance equals
// the sum of the postings to the picodollar, and reading the history back page by page gives
// it again. Rounding each burn to cents, instead, would lose all of them.
func TestFieldCase13SmallTopUpsAndBurnsNeverDrift(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(13, 13))

	var want money.Pico
	var roundedEachToCents int64
	for i := range 1200 {
		if i%4 == 0 {
			post(t, b.ledger, purchase(b, money.PicoPerCent))
			want += money.PicoPerCent
			roundedEachToCents++
			continue
		}
		tokens := rng.Int64N(40) + 1
		charge, err := money.ChargeFor(tokens, 149_000) // $0.149 per million: a few millionths of a cent per burn
		if err != nil {
			t.Fatal(err)
		}
		ask, _ := money.ChargeFor(tokens, 97_000)
		post(t, b.ledger, TransactionInput{Kind: TransactionUsage, Postings: []Posting{
			{b.customer, -charge}, {b.provider, ask}, {b.revenue, charge - ask}}})
		want -= charge
		if charge.Decimal(2) != "0.00" {
			t.Fatalf("burn %s rounds to %s; the case wants burns below half a cent", charge, charge.Decimal(2))
		}
	}

	wantBalance(t, b.ledger, b.customer, want)
	checkInvariants(t, b.pool)
	var sum string
	if err := b.pool.QueryRow(ctx, `SELECT sum(amount)::text FROM ledger_postings WHERE ledger_account_id = $1`, b.customer).Scan(&sum); err != nil {
		t.Fatal(err)
	}
	if sum != fmt.Sprint(int64(want)) {
		t.Fatalf("sum of postings %s, balance %d", sum, int64(want))
	}

	var fromHistory money.BigPico
	var entries int
	for before := PostingID(0); ; {
		page, err := b.ledger.History(ctx, b.customer, 97, before)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Entries {
			fromHistory = fromHistory.Add(e.Amount)
			entries++
		}
		if page.Next == 0 {
			break
		}
		before = page.Next
	}
	if entries != 1200 || !fromHistory.Equal(want) {
		t.Fatalf("history: %d entries summing to %s; want 1200 summing to %s", entries, fromHistory, want)
	}
	if naive := money.Pico(roundedEachToCents) * money.PicoPerCent; naive == want {
		t.Fatalf("rounding each burn to cents should have lost the burns; both give %s", want)
	}
}

// TestFieldCase8TenMillionEventsStayExact (docs/failure-cases.md, case 8): ten million events
// of a million tokens each. A charge is tokens × price picodollars, an exact integer. At the
// realtime output price ($0.60 per million) the total is $6,000,000 = 6e18 picodollars, inside
// int64 (9.2e18), so Go sums it exactly with checked additions. At a premium $15 per million
// the total, 1.5e20, is past int64: Go reports the overflow at the exact event where it
// happens instead of wrapping, and PostgreSQL's NUMERIC(38,0) (up to 1e38) sums it exactly.
// The ledger stores the same NUMERIC, so a balance past int64 stays exact in the database and
// reading it into a Pico fails loudly.
func TestFieldCase8TenMillionEventsStayExact(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const events, tokens = 10_000_000, 1_000_000

	charge, err := money.ChargeFor(tokens, 600_000)
	if err != nil || charge != 60*money.PicoPerCent {
		t.Fatalf("ChargeFor = %s, %v", charge, err)
	}
	var total money.Pico
	for range events {
		if total, err = total.Add(charge); err != nil {
			t.Fatal(err)
		}
	}
	if total != 6_000_000*money.PicoPerUSD || total.Decimal(2) != "6000000.00" {
		t.Fatalf("Go total %s, want $6,000,000.00", total)
	}

	sqlSum := func(charge money.Pico) string {
		var s string
		if err := b.pool.QueryRow(ctx, `SELECT sum($1::numeric(38,0))::text FROM generate_series(1, $2::int)`,
			int64(charge), events).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if got := sqlSum(charge); got != "6000000000000000000" {
		t.Fatalf("SQL total %s", got)
	}

	premium, _ := money.ChargeFor(tokens, 15_000_000)
	total = 0
	overflowAt := 0
	for i := 1; i <= events; i++ {
		if total, err = total.Add(premium); err != nil {
			overflowAt = i
			break
		}
	}
	if wantAt := math.MaxInt64/int64(premium) + 1; !errors.Is(err, money.ErrOverflow) || int64(overflowAt) != wantAt {
		t.Fatalf("premium sum: overflow at event %d (%v), want ErrOverflow at event %d", overflowAt, err, wantAt)
	}
	if got := sqlSum(premium); got != "150000000000000000000" {
		t.Fatalf("SQL premium total %s", got)
	}

	// Two $5,000,000 adjustments put platform revenue at 1e19 picodollars.
	five := 5_000_000 * money.PicoPerUSD
	for range 2 {
		post(t, b.ledger, TransactionInput{Kind: TransactionAdjustment, Postings: []Posting{{b.revenue, five}, {b.stripe, -five}}})
	}
	var stored string
	if err := b.pool.QueryRow(ctx, `SELECT balance::text FROM ledger_accounts WHERE id = $1`, b.revenue).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != "10000000000000000000" {
		t.Fatalf("stored revenue %s", stored)
	}
	// Read back exactly: finance's pages answer with balances of any size, Stripe clearing's
	// at minus as much.
	if got, err := b.ledger.Balance(ctx, b.revenue); err != nil || got.String() != "$10000000.00" {
		t.Fatalf("Balance past int64 = %s, %v; want $10000000.00", got, err)
	}
	all, err := b.ledger.Balances(ctx)
	if err != nil {
		t.Fatalf("Balances past int64: %v", err)
	}
	found := 0
	for _, a := range all {
		switch a.Account {
		case b.revenue:
			found++
			if a.Balance.Decimal(2) != "10000000.00" {
				t.Errorf("revenue in Balances = %s", a.Balance)
			}
		case b.stripe:
			found++
			if a.Balance.Decimal(2) != "-10000000.00" {
				t.Errorf("Stripe clearing in Balances = %s", a.Balance)
			}
		}
	}
	if found != 2 {
		t.Errorf("Balances listed %d of revenue and Stripe clearing", found)
	}
	page, err := b.ledger.History(ctx, b.revenue, 10, 0)
	if err != nil || len(page.Entries) != 2 || page.Entries[0].Amount.Add(page.Entries[1].Amount).String() != "$10000000.00" {
		t.Fatalf("History past int64 = %+v, %v", page, err)
	}
	checkInvariants(t, b.pool)
}
