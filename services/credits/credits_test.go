package credits

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/fixtures"
	"github.com/gpumarket/gpumarket/services/ledger"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
)

// clock is a test's time, moved by hand. The webhook stamps deliveries with it; signatures
// are checked against the real time, as stripe-go does.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// fakeCheckout stands in for Stripe where a test is about what the platform does with a
// session, not about creating one: each purchase gets a session named after it, or err.
type fakeCheckout struct {
	err      error
	mu       sync.Mutex
	requests []CheckoutRequest
}

var _ Checkout = (*fakeCheckout)(nil)

func (f *fakeCheckout) CreateSession(_ context.Context, req CheckoutRequest) (CheckoutSession, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, req)
	if f.err != nil {
		return CheckoutSession{}, f.err
	}
	id := "cs_test_" + strings.ReplaceAll(req.PurchaseID, "-", "")
	return CheckoutSession{ID: id, URL: "https://checkout.stripe.test/c/pay/" + id}, nil
}

func (f *fakeCheckout) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

// testWebhookSecret signs the Stripe events of this package's tests.
const testWebhookSecret = "whsec_test_billing"

// shop is what a credits test works with: the credits service and the webhook that feeds
// it on a fresh database, one buying organisation with its developer, and the ledger
// accounts money moves between.
type shop struct {
	credits  *Credits
	webhook  *StripeWebhook
	ledger   *ledger.Ledger
	pool     *pgxpool.Pool
	dbURL    string
	clock    *clock
	org      string // the buying organisation
	user     string // its developer
	customer ledger.LedgerAccountID
	clearing ledger.LedgerAccountID
	revenue  ledger.LedgerAccountID
}

// setupShop returns a shop whose checkout is the given one (nil: a fakeCheckout).
func setupShop(t *testing.T, checkout Checkout) shop {
	t.Helper()
	if checkout == nil {
		checkout = &fakeCheckout{}
	}
	pool, dbURL := dbtest.NewWithURL(t)
	clk := &clock{now: testNow}
	l := ledger.NewLedger(pool, clk.Now)
	credits := NewCredits(pool, l, checkout, clk.Now)
	org := newOrg(t, pool, "Acme Labs")
	return shop{
		credits:  credits,
		webhook:  NewStripeWebhook(credits, []string{testWebhookSecret}),
		ledger:   l,
		pool:     pool,
		dbURL:    dbURL,
		clock:    clk,
		org:      org,
		user:     newUser(t, pool, org, "dev@acme.test"),
		customer: accountFor(t, l, ledger.AccountCustomerCredit, org),
		clearing: accountFor(t, l, ledger.AccountStripeClearing, ""),
		revenue:  accountFor(t, l, ledger.AccountPlatformRevenue, ""),
	}
}

func newUser(t testing.TB, pool *pgxpool.Pool, org, email string) string {
	t.Helper()
	return fixtures.User(t, pool, org, email, "developer", fixtures.UserCreatedAt(testNow))
}

// buy starts a purchase of cents for the shop's organisation.
func (s shop) buy(t testing.TB, cents int64) Purchase {
	t.Helper()
	p, _, err := s.credits.Start(context.Background(), StartInput{
		AccountID: s.org, UserID: s.user, AmountCents: cents,
		ReturnURL: "https://gpumarket.test/credits/return", CancelURL: "https://gpumarket.test/credits",
	})
	if err != nil {
		t.Fatalf("Start(%d cents): %v", cents, err)
	}
	return p
}

// purchaseRecord is a credit_purchases row as the database holds it.
type purchaseRecord struct {
	Status        PurchaseStatus
	AmountCents   int64
	RefundedCents int64
	SessionID     string
	PaymentIntent string
	CreditTxn     string
	Problem       string
	CreatedBy     string
}

func purchaseRow(t testing.TB, pool *pgxpool.Pool, id string) purchaseRecord {
	t.Helper()
	var r purchaseRecord
	if err := pool.QueryRow(context.Background(), `
		SELECT status, amount_cents, refunded_cents, coalesce(stripe_session_id, ''), coalesce(stripe_payment_intent, ''),
		       coalesce(credit_transaction_id::text, ''), problem, created_by::text
		FROM credit_purchases WHERE id = $1`, id).
		Scan(&r.Status, &r.AmountCents, &r.RefundedCents, &r.SessionID, &r.PaymentIntent, &r.CreditTxn, &r.Problem, &r.CreatedBy); err != nil {
		t.Fatalf("purchase %s: %v", id, err)
	}
	return r
}

