package metering

import (
	"context"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/ticket"
)

// The hourly rollups keep apart what was sold at different terms: a row per price version and
// per pair of asks within the same hour, account and offering, with the requests charged
// nothing (no output token) counted apart, so that an invoice line per price and a statement
// line per ask come exactly from them. Both ways a batch is written keep them: new events by
// COPY, and a batch that meets a stored event by the statement that skips it.
func TestRollupsKeepEachPriceVersionAndAskApart(t *testing.T) {
	e := setupMeter(t)
	subject := events.UsageSubject(e.provider, e.offering)
	at := e.now.Add(-10 * time.Minute)
	terms := func(price, in, out int64) func(*ticket.Claims) {
		return func(c *ticket.Claims) { c.PriceID, c.AskInput, c.AskOutput = price, in, out }
	}
	type use struct {
		in, out int64
		terms   func(*ticket.Claims)
	}
	uses := []use{
		{1000, 100, terms(e.price, testAskIn, testAskOut)},
		{2000, 0, terms(e.price, testAskIn, testAskOut)}, // no output: counted, not charged
		{1000, 100, terms(e.nextPrice, testAskIn, testAskOut)},
		{1000, 100, terms(e.price, 30_000, 60_000)},
		{500, 50, terms(e.nextPrice, 30_000, 60_000)},
	}
	var msgs []Message
	for i, u := range uses {
		_, body, _ := e.routed(t, route{in: u.in, out: u.out, at: at, ticket: u.terms})
		msgs = append(msgs, Message{Seq: uint64(i + 1), Subject: subject, Data: body})
	}
	// The first two by COPY; the rest in a batch with the first again, which is written the
	// careful way.
	if res, err := e.meter.ProcessMessages(context.Background(), msgs[:2]); err != nil || res.Stored != 2 {
		t.Fatalf("first batch: %+v, %v", res, err)
	}
	again := msgs[0]
	again.Seq = 99
	res, err := e.meter.ProcessMessages(context.Background(), append([]Message{again}, msgs[2:]...))
	if err != nil || res.Stored != 3 || len(res.Rejections) != 1 {
		t.Fatalf("second batch: stored %d, rejected %+v, %v", res.Stored, res.Rejections, err)
	}

	type row struct {
		price, askIn, askOut                                  int64
		requests, input, output, unReq, unIn, charge, payable int64
	}
	rows, err := e.pool.Query(context.Background(), `
		SELECT price_id, ask_input_price, ask_output_price, requests, input_tokens, output_tokens, uncharged_requests,
			uncharged_input_tokens, charge_pico::bigint, payable_pico::bigint
		FROM usage_hourly ORDER BY price_id, ask_input_price`)
	if err != nil {
		t.Fatal(err)
	}
	var got []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.price, &r.askIn, &r.askOut, &r.requests, &r.input, &r.output, &r.unReq, &r.unIn, &r.charge, &r.payable); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	// Standard's versions: $0.15/$0.30 (e.price) and $0.20/$0.40 (e.nextPrice).
	want := []row{
		{e.price, 30_000, 60_000, 1, 1000, 100, 0, 0, 1000*150_000 + 100*300_000, 1000*30_000 + 100*60_000},
		{e.price, testAskIn, testAskOut, 2, 3000, 100, 1, 2000, 1000*150_000 + 100*300_000, 1000*testAskIn + 100*testAskOut},
		{e.nextPrice, 30_000, 60_000, 1, 500, 50, 0, 0, 500*200_000 + 50*400_000, 500*30_000 + 50*60_000},
		{e.nextPrice, testAskIn, testAskOut, 1, 1000, 100, 0, 0, 1000*200_000 + 100*400_000, 1000*testAskIn + 100*testAskOut},
	}
	if len(got) != len(want) {
		t.Fatalf("%d rollup rows, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("rollup %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	assertSummariesMatchRows(t, e)
}
