package metering

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/usage"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/ticket"
)

// TestMeterPipelineStoresEveryEventOnce runs many small batches through the pipeline, two
// committing at a time, with redeliveries of stored events mixed in: every event is stored
// once, every redelivery is refused as a duplicate, and OnCommit reports the time of each
// stored event once.
func TestMeterPipelineStoresEveryEventOnce(t *testing.T) {
	e := setupMeter(t)
	var mu sync.Mutex
	var occurred []time.Time
	cfg := e.meter.cfg
	cfg.BatchSize = 40
	cfg.OnCommit = func(res BatchResult, committed time.Time) {
		mu.Lock()
		defer mu.Unlock()
		if len(res.Occurred) != res.Stored {
			t.Errorf("OnCommit: %d event times for %d stored events", len(res.Occurred), res.Stored)
		}
		occurred = append(occurred, res.Occurred...)
	}
	e.meter = NewMeter(cfg)

	subject := events.UsageSubject(e.provider, e.offering)
	const events, again = 600, 60
	var want []time.Time
	var charge money.Pico
	var bodies [][]byte
	for i := range events {
		at := e.now.Add(-time.Duration(i) * time.Second)
		id, body := e.event(t, 10, int64(1+i%7), at)
		e.publish(t, subject, id, body)
		want = append(want, at)
		charge += money.Pico(10*150_000 + (1+i%7)*300_000)
		bodies = append(bodies, body)
	}
	e.drain(t)
	// Redeliveries past the stream's dedupe window (no message id), mixed with new events.
	for i := range again {
		e.publish(t, subject, "", bodies[i*events/again])
		at := e.now.Add(time.Duration(-events-i) * time.Second)
		id, body := e.event(t, 10, 1, at)
		e.publish(t, subject, id, body)
		want = append(want, at)
		charge += money.Pico(10*150_000 + 300_000)
	}
	e.drain(t)

	if n := e.count(t, `SELECT count(*) FROM usage_events`); n != events+again {
		t.Fatalf("%d usage rows, want %d", n, events+again)
	}
	if n := e.rejected(t)["duplicate"]; n != again {
		t.Errorf("%d duplicates refused, want %d", n, again)
	}
	if n := e.count(t, `SELECT count(*) FROM usage_rejections WHERE reason = 'duplicate'`); n != DefaultRejectionSamples {
		t.Errorf("%d duplicates kept whole, want the first %d of the rig's in the hour", n, DefaultRejectionSamples)
	}
	if n := e.count(t, `SELECT sum(requests) FROM usage_hourly`); n != events+again {
		t.Errorf("rollups count %d requests, want %d", n, events+again)
	}
	if got := e.balance(t, ledger.AccountCustomerCredit, e.customer); !got.Equal(-charge) {
		t.Errorf("customer balance %s, want %s", got, -charge)
	}
	slices.SortFunc(occurred, time.Time.Compare)
	slices.SortFunc(want, time.Time.Compare)
	if !slices.EqualFunc(occurred, want, time.Time.Equal) {
		t.Errorf("OnCommit reported %d event times; want the %d of the stored events", len(occurred), len(want))
	}
	assertSummariesMatchRows(t, e)
}

// TestConcurrentBatchesOfTheSameEvents commits the same messages in several transactions at
// once, as two committers or two meters do when the stream delivers a batch again: one copy
// of each event is stored and charged, the others are recognised as deliveries again of the
// same messages (not duplicates to review), and no transaction deadlocks for good.
func TestConcurrentBatchesOfTheSameEvents(t *testing.T) {
	e := setupMeter(t)
	subject := events.UsageSubject(e.provider, e.offering)
	const events, copies = 300, 4
	msgs := make([]Message, events)
	for i := range msgs {
		_, body := e.event(t, 100, 50, e.now.Add(-time.Minute))
		msgs[i] = Message{Seq: uint64(i + 1), Subject: subject, Data: body}
	}

	results := make([]BatchResult, copies)
	var wg sync.WaitGroup
	for c := range copies {
		// Each copy in its own order: the meter sorts what it inserts.
		batch := slices.Clone(msgs)
		slices.Reverse(batch[:c*events/copies])
		wg.Go(func() {
			for {
				res, err := e.meter.ProcessMessages(context.Background(), batch)
				var pe *pgconn.PgError
				if errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001") {
					continue // what commitWithRetry does with a deadlock victim
				}
				if err != nil {
					t.Errorf("copy %d: %v", c, err)
				}
				results[c] = res
				return
			}
		})
	}
	wg.Wait()

	stored, duplicates := 0, 0
	for _, r := range results {
		stored += r.Stored
		for _, rej := range r.Rejections {
			if rej.Reason != usage.RejectDuplicate {
				t.Errorf("rejection %s: %s", rej.Reason, rej.Detail)
			}
			duplicates++
		}
	}
	if stored != events || duplicates != 0 {
		t.Errorf("stored %d and refused %d as duplicates; want %d and none", stored, duplicates, events)
	}
	if n := e.count(t, `SELECT count(*) FROM usage_events`); n != events {
		t.Fatalf("%d usage rows, want %d", n, events)
	}
	charge := money.Pico(events * (100*150_000 + 50*300_000))
	if got := e.balance(t, ledger.AccountCustomerCredit, e.customer); !got.Equal(-charge) {
		t.Errorf("customer balance %s, want %s", got, -charge)
	}
	if n := e.count(t, `SELECT sum(requests) FROM usage_hourly`); n != events {
		t.Errorf("rollups count %d requests, want %d", n, events)
	}
	assertSummariesMatchRows(t, e)
}

