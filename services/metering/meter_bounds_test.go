package metering

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/services/ticket"
)

// The attacks on what is billed: a rig that reports 10,000,000 + 10,000,000 tokens for a
// max_tokens 1 request, usage for an attempt the gateway failed over from, output beyond what
// the gateway relayed, and a request the gateway never saw complete. Each is billed no more
// than the gateway bounded and relayed, and each is on the discrepancies page with the excess.
func TestMeterBillsNoMoreThanTheGatewaySaw(t *testing.T) {
	e := setupMeter(t)
	ctx := context.Background()
	subject := events.UsageSubject(e.provider, e.offering)
	at := e.now.Add(-time.Minute)
	type want struct {
		in, out int64
		flag    Flag
	}
	cases := map[string]struct {
		r    route
		want want
	}{
		// The gateway forwarded a small body (50 input tokens at most) with max_tokens 1 and
		// relayed one chunk of 3 bytes.
		"inflated": {route{in: 10_000_000, out: 10_000_000, at: at,
			ticket: func(c *ticket.Claims) { c.MaxInputTokens, c.MaxOutputTokens = 50, 1 },
			record: func(g *requestlog.GatewayRequest) { g.RelayedOutputBytes, g.RelayedOutputChunks = 3, 1 }},
			want{50, 1, FlagClipped}},
		// The rig answered 503 and the gateway tried the next one.
		"failed over": {route{in: 1000, out: 500, at: at,
			record: func(g *requestlog.GatewayRequest) {
				g.HTTPStatus, g.Status, g.RelayedOutputBytes, g.RelayedOutputChunks = 503, requestlog.GatewayFailedOver, 0, 0
			}},
			want{0, 0, FlagFailedAttempt}},
		// max_tokens 1000, but the gateway relayed 100 bytes in 20 chunks.
		"beyond the relayed output": {route{in: 900, out: 900, at: at,
			ticket: func(c *ticket.Claims) { c.MaxOutputTokens = 1000 },
			record: func(g *requestlog.GatewayRequest) { g.RelayedOutputBytes, g.RelayedOutputChunks = 100, 20 }},
			want{900, 128, FlagClipped}},
		// The client went away after the 200, mid-stream.
		"canceled": {route{in: 200, out: 80, at: at,
			record: func(g *requestlog.GatewayRequest) { g.Status = requestlog.GatewayCanceled }},
			want{200, 80, FlagIncomplete}},
		"honest": {route{in: 300, out: 40, at: at}, want{300, 40, ""}},
	}
	ids := map[string]string{}
	for name, c := range cases {
		id, body, req := e.routed(t, c.r)
		ids[name] = req
		e.publish(t, subject, id, body)
	}
	e.drain(t)

	var wantCharge, wantPayable int64
	for name, c := range cases {
		var in, out, reportedIn, reportedOut, charged int64
		var flag, reason *string
		if err := e.pool.QueryRow(ctx, `SELECT input_tokens, output_tokens, reported_input_tokens, reported_output_tokens,
			charge_pico::bigint, flag, flag_reason FROM usage_events WHERE request_id = $1`, ids[name]).Scan(
			&in, &out, &reportedIn, &reportedOut, &charged, &flag, &reason); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		gotFlag := Flag("")
		if flag != nil {
			gotFlag = Flag(*flag)
		}
		if in != c.want.in || out != c.want.out || gotFlag != c.want.flag || reportedIn != c.r.in || reportedOut != c.r.out {
			t.Errorf("%s: billed %d/%d of %d/%d reported, flag %q; want %d/%d, flag %q", name, in, out, reportedIn, reportedOut,
				gotFlag, c.want.in, c.want.out, c.want.flag)
		}
		if charged != int64(charge(c.want.in, c.want.out)) {
			t.Errorf("%s: charged %d, want %d", name, charged, charge(c.want.in, c.want.out))
		}
		wantCharge += int64(charge(c.want.in, c.want.out))
		wantPayable += int64(payable(c.want.in, c.want.out))
	}
	// The inflated request: 50 x $0.15/M + 1 x $0.30/M = $0.0000078, not $4.50.
	if c := charge(50, 1); c != 7_800_000 {
		t.Fatalf("the inflated request's bound costs %s", c)
	}
	e.wantBalances(t, money.Pico(wantCharge), money.Pico(wantPayable))

	// The discrepancies page lists the meter's flags with the excess; the honest request is
	// not on it.
	list, err := e.requests.Discrepancies(ctx, requestlog.DiscrepancyFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	byRequest := map[string]requestlog.Discrepancy{}
	for _, d := range list {
		byRequest[d.RequestID] = d
	}
	if len(list) != 4 {
		t.Errorf("%d discrepancies, want the 4 flagged requests: %+v", len(list), list)
	}
	inflated := byRequest[ids["inflated"]]
	if inflated.MeterFlag != string(FlagClipped) || inflated.ExcessInput == nil || *inflated.ExcessInput != 9_999_950 ||
		*inflated.ExcessOutput != 9_999_999 || *inflated.MeteredOutput != 1 || *inflated.Charge != 7_800_000 ||
		!strings.Contains(inflated.Reason, "clipped") || inflated.HTTPStatus == nil || *inflated.HTTPStatus != 200 {
		t.Errorf("the inflated request on the discrepancies page: %+v", inflated)
	}
	failed := byRequest[ids["failed over"]]
	if failed.MeterFlag != string(FlagFailedAttempt) || *failed.ExcessInput != 1000 || *failed.ExcessOutput != 500 ||
		*failed.Charge != 0 || failed.Status != requestlog.GatewayFailedOver {
		t.Errorf("the failed-over attempt on the discrepancies page: %+v", failed)
	}
	if d := byRequest[ids["canceled"]]; d.MeterFlag != string(FlagIncomplete) || *d.ExcessOutput != 0 {
		t.Errorf("the canceled request on the discrepancies page: %+v", d)
	}
	if _, listed := byRequest[ids["honest"]]; listed {
		t.Error("an honest request is on the discrepancies page")
	}
}

// An event that reaches the meter before the gateway's record of its attempt waits for it,
// unacknowledged, and is billed by it once it lands; one whose record never comes is billed,
// after the longest wait, within its ticket's bounds only and flagged.
func TestMeterWaitsForTheGatewaysRecord(t *testing.T) {
	e := setupMeter(t)
	ctx := context.Background()
	subject := events.UsageSubject(e.provider, e.offering)
	// The meter's clock is the machine's here: ages are the stream's timestamps against it.
	cfg := e.meter.cfg
	cfg.Now = time.Now
	cfg.RecordLag = -1 // no hold: the event is looked at before its record lands
	e.meter = NewMeter(cfg)
	at := time.Now().Add(-10 * time.Second)

	// The record lands 300 ms after the event; it bounds the output to what was relayed.
	id, body, req := e.routed(t, route{in: 500, out: 600, at: at, noRecord: true,
		ticket: func(c *ticket.Claims) { c.MaxOutputTokens = 1000 }})
	stop := e.start()
	published := time.Now()
	e.publish(t, subject, id, body)
	time.Sleep(300 * time.Millisecond)
	if n := e.count(t, `SELECT count(*) FROM usage_events`); n != 0 {
		t.Fatal("an event was billed before the gateway's record of it had landed")
	}
	e.record(t, requestlog.GatewayRequest{RequestID: req, AccountID: e.customer, APIKeyID: e.apiKey, OfferingID: e.offering,
		Tier: "standard", Model: "m", HTTPStatus: 200, Status: requestlog.GatewayOK, Duration: time.Second, At: at,
		MaxInputTokens: 500, MaxOutputTokens: 1000, Streamed: true, RelayedOutputBytes: 192, RelayedOutputChunks: 50})
	e.waitDrained(t, 10*time.Second)
	took := time.Since(published)
	stop()
	var out int64
	var flag *string
	if err := e.pool.QueryRow(ctx, `SELECT output_tokens, flag FROM usage_events WHERE request_id = $1`, req).Scan(&out, &flag); err != nil {
		t.Fatal(err)
	}
	if out != 192+50+outputSlack || flag == nil || *flag != string(FlagClipped) {
		t.Errorf("billed %d output tokens, flag %v; want %d, clipped to what the record says was relayed", out, flag, 192+50+outputSlack)
	}
	if took < DefaultSettleTime || took > 5*time.Second {
		t.Errorf("billed %s after publication, want after the settle time (%s) and within seconds", took, DefaultSettleTime)
	}

	// A record that never comes: the meter's clock says the event has waited long enough.
	cfg.Now = func() time.Time { return time.Now().Add(DefaultRecordWait) }
	e.meter = NewMeter(cfg)
	id, body, req = e.routed(t, route{in: 10_000_000, out: 10_000_000, at: at, noRecord: true,
		ticket: func(c *ticket.Claims) { c.MaxInputTokens, c.MaxOutputTokens = 40, 2 }})
	e.publish(t, subject, id, body)
	e.drain(t)
	var in int64
	var reason *string
	if err := e.pool.QueryRow(ctx, `SELECT input_tokens, output_tokens, flag, flag_reason FROM usage_events WHERE request_id = $1`,
		req).Scan(&in, &out, &flag, &reason); err != nil {
		t.Fatal(err)
	}
	if in != 40 || out != 2 || flag == nil || *flag != string(FlagNoGatewayRecord) || !strings.Contains(*reason, "no gateway record") {
		t.Errorf("billed %d/%d, flag %v (%v); want the ticket's bounds 40/2, flagged no_gateway_record", in, out, flag, reason)
	}
	list, err := e.requests.Discrepancies(ctx, requestlog.DiscrepancyFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range list {
		if d.RequestID == req {
			found = d.HTTPStatus == nil && d.MeterFlag == string(FlagNoGatewayRecord) && *d.ExcessInput == 10_000_000-40
		}
	}
	if !found {
		t.Errorf("the request without a gateway record is not on the discrepancies page as such: %+v", list)
	}
}

// A batch that is not full waits RecordLag for the gateway's records of its events before it
// commits: a record that lands meanwhile is found at the first look, and its event is billed
// without being handed back to the stream (which would take the settle time). A full batch is
// not held.
func TestMeterHoldsABatchForTheGatewaysRecords(t *testing.T) {
	e := setupMeter(t)
	subject := events.UsageSubject(e.provider, e.offering)
	cfg := e.meter.cfg
	cfg.Now = time.Now
	cfg.RecordLag = 400 * time.Millisecond
	e.meter = NewMeter(cfg)
	at := time.Now().Add(-10 * time.Second)

	id, body, req := e.routed(t, route{in: 500, out: 600, at: at, noRecord: true})
	stop := e.start()
	published := time.Now()
	e.publish(t, subject, id, body)
	time.Sleep(150 * time.Millisecond)
	if n := e.count(t, `SELECT count(*) FROM usage_events`); n != 0 {
		t.Fatal("a batch was committed before its hold ended")
	}
	e.record(t, requestlog.GatewayRequest{RequestID: req, AccountID: e.customer, APIKeyID: e.apiKey, OfferingID: e.offering,
		Tier: "standard", Model: "m", HTTPStatus: 200, Status: requestlog.GatewayOK, Duration: time.Second, At: at,
		MaxInputTokens: 500, MaxOutputTokens: 600, Streamed: true, RelayedOutputBytes: 2400, RelayedOutputChunks: 600})
	e.waitDrained(t, 10*time.Second)
	took := time.Since(published)
	stop()
	if n := e.count(t, `SELECT count(*) FROM usage_events WHERE request_id = '`+req+`' AND output_tokens = 600`); n != 1 {
		t.Fatalf("the held event was not billed by its record: %d rows", n)
	}
	if took < cfg.RecordLag/2 || took >= DefaultSettleTime {
		t.Errorf("billed %s after publication; want after the hold and before the settle time (%s) a deferral waits", took, DefaultSettleTime)
	}

	// A full batch (of one) commits at once.
	cfg.BatchSize = 1
	cfg.RecordLag = 5 * time.Second
	e.meter = NewMeter(cfg)
	id, body, req = e.routed(t, route{in: 500, out: 600, at: at})
	stop = e.start()
	published = time.Now()
	e.publish(t, subject, id, body)
	e.waitDrained(t, 10*time.Second)
	took = time.Since(published)
	stop()
	if n := e.count(t, `SELECT count(*) FROM usage_events WHERE request_id = '`+req+`'`); n != 1 || took >= cfg.RecordLag {
		t.Errorf("a full batch: %d rows after %s, want its event billed before the %s hold", n, took, cfg.RecordLag)
	}
}

// While one batch commits, the next is already held: the collector hands a batch over as the
// hold before it ends, not once its commit is done, so that an event under a steady load waits
// for the hold of the batch before its own, its own hold and its commit, and not for a commit
// more besides. Commits are made slow here (OnCommit holds the committer up) to see them
// overlap with the next batch's hold; batches that are not full still commit one at a time.
func TestMeterHoldsTheNextBatchWhileOneCommits(t *testing.T) {
	e := setupMeter(t)
	subject := events.UsageSubject(e.provider, e.offering)
	cfg := e.meter.cfg
	cfg.RecordLag = 200 * time.Millisecond
	var mu sync.Mutex
	var commits, overlapped, concurrent, inCommit int
	cfg.OnCommit = func(res BatchResult, committed time.Time) {
		mu.Lock()
		commits++
		if inCommit++; inCommit > 1 {
			concurrent++
		}
		mu.Unlock()
		time.Sleep(100 * time.Millisecond) // a slow commit
		mu.Lock()
		if e.meter.holding.Load() > 0 {
			overlapped++
		}
		inCommit--
		mu.Unlock()
	}
	e.meter = NewMeter(cfg)

	stop := e.start()
	const n = 120
	for i := range n {
		id, body := e.event(t, 10, 1, e.now.Add(-time.Duration(i)*time.Second))
		e.publish(t, subject, id, body)
		time.Sleep(10 * time.Millisecond)
	}
	e.waitDrained(t, 20*time.Second)
	stop()
	if got := e.count(t, `SELECT count(*) FROM usage_events`); got != n {
		t.Fatalf("%d usage rows, want %d", got, n)
	}
	mu.Lock()
	defer mu.Unlock()
	if commits < 3 || overlapped == 0 {
		t.Errorf("%d commits, %d of them with the next batch held meanwhile; want the holds to overlap the commits", commits, overlapped)
	}
	if concurrent > 0 {
		t.Errorf("%d commits of batches that were not full ran beside another", concurrent)
	}
}
