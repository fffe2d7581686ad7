package invoicing

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/fixtures"
	"github.com/gpumarket/gpumarket/services/usage"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/services/ticket"
)

// world is a platform's billing side on a fresh database: customers, providers with
// offerings, the price book, a finance user, the real meter (fed usage events as the stream
// would deliver them, with the gateway's records written first), the ledger, the audit log and
// the invoicing service, all on one clock the tests move.
type world struct {
	t        *testing.T
	pool     *pgxpool.Pool
	ledger   *ledger.Ledger
	audit    *audit.Log
	meter    *metering.Meter
	requests *requestlog.RequestLog
	signer   *ticket.Signer
	svc      *Service

	mu   sync.Mutex
	now  time.Time
	seq  int
	keys map[string]string // each customer's API key

	finance, finance2 string // finance users
	// standard's price versions: $0.15/$0.30 per million input/output tokens from January,
	// $0.20/$0.50 from 2026-03-16 00:00 UTC.
	price, newPrice int64
}

// The tests' asks: $0.06 per million input tokens, $0.12 per million output tokens.
const (
	askIn  = 60_000
	askOut = 120_000
)

var (
	march     = MonthPeriod(2026, time.March)
	april     = MonthPeriod(2026, time.April)
	priceMove = time.Date(2026, 3, 16, 0, 0, 0, 0, time.UTC)
)

func newWorld(t *testing.T, opts ...func(*Config)) *world {
	t.Helper()
	w := &world{t: t, pool: dbtest.New(t), now: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), keys: map[string]string{}}
	clock := w.clock
	w.ledger = ledger.NewLedger(w.pool, clock)
	w.audit = audit.New(w.pool, clock)
	w.requests = requestlog.NewRequestLog(w.pool, metering.GatewayReads{}, clock, nil)
	w.signer, _ = ticket.NewSigner([]byte(strings.Repeat("k", 32)))
	w.meter = metering.NewMeter(metering.MeterConfig{Pool: w.pool, Ledger: w.ledger, Tickets: w.signer, Now: clock})
	cfg := Config{Pool: w.pool, Ledger: w.ledger, Audit: w.audit, Now: clock,
		Seller: Party{LegalName: "gpumarket Ltd", Address: "1 Dock Road\nDublin D01 X2Y3", Country: "IE", VATID: "IE1234567FA"}}
	for _, o := range opts {
		o(&cfg)
	}
	w.svc = New(cfg)
	w.finance = w.user(w.account("gpumarket finance"), "finance@example.test", "finance")
	w.finance2 = w.user(w.account("gpumarket finance 2"), "finance2@example.test", "finance")
	w.price = w.priceRow("standard", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 150_000, 300_000)
	w.newPrice = w.priceRow("standard", priceMove, 200_000, 500_000)
	return w
}

func (w *world) clock() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.now
}

// at moves the clock.
func (w *world) at(t time.Time) {
	w.mu.Lock()
	w.now = t
	w.mu.Unlock()
}

func (w *world) ctx() context.Context { return context.Background() }

func (w *world) scan(sql string, args []any, dst ...any) {
	w.t.Helper()
	if err := w.pool.QueryRow(w.ctx(), sql, args...).Scan(dst...); err != nil {
		w.t.Fatalf("%s: %v", sql, err)
	}
}

func (w *world) account(name string) string {
	w.t.Helper()
	return fixtures.Account(w.t, w.pool, name)
}

func (w *world) user(account, email, role string) string {
	w.t.Helper()
	return fixtures.User(w.t, w.pool, account, email, role)
}

func (w *world) priceRow(tier string, from time.Time, in, out int64) int64 {
	w.t.Helper()
	id := fixtures.Price(w.t, w.pool, tier, from, in, out)
	return id
}

// rig is a provider's offering.
type rig struct{ provider, offering string }

func (w *world) rig(provider string) rig {
	w.t.Helper()
	id := fixtures.Offering(w.t, w.pool, provider, fixtures.WithRegion("eu-west"), fixtures.WithModel("llama-3.1-8b"),
		fixtures.WithAsk(askIn, askOut))
	return rig{provider: provider, offering: id}
}

