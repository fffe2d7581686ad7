package metering

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/events/natstest"

	"github.com/gpumarket/gpumarket/services/usage"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/events/natsserver"
	"github.com/gpumarket/gpumarket/services/fixtures"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/services/ticket"
)

// meterEnv is a meter on a fresh database and an embedded NATS server, with one customer and
// its API key, one provider and two offerings, and the gateway's record of requests
// (requestlog.RequestLog), which the tests write as the gateway would.
type meterEnv struct {
	pool     *pgxpool.Pool
	js       jetstream.JetStream
	nc       *nats.Conn
	cons     jetstream.Consumer
	meter    *Meter
	signer   *ticket.Signer
	ledger   *ledger.Ledger
	requests *requestlog.RequestLog
	customer string
	apiKey   string // the customer's
	provider string
	other    string // another provider
	offering string // the provider's
	foreign  string // the other provider's
	// price and nextPrice are the standard tier's price versions, $0.15/$0.30 per million
	// input/output tokens until tomorrow, $0.20/$0.40 from then; batchPrice is the batch
	// tier's.
	price, nextPrice, batchPrice int64
	now                          time.Time
	seq                          atomic.Int64
}

// The asks the tests' tickets carry unless they say otherwise: $0.06 per million input tokens
// and $0.12 per million output tokens.
const (
	testAskIn  = 60_000
	testAskOut = 120_000
)

func setupMeter(t *testing.T) *meterEnv {
	t.Helper()
	srv := natstest.Start(t, natsserver.EmbeddedOptions{})
	// No per-rig cap on the stream: these tests publish bursts larger than it before the meter runs, to see what
	// the meter makes of them (the cap itself is the usage package's to test).
	return setupMeterOn(t, srv.ClientURL(), usage.StreamOptions{AckWait: 2 * time.Second, MaxPendingPerRig: -1})
}