// wantCredit asserts the organisation's credit, as the credits service reports it.
func (s shop) wantCredit(t testing.TB, org string, want money.Pico) {
	t.Helper()
	b, err := s.credits.Balance(context.Background(), org)
	if err != nil {
		t.Fatal(err)
	}
	if !b.Pico.Equal(want) || b.Negative != (want < 0) || "$"+b.USD != want.String() {
		t.Fatalf("Balance = %+v, want %s (negative %v)", b, want, want < 0)
	}
}

// countTransactions counts the ledger transactions of a kind.
func countTransactions(t testing.TB, pool *pgxpool.Pool, kind ledger.TransactionKind) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM ledger_transactions WHERE kind = $1`, string(kind)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func cents(n int64) money.Pico { return money.Pico(n) * money.PicoPerCent }

func TestParseAmountUSD(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in    string
		cents int64 // 0: refused
	}{
		{"20", 2000},
		{"20.50", 2050},
		{"$25", 2500},
		{" 25.5 ", 2550},
		{"5", 500},
		{"10000", 1_000_000},
		{"10000.00", 1_000_000},
		{"4.99", 0},
		{"10000.01", 0},
		{"abc", 0},
		{"1.234", 0},
		{"20.001", 0},
		{"-5", 0},
		{"", 0},
		{"99999999999999999999", 0},
	} {
		got, err := ParseAmountUSD(c.in)
		if c.cents != 0 {
			if err != nil || got != c.cents {
				t.Errorf("ParseAmountUSD(%q) = %d, %v; want %d", c.in, got, err, c.cents)
			}
			continue
		}
		var e *services.Error
		if got != 0 || !errors.As(err, &e) || e.Code != services.CodeInvalid || e.Fields["amount_usd"] == "" {
			t.Errorf("ParseAmountUSD(%q) = %d, %v; want invalid amount_usd", c.in, got, err)
		}
	}
}

func TestStartRefusesAmountsOutsideTheLimits(t *testing.T) {
	t.Parallel()
	checkout := &fakeCheckout{}
	s := setupShop(t, checkout)
	ctx := context.Background()

	for _, amount := range []int64{0, -2000, MinPurchaseCents - 1, MaxPurchaseCents + 1} {
		_, _, err := s.credits.Start(ctx, StartInput{AccountID: s.org, UserID: s.user, AmountCents: amount})
		var e *services.Error
		if !errors.As(err, &e) || e.Code != services.CodeInvalid || !strings.Contains(e.Fields["amount_usd"], "$5 and $10,000") {
			t.Errorf("Start(%d cents) = %v, want invalid amount_usd", amount, err)
		}
	}
	if n := countRows(t, s.pool, "credit_purchases"); n != 0 || checkout.calls() != 0 {
		t.Fatalf("refused amounts left %d purchases and %d checkout calls, want none", n, checkout.calls())
	}

	// The limits themselves are allowed.
	for _, amount := range []int64{MinPurchaseCents, MaxPurchaseCents} {
		p := s.buy(t, amount)
		if p.Status != PurchasePending || p.AmountCents != amount {
			t.Errorf("Start(%d cents) = %+v, want pending", amount, p)
		}
	}
	if n := countRows(t, s.pool, "credit_purchases"); n != 2 {
		t.Fatalf("%d purchases, want 2", n)
	}
	s.wantCredit(t, s.org, 0)
}

// TestStartWhenCheckoutFails: the payment provider does not answer. The buyer is told to try
// again, the purchase is kept as failed with the cause, and nothing is credited.
func TestStartWhenCheckoutFails(t *testing.T) {
	t.Parallel()
	checkout := &fakeCheckout{err: errors.New("stripe: connection refused")}
	s := setupShop(t, checkout)
	ctx := context.Background()

	p, sess, err := s.credits.Start(ctx, StartInput{AccountID: s.org, UserID: s.user, AmountCents: 2000})
	if services.ErrorCode(err) != services.CodeUnavailable || p.ID != "" || sess.URL != "" {
		t.Fatalf("Start = %+v, %+v, %v; want unavailable", p, sess, err)
	}
	if checkout.calls() != 1 {
		t.Fatalf("%d checkout calls, want 1", checkout.calls())
	}
	if e := (*services.Error)(nil); !errors.As(err, &e) || strings.Contains(e.Message, "connection refused") {
		t.Fatalf("the buyer is shown %v; want a plain message without the cause", err)
	}

	list, err := s.credits.Purchases(ctx, s.org, 10)
	if err != nil || len(list) != 1 {
		t.Fatalf("Purchases = %+v, %v; want the failed one", list, err)
	}
	row := purchaseRow(t, s.pool, list[0].ID)
	if row.Status != PurchaseFailed || row.SessionID != "" || !strings.Contains(row.Problem, "connection refused") {
		t.Fatalf("purchase = %+v, want failed with the cause", row)
	}
	if checkout.requests[0].PurchaseID != list[0].ID || checkout.requests[0].AccountID != s.org || checkout.requests[0].AmountCents != 2000 {
		t.Fatalf("checkout request = %+v", checkout.requests[0])
	}
	s.wantCredit(t, s.org, 0)
	if n := countRows(t, s.pool, "ledger_transactions"); n != 0 {
		t.Fatalf("%d ledger transactions, want 0", n)
	}
}

func TestPurchasesBelongToTheirAccount(t *testing.T) {
	t.Parallel()
	s := setupShop(t, nil)
	ctx := context.Background()

	first := s.buy(t, 2000)
	s.clock.Advance(time.Minute)
	second := s.buy(t, 750)
	list, err := s.credits.Purchases(ctx, s.org, 0)
	if err != nil || len(list) != 2 || list[0].ID != second.ID || list[1].ID != first.ID {
		t.Fatalf("Purchases = %+v, %v; want newest first", list, err)
	}
	if got, err := s.credits.Purchase(ctx, s.org, first.ID); err != nil || got.ID != first.ID || got.AmountCents != 2000 ||
		got.AccountID != s.org || got.Status != PurchasePending || !got.CreatedAt.Equal(testNow) {
		t.Fatalf("Purchase = %+v, %v; want %+v", got, err, first)
	}
	other := newOrg(t, s.pool, "Other Org")
	for _, c := range []struct{ account, id string }{{other, first.ID}, {s.org, "not-a-uuid"}, {s.org, strings.ToUpper(first.ID)}} {
		if _, err := s.credits.Purchase(ctx, c.account, c.id); services.ErrorCode(err) != services.CodeNotFound {
			t.Errorf("Purchase(%s, %s) = %v, want not_found", c.account, c.id, err)
		}
	}
	if list, err := s.credits.Purchases(ctx, other, 10); err != nil || len(list) != 0 {
		t.Fatalf("another account's Purchases = %+v, %v; want none", list, err)
	}
}

// TestAdjust: finance grants or takes back credit by hand. The customer's credit and
// platform revenue move by exactly the amount, in opposite directions, with the reason and
// the user who made it.
func TestAdjust(t *testing.T) {
	t.Parallel()
	s := setupShop(t, nil)
	ctx := context.Background()
	finance := newUser(t, s.pool, newOrg(t, s.pool, "gpumarket"), "finance@gpumarket.test")

	for _, c := range []struct {
		name  string
		in    AdjustInput
		field string
	}{
		{"no reason", AdjustInput{AccountID: s.org, Amount: cents(500), ByUserID: finance}, "reason"},
		{"blank reason", AdjustInput{AccountID: s.org, Amount: cents(500), Reason: "  \t ", ByUserID: finance}, "reason"},
		{"reason too long", AdjustInput{AccountID: s.org, Amount: cents(500), Reason: strings.Repeat("x", 401), ByUserID: finance}, "reason"},
		{"zero amount", AdjustInput{AccountID: s.org, Reason: "goodwill", ByUserID: finance}, "amount_usd"},
		{"no account", AdjustInput{Amount: cents(500), Reason: "goodwill", ByUserID: finance}, "account_id"},
		{"unknown user", AdjustInput{AccountID: s.org, Amount: cents(500), Reason: "goodwill", ByUserID: "0b7c2d7e-0000-4000-8000-000000000000"}, "created_by"},
	} {
		var e *services.Error
		if _, err := s.credits.Adjust(ctx, c.in); !errors.As(err, &e) || e.Code != services.CodeInvalid || e.Fields[c.field] == "" {
			t.Errorf("%s: Adjust = %v, want invalid %s", c.name, err, c.field)
		}
	}
	if _, err := s.credits.Adjust(ctx, AdjustInput{AccountID: "0b7c2d7e-0000-4000-8000-000000000000", Amount: 1, Reason: "x", ByUserID: finance}); services.ErrorCode(err) != services.CodeNotFound {
		t.Errorf("Adjust of no organisation = %v, want not_found", err)
	}
	if n := countRows(t, s.pool, "ledger_transactions"); n != 0 {
		t.Fatalf("refused adjustments posted %d transactions", n)
	}

	grant := usd(t, "12.345678901234")
	txn, err := s.credits.Adjust(ctx, AdjustInput{AccountID: s.org, Amount: grant, Reason: "  Outage on 3 March  ", ByUserID: finance})
	if err != nil {
		t.Fatal(err)
	}
	if txn.Kind != ledger.TransactionAdjustment || txn.CreatedBy != finance || txn.Memo != "Adjustment: Outage on 3 March" || !txn.OccurredAt.Equal(testNow) {
		t.Fatalf("adjustment = %+v", txn)
	}
	s.wantCredit(t, s.org, grant)
	wantBalance(t, s.ledger, s.revenue, -grant)

	takeBack := usd(t, "-20")
	if _, err := s.credits.Adjust(ctx, AdjustInput{AccountID: s.org, Amount: takeBack, Reason: "Chargeback", ByUserID: finance}); err != nil {
		t.Fatal(err)
	}
	s.wantCredit(t, s.org, grant+takeBack)
	wantBalance(t, s.ledger, s.revenue, -grant-takeBack)
	wantBalance(t, s.ledger, s.clearing, 0)

	var recorded int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM ledger_transactions WHERE kind = 'adjustment' AND created_by = $1`, finance).Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	if recorded != 2 {
		t.Fatalf("%d adjustments recorded with their author, want 2", recorded)
	}
	page, err := s.credits.History(ctx, s.org, 10, 0)
	if err != nil || len(page.Entries) != 2 || !page.Entries[0].Amount.Equal(takeBack) || page.Entries[0].Memo != "Adjustment: Chargeback" ||
		!page.Entries[1].Amount.Equal(grant) {
		t.Fatalf("History = %+v, %v", page, err)
	}
	checkInvariants(t, s.pool)
}