// request is one request a customer made of a rig: when it finished, its tokens, and when the
// meter metered it (a zero meteredAt is a second after it finished).
type request struct {
	customer  string
	rig       rig
	at        time.Time
	in, out   int64
	cached    int64 // of in, the input tokens the rig reports served from its prompt cache
	meteredAt time.Time
	// priceID is the price version its ticket carries: by default the one in force at at.
	priceID int64
	// askIn and askOut are its ticket's asks: by default the tests' asks.
	askIn, askOut int64
	// relayed, when set, is how many output tokens' worth of text the gateway relayed (four
	// bytes each): fewer than the rig reports makes the meter clip and flag the request.
	relayed int64
	// status is how the gateway saw the attempt end: by default ok.
	status requestlog.GatewayStatus
	// seenOut, when set, is the output the response's usage told the customer (the input is
	// in): by default the response carries no usage.
	seenOut int64
}

// use routes, records and meters a request as the platform would, and returns its request id.
func (w *world) use(r request) string {
	w.t.Helper()
	if r.meteredAt.IsZero() {
		r.meteredAt = r.at.Add(time.Second)
	}
	if r.priceID == 0 {
		r.priceID = w.price
		if !r.at.Before(priceMove) {
			r.priceID = w.newPrice
		}
	}
	if r.askIn == 0 {
		r.askIn, r.askOut = askIn, askOut
	}
	w.mu.Lock()
	w.seq++
	n := w.seq
	w.mu.Unlock()
	requestID := fmt.Sprintf("req_%06d", n)
	key := w.apiKey(r.customer)
	claims := ticket.Claims{RequestID: requestID, AccountID: r.customer, APIKeyID: key, OfferingID: r.rig.offering, Tier: "standard",
		AskInput: r.askIn, AskOutput: r.askOut, PriceID: r.priceID, MaxInputTokens: r.in, MaxOutputTokens: max(r.out, 1),
		IssuedAt: r.at.Add(-time.Second)}
	tk, err := w.signer.Sign(claims)
	if err != nil {
		w.t.Fatal(err)
	}
	ev := usage.NewEvent(fmt.Sprintf("evt_%06d", n), r.rig.provider, r.rig.offering, r.at, usage.Usage{
		RequestID: requestID, Ticket: tk, OfferingID: r.rig.offering, Model: "llama-3.1-8b", InputTokens: r.in,
		CachedInputTokens: r.cached, OutputTokens: r.out, TTFTMillis: 90, DurationMillis: 800, EnergyJoules: 10, EnergySource: usage.EnergyEstimated,
		Status: usage.StatusOK})
	body, err := usage.Encode(ev)
	if err != nil {
		w.t.Fatal(err)
	}
	relayed := r.out
	if r.relayed > 0 {
		relayed = r.relayed
	}
	var seen *admission.TokenCount
	if r.seenOut > 0 {
		seen = &admission.TokenCount{Input: r.in, Output: r.seenOut}
	}
	status := requestlog.GatewayOK
	if r.status != "" {
		status = r.status
	}
	w.requests.Record(requestlog.GatewayRequest{RequestID: requestID, AccountID: r.customer, APIKeyID: key, OfferingID: r.rig.offering,
		Tier: catalog.TierStandard, Model: "llama-3.1-8b", HTTPStatus: 200, Status: status,
		Duration: 800 * time.Millisecond, At: r.at, InputBytes: 4 * r.in, MaxInputTokens: r.in,
		MaxOutputTokens: max(r.out, 1), Streamed: true, RelayedOutputBytes: 4 * relayed, RelayedOutputChunks: relayed,
		Usage: seen})
	if err := w.requests.Flush(w.ctx()); err != nil {
		w.t.Fatal(err)
	}
	w.at(r.meteredAt)
	res, err := w.meter.ProcessMessages(w.ctx(), []metering.Message{{Seq: uint64(n),
		Subject: events.UsageSubject(r.rig.provider, r.rig.offering), Data: body}})
	if err != nil {
		w.t.Fatal(err)
	}
	if res.Stored != 1 {
		var why []string
		for _, rej := range res.Rejections {
			why = append(why, string(rej.Reason)+": "+rej.Detail)
		}
		w.t.Fatalf("the meter stored %d of the request at %s: refused %v, %d deferred", res.Stored, r.at, why, len(res.Deferred))
	}
	return requestID
}

