package payouts

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/credits/stripemock/stripemocktest"
	"github.com/gpumarket/gpumarket/services/fixtures"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/credits/stripemock"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/money"
)

var (
	stripeMock stripemocktest.Shared
)

// stripeMockURL starts one stripe-mock for the package's tests, on first use; TestMain stops it.
func stripeMockURL(t *testing.T) string { return stripeMock.URL(t) }

func TestMain(m *testing.M) {
	code := m.Run()
	stripeMock.Stop()
	os.Exit(code)
}

var testNow = time.Date(2026, 4, 3, 10, 0, 0, 0, time.UTC)

const testWebhookSecret = "whsec_test_payouts"

// clock is a settable clock shared by the service and the ledger.
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

// stripeFront stands in front of stripe-mock where a test needs Stripe to behave as Stripe
// does and stripe-mock, which keeps no state, cannot: a transfer created under an idempotency
// key is answered again for that key, the transfers it made are listed by their transfer
// group, and an account the test marks as onboarded reads back as such. On demand it answers
// transfers with a Stripe error, or makes the transfer and drops the connection before
// answering (a timeout whose transfer went through). Everything else goes to stripe-mock.
type stripeFront struct {
	proxy     http.Handler
	mu        sync.Mutex
	byKey     map[string][]byte            // transfer answers by idempotency key
	byGroup   map[string][]json.RawMessage // transfers made, by transfer group
	onboarded map[string]bool
	refusal   []byte // while set, transfers are answered 400 with this body
	// accountRefusal, while set, answers account creations 400 with this body.
	accountRefusal []byte
	drop           bool // while set, a transfer is made and its answer never arrives
}

// stripeTest is a Stripe client on a stripeFront on stripe-mock, and the record of what the
// client sent.
type stripeTest struct {
	front  *stripeFront
	rec    *stripemock.Recorder
	client *StripeConnect
}

func newStripeTest(t *testing.T) stripeTest {
	t.Helper()
	proxy, err := stripemock.Proxy(stripeMockURL(t))
	if err != nil {
		t.Fatal(err)
	}
	front := &stripeFront{proxy: proxy, byKey: map[string][]byte{}, byGroup: map[string][]json.RawMessage{}, onboarded: map[string]bool{}}
	rec := stripemock.Record(front)
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	return stripeTest{front: front, rec: rec, client: NewStripeConnect(credits.NewStripeAPI("sk_test_payouts", srv.URL))}
}

func (f *stripeFront) set(fn func(f *stripeFront)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// transfersMade is how many distinct transfers Stripe made.
func (f *stripeFront) transfersMade() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.byKey)
}

func (f *stripeFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	accountRefusal := f.accountRefusal
	f.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/accounts" && accountRefusal != nil:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(accountRefusal)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/transfers":
		f.transfer(w, r)
	case r.Method == http.MethodGet && r.URL.Path == "/v1/transfers" && r.URL.Query().Get("transfer_group") != "":
		f.mu.Lock()
		made := f.byGroup[r.URL.Query().Get("transfer_group")]
		f.mu.Unlock()
		if len(made) == 0 {
			f.proxy.ServeHTTP(w, r)
			return
		}
		list := map[string]any{"object": "list", "url": "/v1/transfers", "has_more": false, "data": made}
		b, _ := json.Marshal(list)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/accounts/"):
		id := strings.TrimPrefix(r.URL.Path, "/v1/accounts/")
		f.mu.Lock()
		onboarded := f.onboarded[id]
		f.mu.Unlock()
		rec := httptest.NewRecorder()
		f.proxy.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if onboarded && rec.Code == http.StatusOK {
			var acct map[string]any
			if err := json.Unmarshal(body, &acct); err == nil {
				acct["details_submitted"], acct["payouts_enabled"], acct["charges_enabled"] = true, true, true
				body, _ = json.Marshal(acct)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	default:
		f.proxy.ServeHTTP(w, r)
	}
}

func (f *stripeFront) transfer(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	refusal, drop := f.refusal, f.drop
	key := r.Header.Get("Idempotency-Key")
	answer, replay := f.byKey[key]
	f.mu.Unlock()
	if refusal != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(refusal)
		return
	}
	if !replay {
		rec := httptest.NewRecorder()
		f.proxy.ServeHTTP(rec, r)
		answer = rec.Body.Bytes()
		if rec.Code == http.StatusOK {
			var tr struct {
				Group string `json:"transfer_group"`
			}
			_ = json.Unmarshal(answer, &tr)
			f.mu.Lock()
			f.byKey[key] = answer
			f.byGroup[tr.Group] = append(f.byGroup[tr.Group], json.RawMessage(bytes.Clone(answer)))
			f.mu.Unlock()
		}
	}
	if drop {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(answer)
}

// stripeErrorBody is an error as Stripe answers it.
func stripeErrorBody(code, message string) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"type": "invalid_request_error", "code": code,
		"message": message, "param": "destination"}})
	return b
}

// env is the service on a fresh database, with a provider and a customer whose usage funds
// the provider's payable.
type env struct {
	svc        *Service
	pool       *pgxpool.Pool
	ledger     *ledger.Ledger
	webhook    *credits.StripeWebhook
	stripe     stripeTest
	clock      *clock
	statements *statementBook
	provider   string // the provider's account id
	customer   string // the customer's account id
	payable    ledger.LedgerAccountID
	clearing   ledger.LedgerAccountID
	credit     ledger.LedgerAccountID // the customer's credit
}