// TestCommitStoresTheNewEventsOfABatchWithAStoredOne: a batch that takes its events for new
// and meets a stored one is written again, event by event checked: the new events are
// stored and charged once, the stored one refused, in one transaction.
func TestCommitStoresTheNewEventsOfABatchWithAStoredOne(t *testing.T) {
	e := setupMeter(t)
	subject := events.UsageSubject(e.provider, e.offering)
	var msgs []Message
	for i := range 5 {
		_, body := e.event(t, 1000, 100, e.now.Add(-time.Minute))
		msgs = append(msgs, Message{Seq: uint64(i + 1), Subject: subject, Data: body})
	}
	// The third event was stored before from another message (a re-send): it is a duplicate.
	first := msgs[2]
	first.Seq = 100
	if res, err := e.meter.ProcessMessages(context.Background(), []Message{first}); err != nil || res.Stored != 1 {
		t.Fatalf("first event: %+v, %v", res, err)
	}
	res, err := e.meter.ProcessMessages(context.Background(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	if res.Stored != 4 || len(res.Rejections) != 1 || res.Rejections[0].Reason != usage.RejectDuplicate ||
		res.Rejections[0].Seq != 3 {
		t.Fatalf("stored %d, rejected %+v; want 4 stored and event 3 refused as a duplicate", res.Stored, res.Rejections)
	}
	charge := money.Pico(5 * (1000*150_000 + 100*300_000))
	if !res.Charged.Equal(charge * 4 / 5) {
		t.Errorf("batch charged %s, want %s", res.Charged, charge*4/5)
	}
	if got := e.balance(t, ledger.AccountCustomerCredit, e.customer); !got.Equal(-charge) {
		t.Errorf("customer balance %s, want %s", got, -charge)
	}
	if n := e.count(t, `SELECT count(*) FROM ledger_transactions WHERE kind = 'usage'`); n != 2 {
		t.Errorf("%d usage transactions, want one per committed batch", n)
	}
	if n := e.count(t, `SELECT count(*) FROM usage_rejections`); n != 1 {
		t.Errorf("%d rejections stored, want 1", n)
	}
}

// A message delivered again after its batch committed (a crash before the ack) is stored
// once and acknowledged quietly: it is not a duplicate for review.
func TestRedeliveryOfACommittedMessageIsNoDuplicate(t *testing.T) {
	e := setupMeter(t)
	subject := events.UsageSubject(e.provider, e.offering)
	_, body := e.event(t, 10, 10, e.now.Add(-time.Minute))
	msg := Message{Seq: 7, Subject: subject, Data: body}
	for i := range 3 {
		res, err := e.meter.ProcessMessages(context.Background(), []Message{msg})
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 1, false: 0}[i == 0]; res.Stored != want || len(res.Rejections) != 0 {
			t.Fatalf("delivery %d: stored %d, rejections %+v", i+1, res.Stored, res.Rejections)
		}
	}
	if n := e.count(t, `SELECT count(*) FROM usage_rejection_counts`); n != 0 {
		t.Fatalf("%d rejections for deliveries of one message", n)
	}
}

// Energy from a simulated power sensor is rolled up apart from measured and estimated energy:
// a report can never count it as measured.
func TestSimulatedEnergyIsRolledUpApart(t *testing.T) {
	e := setupMeter(t)
	subject := events.UsageSubject(e.provider, e.offering)
	var msgs []Message
	for i, src := range []usage.EnergySource{usage.EnergyMeasured, usage.EnergySimulated, usage.EnergySimulated, usage.EnergyEstimated} {
		_, body, _ := e.routed(t, route{kind: ticket.KindGeneration, in: 10, out: 10, at: e.now.Add(-time.Minute), source: src})
		msgs = append(msgs, Message{Seq: uint64(i + 1), Subject: subject, Data: body})
	}
	res, err := e.meter.ProcessMessages(context.Background(), msgs)
	if err != nil || res.Stored != 4 || len(res.Rejections) != 0 {
		t.Fatalf("stored %d, rejections %+v, %v", res.Stored, res.Rejections, err)
	}
	var energy, measured, simulated float64
	if err := e.pool.QueryRow(context.Background(), `SELECT sum(energy_j), sum(energy_measured_j), sum(energy_simulated_j)
		FROM usage_hourly`).Scan(&energy, &measured, &simulated); err != nil {
		t.Fatal(err)
	}
	if energy != 50 || measured != 12.5 || simulated != 25 {
		t.Errorf("rollups: %v J, %v measured, %v simulated; want 50, 12.5 and 25", energy, measured, simulated)
	}
	assertSummariesMatchRows(t, e)
}

// assertSummariesMatchRows checks that the hourly rollups and the API keys' monthly spend,
// which the meter keeps in the same transaction as the usage rows, equal the rows exactly: a
// rollup per hour, account, offering, tier, model, price version and asks, with the requests
// charged nothing counted apart.
func assertSummariesMatchRows(t *testing.T, e *meterEnv) {
	t.Helper()
	if n := e.count(t, `
		SELECT count(*) FROM (
			SELECT date_trunc('hour', occurred_at) AS hour, account_id, offering_id, tier, model, price_id, ask_input_price,
				ask_output_price, provider_account_id, count(*) AS requests, sum(input_tokens) AS input_tokens,
				sum(output_tokens) AS output_tokens, count(*) FILTER (WHERE charge_pico = 0) AS uncharged_requests,
				coalesce(sum(input_tokens) FILTER (WHERE charge_pico = 0), 0) AS uncharged_input_tokens,
				coalesce(sum(output_tokens) FILTER (WHERE charge_pico = 0), 0) AS uncharged_output_tokens,
				sum(charge_pico) AS charge_pico, sum(payable_pico) AS payable_pico, sum(energy_j) AS energy_j,
				coalesce(sum(energy_j) FILTER (WHERE energy_source = 'measured'), 0) AS energy_measured_j,
				coalesce(sum(energy_j) FILTER (WHERE energy_source = 'simulated'), 0) AS energy_simulated_j
			FROM usage_events GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9
		) r FULL JOIN usage_hourly h USING (hour, account_id, offering_id, tier, model, price_id, ask_input_price, ask_output_price)
		WHERE r.requests IS DISTINCT FROM h.requests OR r.input_tokens IS DISTINCT FROM h.input_tokens
			OR r.output_tokens IS DISTINCT FROM h.output_tokens OR r.charge_pico IS DISTINCT FROM h.charge_pico
			OR r.payable_pico IS DISTINCT FROM h.payable_pico
			OR r.uncharged_requests IS DISTINCT FROM h.uncharged_requests
			OR r.uncharged_input_tokens IS DISTINCT FROM h.uncharged_input_tokens
			OR r.uncharged_output_tokens IS DISTINCT FROM h.uncharged_output_tokens
			OR r.provider_account_id IS DISTINCT FROM h.provider_account_id
			OR abs(r.energy_j - h.energy_j) > 1e-6 OR abs(r.energy_measured_j - h.energy_measured_j) > 1e-6
			OR abs(r.energy_simulated_j - h.energy_simulated_j) > 1e-6`); n != 0 {
		t.Errorf("%d hourly rollups differ from the usage rows they sum", n)
	}
	if n := e.count(t, `
		SELECT count(*) FROM (
			SELECT api_key_id, date_trunc('month', occurred_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS month,
				count(*) AS requests, sum(charge_pico) AS charge_pico
			FROM usage_events WHERE api_key_id <> '' GROUP BY 1, 2
		) r FULL JOIN api_key_spend s USING (api_key_id, month)
		WHERE r.requests IS DISTINCT FROM s.requests OR r.charge_pico IS DISTINCT FROM s.charge_pico`); n != 0 {
		t.Errorf("%d API key monthly spends differ from the usage rows they sum", n)
	}
	if n := e.count(t, `
		SELECT count(*) FROM (
			SELECT api_key_id, (occurred_at AT TIME ZONE 'UTC')::date AS day, count(*) AS requests, sum(charge_pico) AS charge_pico
			FROM usage_events WHERE api_key_id <> '' GROUP BY 1, 2
		) r FULL JOIN api_key_spend_days s USING (api_key_id, day)
		WHERE r.requests IS DISTINCT FROM s.requests OR r.charge_pico IS DISTINCT FROM s.charge_pico`); n != 0 {
		t.Errorf("%d API key daily spends differ from the usage rows they sum", n)
	}
	if n := e.count(t, `SELECT count(*) FROM api_key_spend`); n == 0 {
		t.Error("no API key spend recorded")
	}
}

// A batch whose sums would overflow 64 bits is left to the statement that sums in NUMERIC.
func TestSumsThatWouldOverflowAreLeftToTheDatabase(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	c := &candidate{ev: usage.UsageEvent{Time: at, Data: usage.Usage{OfferingID: "o", Model: "m"}}}
	c.claims.APIKeyID, c.claims.Tier = "k", "batch"
	half := pricedEvent{c: c, charge: money.Pico(1 << 62), account: "a", provider: "p"}
	if _, ok := rollUp([]pricedEvent{half, half}); ok {
		t.Error("rollUp summed 2^63 in an int64")
	}
	if _, ok := sumKeySpend([]pricedEvent{half, half}, monthOf); ok {
		t.Error("sumKeySpend summed 2^63 in an int64")
	}
	r, ok := rollUp([]pricedEvent{half, half, half}[:1])
	if !ok || len(r.keys) != 1 || r.sums[r.keys[0]].charge != 1<<62 || !r.keys[0].hour.Equal(at) {
		t.Errorf("rollUp of one event: %+v, %v", r, ok)
	}
}