// setupMeterOn is setupMeter on the NATS at url (one server, or a cluster's URLs comma-separated), its usage
// streams made with opts.
func setupMeterOn(t *testing.T, url string, opts usage.StreamOptions) *meterEnv {
	t.Helper()
	ctx := context.Background()
	e := &meterEnv{pool: dbtest.New(t), now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	var err error
	e.nc, e.js, err = events.Connect(ctx, url, "meter-test", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.nc.Close)
	e.cons, err = usage.EnsureStreams(ctx, e.js, opts)
	if err != nil {
		t.Fatal(err)
	}
	e.signer, _ = ticket.NewSigner([]byte(strings.Repeat("t", 32)))
	e.ledger = ledger.NewLedger(e.pool, func() time.Time { return e.now })
	e.requests = requestlog.NewRequestLog(e.pool, GatewayReads{}, nil, nil)
	e.meter = NewMeter(MeterConfig{Pool: e.pool, Ledger: e.ledger, Tickets: e.signer, JS: e.js, Consumer: e.cons,
		BatchSize: 500, Now: func() time.Time { return e.now }})
	e.customer = fixtures.Account(t, e.pool, "Acme")
	user := fixtures.User(t, e.pool, e.customer, "dev@acme.test", "developer")
	e.apiKey = fixtures.APIKey(t, e.pool, e.customer, user, "test")
	e.provider = fixtures.Account(t, e.pool, "Fjord")
	e.other = fixtures.Account(t, e.pool, "Other")
	e.offering = fixtures.Offering(t, e.pool, e.provider)
	e.foreign = fixtures.Offering(t, e.pool, e.other)
	e.price = fixtures.Price(t, e.pool, "standard", e.now.AddDate(0, -1, 0), 150_000, 300_000)
	e.nextPrice = fixtures.Price(t, e.pool, "standard", e.now.AddDate(0, 0, 1), 200_000, 400_000)
	e.batchPrice = fixtures.Price(t, e.pool, "batch", e.now.AddDate(0, -1, 0), 50_000, 100_000)
	return e
}

// route is a request the gateway routed to the provider's offering, as a test makes it: what
// the rig reports (in, out), the ticket's terms and the gateway's record of the attempt.
type route struct {
	kind    ticket.Kind
	in, out int64
	cached  int64 // of in, the cached input tokens the rig reports
	at      time.Time
	// rig, when set, is the offering served, its provider and tier, the customer billed and
	// its API key; by default the provider's offering, standard, billed to the customer.
	rig *testRig
	// ticket adjusts the ticket's claims; by default the price version e.price, the asks
	// testAskIn and testAskOut, and bounds that are the reported tokens.
	ticket func(*ticket.Claims)
	// record adjusts the gateway's record; by default a 200 streamed whole, relaying four bytes
	// per output token in a chunk per token. noRecord writes none.
	record   func(*requestlog.GatewayRequest)
	noRecord bool
	// source is how the rig obtained the request's 12.5 J; estimated by default.
	source usage.EnergySource
}

// routed builds the signed usage event of a route and writes the gateway's record of it; it
// returns the event id and body and the request id.
func (e *meterEnv) routed(t *testing.T, r route) (eventID string, body []byte, requestID string) {
	t.Helper()
	n := e.seq.Add(1)
	requestID = fmt.Sprintf("req_%d", n)
	maxOut := r.out
	if r.kind == ticket.KindEmbedding {
		maxOut = 0
	}
	rig := r.rig
	if rig == nil {
		rig = &testRig{provider: e.provider, offering: e.offering, tier: "standard", customer: e.customer, apiKey: e.apiKey,
			priceID: e.price, askIn: testAskIn, askOut: testAskOut}
	}
	claims := ticket.Claims{RequestID: requestID, AccountID: rig.customer, APIKeyID: rig.apiKey, OfferingID: rig.offering,
		Tier: rig.tier, Kind: r.kind, AskInput: rig.askIn, AskOutput: rig.askOut, PriceID: rig.priceID,
		MaxInputTokens: r.in, MaxOutputTokens: maxOut, Stream: true, IssuedAt: r.at.Add(-time.Second)}
	if r.ticket != nil {
		r.ticket(&claims)
	}
	tk, err := e.signer.Sign(claims)
	if err != nil {
		t.Fatal(err)
	}
	ev := usage.NewEvent(fmt.Sprintf("evt_%d", n), rig.provider, rig.offering, r.at, usage.Usage{RequestID: requestID, Ticket: tk,
		OfferingID: rig.offering, Model: cmp.Or(rig.model, "m"), InputTokens: r.in, CachedInputTokens: r.cached, OutputTokens: r.out,
		TTFTMillis: 100, DurationMillis: 900,
		EnergyJoules: 12.5, EnergySource: cmp.Or(r.source, usage.EnergyEstimated), Status: usage.StatusOK})
	if body, err = usage.Encode(ev); err != nil {
		t.Fatal(err)
	}
	if !r.noRecord {
		g := requestlog.GatewayRequest{RequestID: requestID, AccountID: rig.customer, APIKeyID: rig.apiKey, OfferingID: rig.offering,
			Tier: catalog.Tier(rig.tier), Model: cmp.Or(rig.model, "m"), HTTPStatus: 200, Status: requestlog.GatewayOK, Duration: 900 * time.Millisecond,
			At: r.at, InputBytes: 4 * r.in, MaxInputTokens: claims.MaxInputTokens, MaxOutputTokens: claims.MaxOutputTokens,
			Streamed: true, RelayedOutputBytes: 4 * r.out, RelayedOutputChunks: r.out}
		if r.record != nil {
			r.record(&g)
		}
		e.record(t, g)
	}
	return ev.ID, body, requestID
}

// testRig is an offering as the tests route to it: its provider and tier, the customer billed
// and its key, and the terms its tickets carry.
type testRig struct {
	provider, offering, tier string
	model                    string // "m" unless set
	customer, apiKey         string
	priceID, askIn, askOut   int64
}

// newCustomer makes a customer account with a user and an API key; it returns the account and
// the key.
func (e *meterEnv) newCustomer(t *testing.T, name string) (account, apiKey string) {
	t.Helper()
	account = fixtures.Account(t, e.pool, name)
	user := fixtures.User(t, e.pool, account, account+"@example.test", "developer")
	return account, fixtures.APIKey(t, e.pool, account, user, "key")
}

// newOffering lists an offering of the provider in a tier.
func (e *meterEnv) newOffering(t *testing.T, provider, tier string) string {
	t.Helper()
	return fixtures.Offering(t, e.pool, provider, fixtures.WithTier(tier), fixtures.WithAsk(10000, 10000))
}

// record writes the gateway's record of an attempt, as the gateway's request log does.
func (e *meterEnv) record(t *testing.T, g requestlog.GatewayRequest) {
	t.Helper()
	e.requests.Record(g)
	if err := e.requests.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// event builds a signed, valid usage event of the provider's offering, bounded and recorded as
// the rig reported it.
func (e *meterEnv) event(t *testing.T, in, out int64, at time.Time) (string, []byte) {
	t.Helper()
	return e.eventOfKind(t, ticket.KindGeneration, in, out, at)
}

// eventOfKind builds the event of a request of a kind (the ticket says which).
func (e *meterEnv) eventOfKind(t *testing.T, kind ticket.Kind, in, out int64, at time.Time) (string, []byte) {
	t.Helper()
	id, body, _ := e.routed(t, route{kind: kind, in: in, out: out, at: at})
	return id, body
}

func (e *meterEnv) publish(t *testing.T, subject, id string, body []byte) {
	t.Helper()
	msg := nats.NewMsg(subject)
	msg.Data = body
	if id != "" {
		msg.Header.Set(usage.HeaderMsgID, id)
	}
	if _, err := e.js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
}

// start runs the meter until the returned stop is called; stop returns once Run has.
func (e *meterEnv) start() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.meter.Run(ctx) }()
	return func() { cancel(); <-done }
}