func setup(t *testing.T) env {
	t.Helper()
	pool := dbtest.New(t)
	clk := &clock{now: testNow}
	l := ledger.NewLedger(pool, clk.Now)
	st := newStripeTest(t)
	book := &statementBook{statements: map[string]statement{}}
	svc := NewService(Config{Pool: pool, Ledger: l, Stripe: st.client, Statements: book, Now: clk.Now})
	webhook := credits.NewStripeWebhook(credits.NewCredits(pool, l, nil, clk.Now), []string{testWebhookSecret})
	webhook.On("account.updated", svc.AccountUpdated)
	e := env{svc: svc, pool: pool, ledger: l, webhook: webhook, stripe: st, clock: clk, statements: book,
		provider: newOrg(t, pool, "Fjord GPU Co-op"), customer: newOrg(t, pool, "Acme Labs")}
	ctx := context.Background()
	var err error
	if e.payable, err = l.AccountFor(ctx, ledger.AccountProviderPayable, e.provider); err != nil {
		t.Fatal(err)
	}
	if e.clearing, err = l.AccountFor(ctx, ledger.AccountStripeClearing, ""); err != nil {
		t.Fatal(err)
	}
	if e.credit, err = l.AccountFor(ctx, ledger.AccountCustomerCredit, e.customer); err != nil {
		t.Fatal(err)
	}
	return e
}

func newOrg(t *testing.T, pool *pgxpool.Pool, name string) string {
	t.Helper()
	return fixtures.Account(t, pool, name, fixtures.AccountCreatedAt(testNow))
}

// earn posts usage that owes the provider exactly pico (the customer's credit pays it).
func (e env) earn(t *testing.T, pico money.Pico, key string) {
	t.Helper()
	if _, _, err := e.ledger.Post(context.Background(), ledger.TransactionInput{Kind: ledger.TransactionUsage, IdempotencyKey: key,
		Memo: "usage batch", Postings: []ledger.Posting{{Account: e.credit, Amount: -pico}, {Account: e.payable, Amount: pico}}}); err != nil {
		t.Fatal(err)
	}
}

// takeBack posts a clawback of pico from the provider's payable, as a refund of usage does.
func (e env) takeBack(t *testing.T, pico money.Pico, key string) {
	t.Helper()
	if _, _, err := e.ledger.Post(context.Background(), ledger.TransactionInput{Kind: ledger.TransactionRefund, IdempotencyKey: key,
		Memo: "clawback", Postings: []ledger.Posting{{Account: e.payable, Amount: -pico}, {Account: e.credit, Amount: pico}}}); err != nil {
		t.Fatal(err)
	}
}

func (e env) balance(t *testing.T, id ledger.LedgerAccountID) money.BigPico {
	t.Helper()
	b, err := e.ledger.Balance(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// onboard connects the provider's Stripe account and completes its onboarding as Stripe
// would, through the return from onboarding.
func (e env) onboard(t *testing.T) ConnectedAccount {
	t.Helper()
	ctx := context.Background()
	a, _, err := e.svc.Connect(ctx, e.connectInput("US"))
	if err != nil {
		t.Fatal(err)
	}
	e.stripe.front.set(func(f *stripeFront) { f.onboarded[a.StripeAccountID] = true })
	a, err = e.svc.Refresh(ctx, e.provider)
	if err != nil || a.State != AccountComplete {
		t.Fatalf("onboarding: %+v, %v", a, err)
	}
	return a
}

func (e env) connectInput(country string) ConnectInput {
	return ConnectInput{ProviderAccountID: e.provider, Email: "ops@fjord.test", Country: country,
		RefreshURL: "https://gpumarket.test/provider/payouts/onboarding", ReturnURL: "https://gpumarket.test/provider/payouts/return"}
}

// statement is a provider statement as the invoicing side would hand it to Pay.
type statement struct {
	id, provider, period, number string
	cents                        int64
}

func (s statement) StatementID() string     { return s.id }
func (s statement) PayeeAccountID() string  { return s.provider }
func (s statement) PayableCents() int64     { return s.cents }
func (s statement) StatementPeriod() string { return s.period }
func (s statement) StatementNumber() string { return s.number }

// statementBook is the invoicing side as Retry and settle see it: the statements to pay, the
// ones voided, and the statements marked paid with their payout, in the paying transaction.
type statementBook struct {
	mu         sync.Mutex
	statements map[string]statement
	voided     map[string]bool
	paid       map[string]Payout
	failPaid   bool // MarkPaidTx fails: the paying transaction must roll back
}

var _ Statements = (*statementBook)(nil)

func (b *statementBook) add(s statement) statement {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.statements[s.id] = s
	return s
}

func (b *statementBook) StatementToPay(_ context.Context, id string) (Statement, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.voided[id] {
		return nil, errVoided
	}
	s, ok := b.statements[id]
	if !ok {
		return nil, errVoided
	}
	return s, nil
}

func (b *statementBook) MarkPaidTx(ctx context.Context, tx pgx.Tx, id string, p Payout) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failPaid {
		return errMarkPaid
	}
	// Something in the transaction, so that a rollback of it shows.
	if _, err := tx.Exec(ctx, `SELECT 1`); err != nil {
		return err
	}
	if b.paid == nil {
		b.paid = map[string]Payout{}
	}
	b.paid[id] = p
	return nil
}

func (b *statementBook) paidPayout(id string) (Payout, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, ok := b.paid[id]
	return p, ok
}
