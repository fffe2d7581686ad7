package metering

import (
	"context"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/fixtures"
	"github.com/gpumarket/gpumarket/services/ticket"
)

// TestAModelsOwnPriceIsBilledAsTheTicketNamesIt: the 70B model has a batch price of its own, $0.90 in and $1.80 out
// per million tokens, above the batch default of $0.05 and $0.10; its rig asks $0.80 and $1.60. The price book
// gives the 70B request the model's row and a request of another model the tier's default, as routing reads it
// (catalog.PriceBook.At); the meter bills the customer each at the row its ticket names and pays the provider its
// asks. A ticket naming the 70B's row for a rig of another model is refused, and the 70B's price scheduled for
// later is not the one in force now.
func TestAModelsOwnPriceIsBilledAsTheTicketNamesIt(t *testing.T) {
	e := setupMeter(t)
	ctx := context.Background()
	const big = "meta-llama/Meta-Llama-3-70B-Instruct"
	seventy := fixtures.Offering(t, e.pool, e.provider, fixtures.WithGPU("h100-pcie", 2), fixtures.WithRegion("us"),
		fixtures.WithModel(big), fixtures.WithAsk(800000, 1600000), fixtures.WithTier("batch"))
	eight := e.newOffering(t, e.provider, "batch") // model m, asks $0.01 and $0.01
	modelPrice := func(from time.Time, in, out int64) int64 {
		return fixtures.Price(t, e.pool, "batch", from, in, out, fixtures.ForModel(big))
	}
	own := modelPrice(e.now.AddDate(0, -1, 0), 900_000, 1_800_000)
	later := modelPrice(e.now.Add(time.Hour), 850_000, 1_700_000)

	book, err := catalog.NewService(e.pool, catalog.Config{Now: func() time.Time { return e.now }}).PriceBook(ctx)
	if err != nil {
		t.Fatal(err)
	}
	at := e.now.Add(-time.Minute)
	p70, _ := book.At(catalog.TierBatch, big, at)
	p8, _ := book.At(catalog.TierBatch, "m", at)
	if p70.ID != own || p8.ID != e.batchPrice {
		t.Fatalf("the book prices the 70B at row %d and m at row %d; want %d and %d", p70.ID, p8.ID, own, e.batchPrice)
	}
	if p, _ := book.At(catalog.TierBatch, big, e.now.Add(time.Hour)); p.ID != later {
		t.Fatalf("from its moment the 70B is priced at row %d, want %d", p.ID, later)
	}

	rig70 := &testRig{provider: e.provider, offering: seventy, tier: "batch", model: big, customer: e.customer, apiKey: e.apiKey,
		priceID: p70.ID, askIn: 800_000, askOut: 1_600_000}
	rig8 := &testRig{provider: e.provider, offering: eight, tier: "batch", customer: e.customer, apiKey: e.apiKey,
		priceID: p8.ID, askIn: 10_000, askOut: 10_000}
	id70, body, _ := e.routed(t, route{in: 1000, out: 500, at: at, rig: rig70})
	e.publish(t, events.UsageSubject(e.provider, seventy), id70, body)
	id8, body, _ := e.routed(t, route{in: 1000, out: 500, at: at, rig: rig8})
	e.publish(t, events.UsageSubject(e.provider, eight), id8, body)
	idWrong, body, _ := e.routed(t, route{in: 1000, out: 500, at: at, rig: rig8, ticket: func(c *ticket.Claims) {
		c.PriceID, c.AskInput, c.AskOutput = own, 10_000, 10_000
	}})
	e.publish(t, events.UsageSubject(e.provider, eight), idWrong, body)
	e.drain(t)

	// The 70B: 1000 x $0.90/M + 500 x $1.80/M = $0.0018 charged; 1000 x $0.80/M + 500 x $1.60/M = $0.0016 owed.
	// The other model at batch's default: 1000 x $0.05/M + 500 x $0.10/M = $0.0001; owed 1500 x $0.01/M = $0.000015.
	if n := e.count(t, `SELECT count(*) FROM usage_events WHERE event_id = $1 AND price_id = $2 AND model = $3
		AND input_price = 900000 AND output_price = 1800000 AND ask_input_price = 800000 AND ask_output_price = 1600000
		AND charge_pico = 1800000000 AND payable_pico = 1600000000`, id70, own, big); n != 1 {
		t.Error("the 70B request is not billed at its model's price and paid at its asks")
	}
	if n := e.count(t, `SELECT count(*) FROM usage_events WHERE event_id = $1 AND price_id = $2
		AND charge_pico = 100000000 AND payable_pico = 15000000`, id8, e.batchPrice); n != 1 {
		t.Error("the other model's request is not billed at the batch default")
	}
	e.wantBalances(t, 1_800_000_000+100_000_000, 1_600_000_000+15_000_000)
	if got := e.rejected(t); len(got) != 1 || got[string(RejectNoPrice)] != 1 {
		t.Errorf("rejections %v; want the ticket naming the 70B's price for another model's rig", got)
	}
	if n := e.count(t, `SELECT count(*) FROM usage_events WHERE event_id = $1`, idWrong); n != 0 {
		t.Error("a rig of another model was billed at the 70B's price")
	}
}