// drain runs the meter until every published event is acknowledged.
func (e *meterEnv) drain(t *testing.T) {
	t.Helper()
	stop := e.start()
	e.waitDrained(t, 20*time.Second)
	stop()
}

// waitDrained waits until the consumer has nothing pending or unacknowledged.
func (e *meterEnv) waitDrained(t *testing.T, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	// Everything published before the call, up to the stream's last sequence now, must be acknowledged: the
	// consumer's own counts can lag an event just published.
	stream, err := e.js.Stream(context.Background(), e.cons.CachedInfo().Stream)
	if err != nil {
		t.Fatal(err)
	}
	si, err := stream.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	last := si.State.LastSeq
	for {
		info, err := e.cons.Info(context.Background())
		if err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.Delivered.Stream > 0 &&
			info.AckFloor.Stream >= last {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the meter did not drain the stream: %+v", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *meterEnv) balance(t *testing.T, kind ledger.AccountKind, owner string) money.BigPico {
	t.Helper()
	id, err := e.ledger.AccountFor(context.Background(), kind, owner)
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.ledger.Balance(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wantBalances asserts the customer's credit, the provider's payable and the platform's
// revenue after the customer was charged charge and the provider is owed payable.
func (e *meterEnv) wantBalances(t *testing.T, charge, payable money.Pico) {
	t.Helper()
	if got := e.balance(t, ledger.AccountCustomerCredit, e.customer); !got.Equal(-charge) {
		t.Errorf("customer balance %s, want %s", got, -charge)
	}
	if got := e.balance(t, ledger.AccountProviderPayable, e.provider); !got.Equal(payable) {
		t.Errorf("provider payable %s, want %s", got, payable)
	}
	if got := e.balance(t, ledger.AccountPlatformRevenue, ""); !got.Equal(charge - payable) {
		t.Errorf("revenue %s, want %s", got, charge-payable)
	}
}

func (e *meterEnv) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// rejected is how many events were refused, per reason, as the counts keep them.
func (e *meterEnv) rejected(t *testing.T) map[string]int {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT reason, sum(rejected)::int FROM usage_rejection_counts GROUP BY reason`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for rows.Next() {
		var r string
		var n int
		if err := rows.Scan(&r, &n); err != nil {
			t.Fatal(err)
		}
		out[r] = n
	}
	return out
}

// charge is what in and out tokens cost at the standard tier's first price, and payable what
// they earn at the tests' asks.
func charge(in, out int64) money.Pico  { return money.Pico(in*150_000 + out*300_000) }
func payable(in, out int64) money.Pico { return money.Pico(in*testAskIn + out*testAskOut) }

func TestMeterPricesOnceAndPostsToTheLedger(t *testing.T) {
	e := setupMeter(t)
	subject := events.UsageSubject(e.provider, e.offering)
	id1, ev1 := e.event(t, 1000, 500, e.now.Add(-time.Minute))
	id2, ev2 := e.event(t, 2000, 0, e.now.Add(-time.Minute)) // no completion token: no charge
	e.publish(t, subject, id1, ev1)
	e.publish(t, subject, id2, ev2)
	e.drain(t)

	// 1000 x $0.15/M + 500 x $0.30/M = $0.0003; the provider earns 1000 x $0.06/M + 500 x
	// $0.12/M = $0.00012.
	e.wantBalances(t, 300_000_000, 120_000_000)
	if n := e.count(t, `SELECT count(*) FROM usage_events`); n != 2 {
		t.Fatalf("%d usage rows, want 2", n)
	}
	if n := e.count(t, `SELECT count(*) FROM usage_events WHERE event_id = $1 AND charge_pico = 0 AND payable_pico = 0`, id2); n != 1 {
		t.Error("a request without completion tokens was charged")
	}
	if n := e.count(t, `SELECT count(*) FROM usage_events WHERE event_id = $1 AND price_id = $2 AND input_price = 150000
		AND output_price = 300000 AND ask_input_price = $3 AND ask_output_price = $4 AND input_tokens = 1000
		AND output_tokens = 500 AND reported_input_tokens = 1000 AND reported_output_tokens = 500 AND flag IS NULL`,
		id1, e.price, testAskIn, testAskOut); n != 1 {
		t.Error("the usage row does not carry the ticket's terms and the tokens reported and billed")
	}
	if n := e.count(t, `SELECT requests FROM usage_hourly WHERE account_id = $1`, e.customer); n != 2 {
		t.Errorf("rollup counts %d requests, want 2", n)
	}
	if n := e.count(t, `SELECT count(*) FROM ledger_transactions WHERE kind = 'usage'`); n != 1 {
		t.Errorf("%d usage transactions, want one for the batch", n)
	}
}

// A request answered whole has no time to first token: whatever its rig reports in its place (the
// generation time, 100 ms of 900 here) is not kept. Its row stores NULL, the streamed one its 100 ms.
func TestMeterKeepsNoFirstTokenTimeOfAWholeAnswer(t *testing.T) {
	e := setupMeter(t)
	subject := events.UsageSubject(e.provider, e.offering)
	at := e.now.Add(-time.Minute)
	id1, ev1, streamed := e.routed(t, route{in: 1000, out: 500, at: at})
	id2, ev2, whole := e.routed(t, route{in: 1000, out: 500, at: at, ticket: func(c *ticket.Claims) { c.Stream = false },
		record: func(g *requestlog.GatewayRequest) { g.Streamed, g.RelayedOutputChunks = false, 0 }})
	e.publish(t, subject, id1, ev1)
	e.publish(t, subject, id2, ev2)
	e.drain(t)
	if n := e.count(t, `SELECT count(*) FROM usage_events WHERE request_id = $1 AND ttft_ms = 100`, streamed); n != 1 {
		t.Error("the streamed request lost its 100 ms to the first token")
	}
	if n := e.count(t, `SELECT count(*) FROM usage_events WHERE request_id = $1 AND ttft_ms IS NULL AND output_tokens = 500`, whole); n != 1 {
		t.Error("the request answered whole was stored with a time to first token")
	}
	page, err := NewReports(e.pool).Requests(context.Background(), e.customer, UsageFilter{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*float64{}
	for _, r := range page.Requests {
		got[r.RequestID] = r.TTFTMillis
	}
	if len(got) != 2 || got[streamed] == nil || *got[streamed] != 100 || got[whole] != nil {
		t.Errorf("usage rows' first-token times %v; want 100 ms streamed and none (null) for the whole answer", got)
	}
}

// An embedding produces no completion token and is charged for its input; a generation
// without one is charged nothing.
func TestMeterChargesEmbeddingsForTheirInput(t *testing.T) {
	e := setupMeter(t)
	subject := events.UsageSubject(e.provider, e.offering)
	embedding, body := e.eventOfKind(t, ticket.KindEmbedding, 4000, 0, e.now.Add(-time.Minute))
	e.publish(t, subject, embedding, body)
	generation, body := e.event(t, 4000, 0, e.now.Add(-time.Minute))
	e.publish(t, subject, generation, body)
	e.drain(t)

	c, p := charge(4000, 0), payable(4000, 0) // 4,000 tokens at $0.15/M, earning $0.06/M
	e.wantBalances(t, c, p)
	if n := e.count(t, `SELECT count(*) FROM usage_events WHERE event_id = $1 AND charge_pico = $2`, embedding, int64(c)); n != 1 {
		t.Error("the embedding's usage row does not carry its charge")
	}
	if n := e.count(t, `SELECT count(*) FROM usage_events WHERE event_id = $1 AND charge_pico = 0`, generation); n != 1 {
		t.Error("a generation without completion tokens was charged")
	}
}

func TestMeterRefusesDuplicatesAndBadEventsWithoutStalling(t *testing.T) {
	e := setupMeter(t)
	subject := events.UsageSubject(e.provider, e.offering)
	id1, ev1 := e.event(t, 100, 100, e.now.Add(-time.Minute))
	e.publish(t, subject, id1, ev1)
	e.drain(t)

	// Cases 3, 4, 5 and 7 of docs/failure-cases.md: a stored event again (past the stream's
	// window: no msg id), the same id with another payload, a new event and its twin in one
	// batch, garbage, an unsigned event, and an event published for the other provider's
	// offering.
	_, changed := e.event(t, 999_999, 999_999, e.now.Add(-time.Minute))
	changed = []byte(strings.Replace(string(changed), `"id":"evt_2"`, `"id":"`+id1+`"`, 1))
	id3, ev3 := e.event(t, 10, 20, e.now.Add(-time.Minute))
	e.publish(t, subject, "", ev1)
	e.publish(t, subject, "", changed)
	e.publish(t, subject, id3, ev3)
	e.publish(t, subject, "", ev3)
	e.publish(t, subject, "", []byte(`{not json`))
	unsigned := []byte(strings.Replace(string(ev3), `"ticket":"`, `"ticket":"x`, 1))
	e.publish(t, subject, "", unsigned)
	_, forForeign := e.event(t, 10, 20, e.now.Add(-time.Minute))
	e.publish(t, events.UsageSubject(e.provider, e.foreign), "", forForeign)
	e.drain(t)

	if n := e.count(t, `SELECT count(*) FROM usage_events`); n != 2 {
		t.Fatalf("%d usage rows, want the 2 distinct valid events", n)
	}
	reasons := e.rejected(t)
	want := map[string]int{"duplicate": 3, "malformed": 1, "ticket_invalid": 1, "subject_mismatch": 1}
	for r, n := range want {
		if reasons[r] != n {
			t.Errorf("%d rejections for %s, want %d (all: %v)", reasons[r], r, n, reasons)
		}
	}
	// Few enough to be kept whole, every one of them.
	if n := e.count(t, `SELECT count(*) FROM usage_rejections`); n != 6 {
		t.Errorf("%d rejections kept whole, want all 6", n)
	}
	e.wantBalances(t, charge(100, 100)+charge(10, 20), payable(100, 100)+payable(10, 20))
}

// A refusal delivered again is counted and kept once; a different message that has the same
// sequence number (a stream deleted and made again) is one of its own.
func TestRejectionsAreKeptPerMessage(t *testing.T) {
	e := setupMeter(t)
	ctx := context.Background()
	write := func(seq uint64, raw string) {
		t.Helper()
		err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
			_, err := e.meter.insertRejections(ctx, tx, []StoredRejection{{Message: Message{Seq: seq, Subject: events.UsageSubject("p", "o"), Data: []byte(raw)},
				Reason: usage.RejectMalformed, Detail: "not JSON"}}, e.now)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	write(7, "first stream's message")
	write(7, "first stream's message") // delivered again
	write(7, "the new stream's message 7")
	if n := e.count(t, `SELECT count(*) FROM usage_rejections WHERE stream_seq = 7`); n != 2 {
		t.Errorf("%d rejections of sequence 7 kept, want 2: one per message", n)
	}
	if n := e.count(t, `SELECT rejected FROM usage_rejection_counts WHERE provider_id = 'p' AND offering_id = 'o'`); n != 2 {
		t.Errorf("%d rejections counted, want 2: one per message", n)
	}
}