// A script loops on the buy form: each account gets at most MaxOpenCheckouts unpaid checkouts
// in a day, even asked for at once; the one over is refused with what to do, creates no
// session and stores nothing. A paid or failed checkout is not open, and a day later the
// oldest no longer counts.
func TestOpenCheckoutsAreCapped(t *testing.T) {
	t.Parallel()
	checkout := &fakeCheckout{}
	s := setupShop(t, checkout)
	ctx := context.Background()

	paid := s.buy(t, 2000)
	if got := deliver(t, s.webhook, CheckoutEvent("evt_cap_paid", "checkout.session.completed", paid, "paid", "pi_cap", testNow)); got != "credited $20.00" {
		t.Fatalf("paying the first checkout: %s", got)
	}
	failing := &fakeCheckout{err: errors.New("stripe: timeout")}
	if _, _, err := NewCredits(s.pool, s.ledger, failing, s.clock.Now).Start(ctx, StartInput{AccountID: s.org, UserID: s.user,
		AmountCents: 2000}); services.ErrorCode(err) != services.CodeUnavailable {
		t.Fatalf("a checkout the provider did not answer: %v", err)
	}

	var wg sync.WaitGroup
	var mu sync.Mutex
	started, refused := 0, 0
	for range 2 * MaxOpenCheckouts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := s.credits.Start(ctx, StartInput{AccountID: s.org, UserID: s.user, AmountCents: MaxPurchaseCents})
			mu.Lock()
			defer mu.Unlock()
			switch services.ErrorCode(err) {
			case "":
				started++
			case services.CodeConflict:
				refused++
				if !strings.Contains(err.Error(), "10 checkouts") || !strings.Contains(err.Error(), "Pay one of them") {
					t.Errorf("the refusal says %q; want how many are open and what to do", err)
				}
			default:
				t.Errorf("Start: %v", err)
			}
		}()
	}
	wg.Wait()
	if started != MaxOpenCheckouts || refused != MaxOpenCheckouts {
		t.Fatalf("20 $10,000 checkouts at once: %d started, %d refused; want %d and %d", started, refused,
			MaxOpenCheckouts, MaxOpenCheckouts)
	}
	// The paid one, the failed one and the ten open ones; one session each, none for the refused.
	if n := countRows(t, s.pool, "credit_purchases"); n != MaxOpenCheckouts+2 {
		t.Fatalf("%d purchases stored, want %d", n, MaxOpenCheckouts+2)
	}
	if n := checkout.calls(); n != MaxOpenCheckouts+1 {
		t.Fatalf("%d checkout sessions created, want %d", n, MaxOpenCheckouts+1)
	}
	// Another account is not affected.
	other := newOrg(t, s.pool, "Other Org")
	if _, _, err := s.credits.Start(ctx, StartInput{AccountID: other, UserID: newUser(t, s.pool, other, "o@other.test"),
		AmountCents: 2000}); err != nil {
		t.Fatalf("another account's checkout: %v", err)
	}
	s.clock.Advance(OpenCheckoutWindow)
	if _, _, err := s.credits.Start(ctx, StartInput{AccountID: s.org, UserID: s.user, AmountCents: 2000}); err != nil {
		t.Fatalf("a day later: %v", err)
	}
	s.wantCredit(t, s.org, cents(2000))
}
