package metering

import (
	"context"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/usage"

	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/ticket"
)

// The attack: a provider raises its ask after serving a request and before the request's
// event reaches the meter, and the tier's price changes meanwhile. The request was routed at
// an ask of $0.01 per million tokens and the standard price of $0.15/$0.30: its customer pays
// $0.00045 and its provider is paid $0.00002, whatever the offering asks or the price book
// says when the event arrives.
func TestMeterPaysTheTermsAgreedAtRouting(t *testing.T) {
	e := setupMeter(t)
	ctx := context.Background()
	subject := events.UsageSubject(e.provider, e.offering)
	routedAt := e.now.AddDate(0, 0, 1).Add(-time.Minute) // a minute before tomorrow's price
	id, body, _ := e.routed(t, route{in: 1000, out: 1000, at: routedAt.Add(2 * time.Minute), ticket: func(c *ticket.Claims) {
		c.AskInput, c.AskOutput, c.IssuedAt = 10_000, 10_000, routedAt
	}})
	// After serving it, the provider asks $2 per token; the event arrives after the price change.
	if _, err := e.pool.Exec(ctx, `UPDATE offerings SET ask_input_micro_usd_per_mtok = 2000000000000,
		ask_output_micro_usd_per_mtok = 2000000000000 WHERE id = $1`, e.offering); err != nil {
		t.Fatal(err)
	}
	e.now = routedAt.Add(time.Hour)
	e.publish(t, subject, id, body)
	e.drain(t)

	// 1000 x $0.15/M + 1000 x $0.30/M = $0.00045; 2000 x $0.01/M = $0.00002.
	e.wantBalances(t, 450_000_000, 20_000_000)
	if n := e.count(t, `SELECT count(*) FROM usage_events WHERE event_id = $1 AND price_id = $2 AND ask_input_price = 10000
		AND ask_output_price = 10000 AND charge_pico = 450000000 AND payable_pico = 20000000`, id, e.price); n != 1 {
		t.Error("the usage row does not keep the terms agreed at routing")
	}
}

// A ticket that fixes no usable terms is refused: one without a price version (a gateway
// that did not fix it), one naming a version the price book does not hold or one of another
// tier, and one whose asks would pay the provider more than the customer pays.
func TestMeterRefusesTicketsWithoutUsableTerms(t *testing.T) {
	e := setupMeter(t)
	subject := events.UsageSubject(e.provider, e.offering)
	at := e.now.Add(-time.Minute)
	cases := []struct {
		name   string
		adjust func(*ticket.Claims)
		reason usage.RejectReason
	}{
		{"no price version", func(c *ticket.Claims) { c.PriceID = 0 }, usage.RejectTicketInvalid},
		{"a version the price book does not hold", func(c *ticket.Claims) { c.PriceID = 999_999 }, RejectNoPrice},
		{"the batch tier's price for a standard request", func(c *ticket.Claims) { c.PriceID = e.batchPrice }, RejectNoPrice},
		{"asks above the price", func(c *ticket.Claims) { c.AskInput, c.AskOutput = 150_000, 400_000 }, RejectAskAbovePrice},
	}
	want := map[string]int{}
	for _, c := range cases {
		id, body, _ := e.routed(t, route{in: 1000, out: 500, at: at, ticket: c.adjust})
		e.publish(t, subject, id, body)
		want[string(c.reason)]++
	}
	// An ask above the price for one kind of token is allowed while the request as a whole
	// pays its provider no more than its customer pays.
	id, body, _ := e.routed(t, route{in: 1000, out: 500, at: at, ticket: func(c *ticket.Claims) { c.AskInput, c.AskOutput = 200_000, 100_000 }})
	e.publish(t, subject, id, body)
	e.drain(t)

	if got := e.rejected(t); len(got) != len(want) || got["ticket_invalid"] != 1 || got["no_price"] != 2 || got["ask_above_price"] != 1 {
		t.Errorf("rejections %v, want %v", got, want)
	}
	if n := e.count(t, `SELECT count(*) FROM usage_events`); n != 1 {
		t.Fatalf("%d usage rows, want only the request whose terms hold", n)
	}
	// 1000 x $0.15/M + 500 x $0.30/M = $0.0003; 1000 x $0.20/M + 500 x $0.10/M = $0.00025.
	e.wantBalances(t, 300_000_000, 250_000_000)
	if got := e.balance(t, ledger.AccountProviderPayable, e.provider); got.Cmp(e.balance(t, ledger.AccountCustomerCredit, e.customer).Neg()) > 0 {
		t.Error("the provider is owed more than its customer paid")
	}
}
