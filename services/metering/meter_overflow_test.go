package metering

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/fixtures"
	"github.com/gpumarket/gpumarket/services/usage"

	"github.com/nats-io/nats.go"

	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/money"
)

// logCounter counts the meter's log records whose message holds one of its phrases.
type logCounter struct {
	phrases []string
	counts  []atomic.Int64
}

func newLogCounter(phrases ...string) *logCounter {
	return &logCounter{phrases: phrases, counts: make([]atomic.Int64, len(phrases))}
}

func (c *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *logCounter) Handle(_ context.Context, r slog.Record) error {
	for i, p := range c.phrases {
		if strings.Contains(r.Message, p) {
			c.counts[i].Add(1)
		}
	}
	return nil
}
func (c *logCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *logCounter) WithGroup(string) slog.Handler      { return c }
func (c *logCounter) count(phrase string) int64 {
	for i, p := range c.phrases {
		if p == phrase {
			return c.counts[i].Load()
		}
	}
	panic("no such phrase: " + phrase)
}

// publishAll publishes the messages at once, as held events are released, and waits until the
// stream has stored them all.
func (e *meterEnv) publishAll(t *testing.T, msgs []*nats.Msg) {
	t.Helper()
	for _, m := range msgs {
		if _, err := e.js.PublishMsgAsync(m); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-e.js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("the stream did not take the published events")
	}
}

func usageMsg(subject, id string, body []byte) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = body
	m.Header.Set(usage.HeaderMsgID, id)
	return m
}