// apiKey is the customer's API key, made on first use with a developer of the account.
func (w *world) apiKey(customer string) string {
	w.t.Helper()
	if k, ok := w.keys[customer]; ok {
		return k
	}
	user := w.user(customer, customer+"@example.test", "developer")
	key := fixtures.APIKey(w.t, w.pool, customer, user, "key")
	w.keys[customer] = key
	return key
}

// buy posts a purchase of credits at the clock's time, as the Stripe webhook posts it.
func (w *world) buy(customer string, at time.Time, cents int64) {
	w.t.Helper()
	w.at(at)
	credit, err := w.ledger.AccountFor(w.ctx(), ledger.AccountCustomerCredit, customer)
	if err != nil {
		w.t.Fatal(err)
	}
	clearing, err := w.ledger.AccountFor(w.ctx(), ledger.AccountStripeClearing, "")
	if err != nil {
		w.t.Fatal(err)
	}
	amount := money.Pico(cents) * money.PicoPerCent
	if _, _, err := w.ledger.Post(w.ctx(), ledger.TransactionInput{Kind: ledger.TransactionPurchase,
		Memo: "Credits bought with Stripe", Postings: []ledger.Posting{{Account: credit, Amount: amount}, {Account: clearing, Amount: -amount}},
	}); err != nil {
		w.t.Fatal(err)
	}
}

// close closes a period at the clock's time, by the finance user.
func (w *world) close(p Period) CloseProgress {
	w.t.Helper()
	pr, err := w.svc.Close(w.ctx(), CloseInput{Period: p, By: w.finance})
	if err != nil {
		w.t.Fatalf("close %s: %v", p, err)
	}
	return pr
}

// invoiceOf is the account's invoice for the period that is not void.
func (w *world) invoiceOf(account string, p Period) Invoice {
	w.t.Helper()
	var id string
	w.scan(`SELECT id::text FROM invoices WHERE account_id = $1 AND period = $2 AND status <> 'void'`,
		[]any{account, p.Start()}, &id)
	inv, err := w.svc.Invoice(w.ctx(), id)
	if err != nil {
		w.t.Fatal(err)
	}
	return inv
}

// statementOf is the provider's statement for the period that is not void.
func (w *world) statementOf(provider string, p Period) Statement {
	w.t.Helper()
	var id string
	w.scan(`SELECT id::text FROM statements WHERE provider_account_id = $1 AND period = $2 AND status <> 'void'`,
		[]any{provider, p.Start()}, &id)
	st, err := w.svc.Statement(w.ctx(), id)
	if err != nil {
		w.t.Fatal(err)
	}
	return st
}

// approve approves invoices by the finance user and fails the test on any refusal.
func (w *world) approve(ids ...string) []Approved {
	w.t.Helper()
	res, err := w.svc.ApproveInvoices(w.ctx(), w.finance, ids)
	if err != nil {
		w.t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			w.t.Fatalf("approve %s: %v", r.ID, r.Err)
		}
	}
	return res
}

// balance is a ledger account's cached balance.
func (w *world) balance(kind ledger.AccountKind, owner string) money.BigPico {
	w.t.Helper()
	id, err := w.ledger.AccountFor(w.ctx(), kind, owner)
	if err != nil {
		w.t.Fatal(err)
	}
	b, err := w.ledger.Balance(w.ctx(), id)
	if err != nil {
		w.t.Fatal(err)
	}
	return b
}

func pico(v int64) money.BigPico { return money.BigPicoOf(money.Pico(v)) }
