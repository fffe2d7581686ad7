package metering

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services/billing"
	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/events/natsserver"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/ticket"
)

// meterEnv is a meter on a fresh database and an embedded NATS server, with one customer,
// one provider and two offerings.
type meterEnv struct {
	pool     *pgxpool.Pool
	js       jetstream.JetStream
	nc       *nats.Conn
	meter    *Meter
	signer   *ticket.Signer
	ledger   *billing.Ledger
	customer string
	provider string
	other    string // another provider
	offering string // the provider's, ask $0.10 per million tokens
	foreign  string // the other provider's
	now      time.Time
	seq      atomic.Int64
}

func setupMeter(t *testing.T) *meterEnv {
	t.Helper()
	ctx := context.Background()
	e := &meterEnv{pool: dbtest.New(t), now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	srv, err := natsserver.StartEmbedded(natsserver.EmbeddedOptions{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	e.nc, e.js, err = events.Connect(ctx, srv.ClientURL(), "meter-test", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.nc.Close)
	cons, err := EnsureStreams(ctx, e.js, StreamOptions{AckWait: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e.signer, _ = ticket.NewSigner([]byte(strings.Repeat("t", 32)))
	e.ledger = billing.NewLedger(e.pool, func() time.Time { return e.now })
	e.meter = NewMeter(MeterConfig{Pool: e.pool, Ledger: e.ledger, Tickets: e.signer, JS: e.js, Consumer: cons,
		BatchSize: 500, Now: func() time.Time { return e.now }})
	q := func(sql string, args ...any) string {
		var id string
		if err := e.pool.QueryRow(ctx, sql, args...).Scan(&id); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return id
	}
	e.customer = q(`INSERT INTO accounts (name, created_at) VALUES ('Acme', now()) RETURNING id`)
	e.provider = q(`INSERT INTO accounts (name, created_at) VALUES ('Fjord', now()) RETURNING id`)
	e.other = q(`INSERT INTO accounts (name, created_at) VALUES ('Other', now()) RETURNING id`)
	offering := `INSERT INTO offerings (provider_account_id, gpu, gpu_count, region, model, ask_micro_usd_per_mtok,
		agent_url, tier, status, created_at, updated_at)
		VALUES ($1, 'rtx-4090', 4, 'eu', 'm', $2, 'http://x', 'standard', 'active', now(), now()) RETURNING id`
	e.offering = q(offering, e.provider, 100_000)
	e.foreign = q(offering, e.other, 100_000)
	// Standard costs $0.15 in and $0.30 out per million tokens; from tomorrow $0.20 and $0.40.
	for _, p := range []struct {
		from    time.Time
		in, out int64
	}{{e.now.AddDate(0, -1, 0), 150_000, 300_000}, {e.now.AddDate(0, 0, 1), 200_000, 400_000}} {
		if _, err := e.pool.Exec(ctx, `INSERT INTO prices (tier, input_micro_usd_per_mtok, output_micro_usd_per_mtok, effective_from, created_at)
			VALUES ('standard', $1, $2, $3, now())`, p.in, p.out, p.from); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// event builds a signed, valid usage event of the provider's offering.
func (e *meterEnv) event(t *testing.T, in, out int64, at time.Time) (string, []byte) {
	t.Helper()
	return e.eventOfKind(t, ticket.KindGeneration, in, out, at)
}

// eventOfKind builds the event of a request of a kind (the ticket says which).
func (e *meterEnv) eventOfKind(t *testing.T, kind ticket.Kind, in, out int64, at time.Time) (string, []byte) {
	t.Helper()
	n := e.seq.Add(1)
	reqID := fmt.Sprintf("req_%d", n)
	tk, err := e.signer.Sign(ticket.Claims{RequestID: reqID, AccountID: e.customer, APIKeyID: "key1", OfferingID: e.offering,
		Tier: "standard", Kind: kind, IssuedAt: at.Add(-time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	ev := NewEvent(fmt.Sprintf("evt_%d", n), e.provider, e.offering, at, Usage{RequestID: reqID, Ticket: tk,
		OfferingID: e.offering, Model: "m", InputTokens: in, OutputTokens: out, TTFTMillis: 100, DurationMillis: 900,
		EnergyJoules: 12.5, EnergySource: EnergyEstimated, Status: StatusOK})
	b, err := Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	return ev.ID, b
}

func (e *meterEnv) publish(t *testing.T, subject, id string, body []byte) {
	t.Helper()
	msg := nats.NewMsg(subject)
	msg.Data = body
	if id != "" {
		msg.Header.Set(HeaderMsgID, id)
	}
	if _, err := e.js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
}

// drain runs the meter until every published event is acknowledged.
func (e *meterEnv) drain(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.meter.Run(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := e.meter.cfg.Consumer.Info(context.Background())
		if err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.Delivered.Stream > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the meter did not drain the stream: %+v", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
}

func (e *meterEnv) balance(t *testing.T, kind billing.AccountKind, owner string) money.BigPico {
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

func (e *meterEnv) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestMeterPricesOnceAndPostsToTheLedger(t *testing.T) {
	e := setupMeter(t)
	subject := Subject(e.provider, e.offering)
	id1, ev1 := e.event(t, 1000, 500, e.now.Add(-time.Minute))
	id2, ev2 := e.event(t, 2000, 0, e.now.Add(-time.Minute)) // no completion token: no charge
	e.publish(t, subject, id1, ev1)
	e.publish(t, subject, id2, ev2)
	e.drain(t)

	// 1000 x $0.15/M + 500 x $0.30/M = $0.0003; the provider earns 1500 x $0.10/M = $0.00015.
	charge := money.Pico(1000*150_000 + 500*300_000)
	payable := money.Pico(1500 * 100_000)
	if got := e.balance(t, billing.AccountCustomerCredit, e.customer); !got.Equal(-charge) {
		t.Errorf("customer balance %s, want %s", got, -charge)
	}
	if got := e.balance(t, billing.AccountProviderPayable, e.provider); !got.Equal(payable) {
		t.Errorf("provider payable %s, want %s", got, payable)
	}
	if got := e.balance(t, billing.AccountPlatformRevenue, ""); !got.Equal(charge-payable) {
		t.Errorf("revenue %s, want %s", got, charge-payable)
	}
	if n := e.count(t, `SELECT count(*) FROM usage_events`); n != 2 {
		t.Fatalf("%d usage rows, want 2", n)
	}
	if n := e.count(t, `SELECT count(*) FROM usage_events WHERE event_id = $1 AND charge_pico = 0`, id2); n != 1 {
		t.Error("a request without completion tokens was charged")
	}
	if n := e.count(t, `SELECT requests FROM usage_hourly WHERE account_id = $1`, e.customer); n != 2 {
		t.Errorf("rollup counts %d requests, want 2", n)
	}
	if n := e.count(t, `SELECT count(*) FROM ledger_transactions WHERE kind = 'usage'`); n != 1 {
		t.Errorf("%d usage transactions, want one for the batch", n)
	}
}

// An embedding produces no completion token and is charged for its input; a generation
// without one is charged nothing.
func TestMeterChargesEmbeddingsForTheirInput(t *testing.T) {
	e := setupMeter(t)
	subject := Subject(e.provider, e.offering)
	embedding, body := e.eventOfKind(t, ticket.KindEmbedding, 4000, 0, e.now.Add(-time.Minute))
	e.publish(t, subject, embedding, body)
	generation, body := e.event(t, 4000, 0, e.now.Add(-time.Minute))
	e.publish(t, subject, generation, body)
	e.drain(t)

	charge := money.Pico(4000 * 150_000) // 4,000 tokens at $0.15/M
	payable := money.Pico(4000 * 100_000)
	if got := e.balance(t, billing.AccountCustomerCredit, e.customer); !got.Equal(-charge) {
		t.Errorf("customer balance %s, want %s", got, -charge)
	}
	if got := e.balance(t, billing.AccountProviderPayable, e.provider); !got.Equal(payable) {
		t.Errorf("provider payable %s, want %s", got, payable)
	}
	if n := e.count(t, `SELECT count(*) FROM usage_events WHERE event_id = $1 AND charge_pico = $2`, embedding, int64(charge)); n != 1 {
		t.Error("the embedding's usage row does not carry its charge")
	}
	if n := e.count(t, `SELECT count(*) FROM usage_events WHERE event_id = $1 AND charge_pico = 0`, generation); n != 1 {
		t.Error("a generation without completion tokens was charged")
	}
}

func TestMeterRefusesDuplicatesAndBadEventsWithoutStalling(t *testing.T) {
	e := setupMeter(t)
	subject := Subject(e.provider, e.offering)
	id1, ev1 := e.event(t, 100, 100, e.now.Add(-time.Minute))
	e.publish(t, subject, id1, ev1)
	e.drain(t)

	// FIELD-CASES 3, 4, 5, 7: a stored event again (past the stream's window: no msg id), the
	// same id with another payload, a new event and its twin in one batch, garbage, an
	// unsigned event, and an event published for the other provider's offering.
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
	e.publish(t, Subject(e.provider, e.foreign), "", forForeign)
	e.drain(t)

	if n := e.count(t, `SELECT count(*) FROM usage_events`); n != 2 {
		t.Fatalf("%d usage rows, want the 2 distinct valid events", n)
	}
	reasons := map[string]int{}
	rows, err := e.pool.Query(context.Background(), `SELECT reason FROM usage_rejections`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var r string
		_ = rows.Scan(&r)
		reasons[r]++
	}
	want := map[string]int{"duplicate": 3, "malformed": 1, "ticket_invalid": 1, "subject_mismatch": 1}
	for r, n := range want {
		if reasons[r] != n {
			t.Errorf("%d rejections for %s, want %d (all: %v)", reasons[r], r, n, reasons)
		}
	}
	charge := money.Pico(100*150_000+100*300_000) + money.Pico(10*150_000+20*300_000)
	if got := e.balance(t, billing.AccountCustomerCredit, e.customer); !got.Equal(-charge) {
		t.Errorf("customer balance %s, want %s", got, -charge)
	}
}

func TestMeterUsesThePriceInForceAtTheEventsTime(t *testing.T) {
	e := setupMeter(t)
	subject := Subject(e.provider, e.offering)
	// The clock is past tomorrow's price change; one event before it, one after.
	change := e.now.AddDate(0, 0, 1)
	e.now = change.Add(time.Hour)
	idA, before := e.event(t, 1000, 1000, change.Add(-time.Millisecond))
	idB, after := e.event(t, 1000, 1000, change)
	e.publish(t, subject, idA, before)
	e.publish(t, subject, idB, after)
	e.drain(t)
	var a, b int64
	if err := e.pool.QueryRow(context.Background(), `SELECT
		(SELECT charge_pico FROM usage_events WHERE event_id = $1)::bigint,
		(SELECT charge_pico FROM usage_events WHERE event_id = $2)::bigint`, idA, idB).Scan(&a, &b); err != nil {
		t.Fatal(err)
	}
	if a != 1000*150_000+1000*300_000 || b != 1000*200_000+1000*400_000 {
		t.Fatalf("charges %d and %d: the price change did not apply from its date (FIELD-CASES 16)", a, b)
	}
}

// A refusal delivered again is one row; a different message that has the same sequence
// number (a stream deleted and made again) is a row of its own.
func TestRejectionsAreKeptPerMessage(t *testing.T) {
	e := setupMeter(t)
	ctx := context.Background()
	write := func(seq uint64, raw string) {
		t.Helper()
		err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
			return insertRejections(ctx, tx, []StoredRejection{{Message: Message{Seq: seq, Subject: "usage.p.o", Data: []byte(raw)},
				Reason: RejectMalformed, Detail: "not JSON"}}, e.now)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	write(7, "first stream's message")
	write(7, "first stream's message") // delivered again
	write(7, "the new stream's message 7")
	if n := e.count(t, `SELECT count(*) FROM usage_rejections WHERE stream_seq = 7`); n != 2 {
		t.Errorf("%d rejections of sequence 7, want 2: one per message", n)
	}
}