// The attack: four rigs of one provider release 800 held events at once, each of 10,000,000
// input and 10,000,000 output tokens on tickets whose bounds allow them, at a price that makes
// each cost $2.5 million: no batch's sums fit int64. Meanwhile a fifth rig's ordinary traffic
// goes on. Its events are metered within seconds, each charged and paid exactly; every event
// that would take its batch's sums past int64 is refused as overflow while the others are
// billed; nothing loops; the ledger balances, and the customer's balance and the provider's
// earnings, past $9.2 million, still answer exactly.
func TestMeterRefusesOverflowingEventsAndMetersTheRest(t *testing.T) {
	e := setupMeter(t)
	ctx := context.Background()
	logs := newLogCounter("not committed", "splitting")
	cfg := e.meter.cfg
	// Batches of 100, so that the burst spans several batches as a burst larger than a batch
	// does in production; the machine's clock, so that latencies are real.
	cfg.BatchSize, cfg.Now, cfg.Log = 100, time.Now, slog.New(logs)
	e.meter = NewMeter(cfg)

	// $125,000 per million tokens each way: 20,000,000 tokens cost $2.5 million, which the
	// provider's asks take whole. Three fit a ledger posting; a fourth does not.
	premium := fixtures.Price(t, e.pool, "realtime", time.Now().AddDate(0, 0, -1), 125_000_000_000, 125_000_000_000)
	const perEvent = money.Pico(2_500_000 * money.PicoPerUSD)
	if c, err := cost(10_000_000, 125_000_000_000, 0, 0, 10_000_000, 125_000_000_000); err != nil || c != perEvent {
		t.Fatalf("an inflated event costs %s, %v", c, err)
	}
	mallory, malloryKey := e.newCustomer(t, "Mallory")
	attacker := fixtures.Account(t, e.pool, "Held Rigs")
	const rigs, held = 4, 200
	now := time.Now()
	var burst []*nats.Msg
	inflated := map[string]bool{}
	for range rigs {
		rig := &testRig{provider: attacker, offering: e.newOffering(t, attacker, "realtime"), tier: "realtime",
			customer: mallory, apiKey: malloryKey, priceID: premium, askIn: 125_000_000_000, askOut: 125_000_000_000}
		for range held {
			id, body, req := e.routed(t, route{rig: rig, in: 10_000_000, out: 10_000_000, at: now.Add(-time.Minute)})
			burst = append(burst, usageMsg(events.UsageSubject(attacker, rig.offering), id, body))
			inflated[req] = true
		}
	}
	// The fifth rig: the provider's ordinary offering, 100 requests over two seconds.
	const ordinary = 100
	type sent struct {
		id, req string
		body    []byte
		in, out int64
	}
	var traffic []sent
	for i := range ordinary {
		in, out := int64(100+i), int64(1+i%40)
		id, body, req := e.routed(t, route{in: in, out: out, at: now.Add(-time.Second)})
		traffic = append(traffic, sent{id: id, req: req, body: body, in: in, out: out})
	}

	defer e.start()()
	publishedAt := sync.Map{}
	var wg sync.WaitGroup
	wg.Go(func() {
		for i, s := range traffic {
			publishedAt.Store(s.req, time.Now())
			msg := usageMsg(events.UsageSubject(e.provider, e.offering), s.id, s.body)
			if _, err := e.js.PublishMsg(ctx, msg); err != nil {
				t.Errorf("ordinary event %d: %v", i, err)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	time.Sleep(300 * time.Millisecond)
	e.publishAll(t, burst)
	wg.Wait()
	e.waitDrained(t, 30*time.Second)

	// The ordinary events: each metered within seconds of its publication, exactly.
	var ordinaryCharge, ordinaryPayable money.Pico
	var slowest time.Duration
	for _, s := range traffic {
		var c, p int64
		var metered time.Time
		if err := e.pool.QueryRow(ctx, `SELECT charge_pico::bigint, payable_pico::bigint, metered_at FROM usage_events
			WHERE request_id = $1`, s.req).Scan(&c, &p, &metered); err != nil {
			t.Fatalf("ordinary request %s: %v", s.req, err)
		}
		if money.Pico(c) != charge(s.in, s.out) || money.Pico(p) != payable(s.in, s.out) {
			t.Errorf("ordinary request %s charged %d and paid %d, want %s and %s", s.req, c, p, charge(s.in, s.out), payable(s.in, s.out))
		}
		at, _ := publishedAt.Load(s.req)
		slowest = max(slowest, metered.Sub(at.(time.Time)))
		ordinaryCharge += charge(s.in, s.out)
		ordinaryPayable += payable(s.in, s.out)
	}
	if slowest > 5*time.Second {
		t.Errorf("the slowest ordinary event was metered %s after its publication, want within seconds", slowest)
	}

	// The inflated events: each billed whole or refused as overflow, never both, none lost.
	var stored int
	rows, err := e.pool.Query(ctx, `SELECT request_id, charge_pico::text, payable_pico::text FROM usage_events WHERE account_id = $1`, mallory)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var req, c, p string
		if err := rows.Scan(&req, &c, &p); err != nil {
			t.Fatal(err)
		}
		if !inflated[req] || c != fmt.Sprint(int64(perEvent)) || p != fmt.Sprint(int64(perEvent)) {
			t.Errorf("Mallory's request %s charged %s, paid %s; want %d each", req, c, p, int64(perEvent))
		}
		stored++
	}
	reasons := e.rejected(t)
	if reasons["overflow"]+stored != rigs*held || len(reasons) != 1 {
		t.Errorf("%d inflated events billed and rejections %v; want the %d split between billed and overflow", stored, reasons, rigs*held)
	}
	if reasons["overflow"] == 0 || stored < 4 {
		t.Errorf("%d billed, %d refused: the burst did not overflow its batches, or did not span them", stored, reasons["overflow"])
	}
	var samples int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM usage_rejections WHERE reason = 'overflow'
		AND detail LIKE '%batch''s charges to account ' || $1 || '%out of range%'`, mallory).Scan(&samples); err != nil || samples == 0 {
		t.Errorf("%d overflow rejections kept with their reason (%v)", samples, err)
	}
	if n := logs.count("not committed"); n != 0 {
		t.Errorf("%d batches were retried: the meter looped on the burst", n)
	}
	t.Logf("%d inflated events billed, %d refused as overflow; slowest ordinary event %s", stored, reasons["overflow"], slowest)

	// The ledger balances, and finance's figures answer exactly past $9.2 million.
	checkLedgerBalances(t, e)
	malloryOwes := money.BigPicoOf(0)
	for range stored {
		malloryOwes = malloryOwes.AddPico(perEvent)
	}
	if got := e.balance(t, ledger.AccountCustomerCredit, mallory); got != malloryOwes.Neg() {
		t.Errorf("Mallory's balance %s, want %s", got, malloryOwes.Neg())
	}
	if got := e.balance(t, ledger.AccountProviderPayable, attacker); got != malloryOwes {
		t.Errorf("the held rigs' provider is owed %s, want %s", got, malloryOwes)
	}
	balances, err := e.ledger.Balances(ctx)
	if err != nil {
		t.Fatalf("finance's balances: %v", err)
	}
	for _, b := range balances {
		if b.OwnerAccountID == mallory && b.Balance != malloryOwes.Neg() {
			t.Errorf("finance's balance of Mallory %s, want %s", b.Balance, malloryOwes.Neg())
		}
	}
	traffic2, err := NewReports(e.pool).ProviderTraffic(ctx, attacker, UsageFilter{})
	if err != nil {
		t.Fatalf("the provider's earnings: %v", err)
	}
	if traffic2.Total.Earned != malloryOwes || traffic2.Total.Requests != int64(stored) {
		t.Errorf("the provider's earnings %+v, want %s over %d requests", traffic2.Total, malloryOwes, stored)
	}
	if _, err := malloryOwes.Pico(); err == nil {
		t.Errorf("the held rigs' earnings %s are not past $9.2 million", malloryOwes)
	}
	if got := e.balance(t, ledger.AccountCustomerCredit, e.customer); !got.Equal(-ordinaryCharge) {
		t.Errorf("the ordinary customer's balance %s, want %s", got, -ordinaryCharge)
	}
	if got := e.balance(t, ledger.AccountProviderPayable, e.provider); !got.Equal(ordinaryPayable) {
		t.Errorf("the ordinary provider is owed %s, want %s", got, ordinaryPayable)
	}
}

// checkLedgerBalances asserts that every ledger transaction sums to zero and every cached
// balance is the sum of its postings.
func checkLedgerBalances(t *testing.T, e *meterEnv) {
	t.Helper()
	if n := e.count(t, `SELECT count(*) FROM (SELECT transaction_id FROM ledger_postings GROUP BY 1 HAVING sum(amount) <> 0) x`); n != 0 {
		t.Errorf("%d ledger transactions do not sum to zero", n)
	}
	if n := e.count(t, `SELECT count(*) FROM ledger_accounts a
		WHERE a.balance <> (SELECT coalesce(sum(p.amount), 0) FROM ledger_postings p WHERE p.ledger_account_id = a.id)`); n != 0 {
		t.Errorf("%d ledger accounts' balances are not the sum of their postings", n)
	}
	if n := e.count(t, `SELECT count(*) FROM (SELECT coalesce(sum(balance), 0) AS total FROM ledger_accounts) x WHERE total <> 0`); n != 0 {
		t.Error("the ledger's balances do not sum to zero")
	}
}
