package metering

import (
	"bytes"
	"context"
	"encoding/csv"
	"slices"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/services/ticket"
	"github.com/gpumarket/gpumarket/services/usage"
)

// A request whose prompt the engine mostly served from its cache: its cached input tokens are
// billed at the price book's cached price (a quarter of the standard input price, $0.0375 per
// million, the default) and paid at the input ask scaled by the same ratio ($0.06 / 4 =
// $0.015), the rest of its input and its output at the input and output prices and asks.
func TestMeterBillsCachedInputAtTheCachedPrice(t *testing.T) {
	e := setupMeter(t)
	subject := events.UsageSubject(e.provider, e.offering)
	id, body, _ := e.routed(t, route{in: 1000, cached: 800, out: 500, at: e.now.Add(-time.Minute)})
	e.publish(t, subject, id, body)
	e.drain(t)

	// 200 x $0.15/M + 800 x $0.0375/M + 500 x $0.30/M = $0.00021;
	// 200 x $0.06/M + 800 x $0.015/M + 500 x $0.12/M = $0.000084.
	e.wantBalances(t, 210_000_000, 84_000_000)
	if n := e.count(t, `SELECT count(*) FROM usage_events WHERE event_id = $1 AND input_tokens = 1000 AND cached_input_tokens = 800
		AND reported_cached_input_tokens = 800 AND cached_input_price = 37500 AND ask_cached_input_price = 15000
		AND charge_pico = 210000000 AND payable_pico = 84000000 AND flag IS NULL`, id); n != 1 {
		t.Error("the usage row does not keep the cached input tokens and their prices as billed")
	}
	if n := e.count(t, `SELECT count(*) FROM usage_hourly WHERE input_tokens = 1000 AND cached_input_tokens = 800
		AND uncharged_cached_input_tokens = 0 AND charge_pico = 210000000 AND payable_pico = 84000000`); n != 1 {
		t.Error("the hourly rollup does not sum the cached input tokens")
	}

	// The usage API, its totals and its CSV show the cached tokens apart.
	ctx := context.Background()
	reports := NewReports(e.pool)
	page, err := reports.Requests(ctx, e.customer, UsageFilter{})
	if err != nil || len(page.Requests) != 1 {
		t.Fatalf("requests %+v, %v", page, err)
	}
	if r := page.Requests[0]; r.InputTokens != 1000 || r.CachedInputTokens != 800 || r.Cost != 210_000_000 {
		t.Errorf("request %+v, want 1000 input tokens of which 800 cached, costing $0.00021", r)
	}
	totals, err := reports.DailyTotals(ctx, e.customer, UsageFilter{})
	if err != nil || totals.Total.InputTokens != 1000 || totals.Total.CachedInputTokens != 800 {
		t.Errorf("totals %+v, %v; want 1000 input tokens of which 800 cached", totals.Total, err)
	}
	traffic, err := reports.ProviderTraffic(ctx, e.provider, UsageFilter{})
	if err != nil || traffic.Total.CachedInputTokens != 800 || !traffic.Total.Earned.Equal(84_000_000) {
		t.Errorf("provider traffic %+v, %v; want 800 cached input tokens earning $0.000084", traffic.Total, err)
	}
	var buf bytes.Buffer
	if err := reports.ExportCSV(ctx, e.customer, UsageFilter{}, &buf); err != nil {
		t.Fatal(err)
	}
	records, err := csv.NewReader(&buf).ReadAll()
	if err != nil || len(records) != 2 {
		t.Fatalf("export %q, %v", records, err)
	}
	col := slices.Index(records[0], "cached_input_tokens")
	if col < 0 || records[1][col] != "800" || records[1][slices.Index(records[0], "input_tokens")] != "1000" {
		t.Errorf("export %q, want 1000 input tokens of which 800 cached", records)
	}
}

// What the rig reports of its cache is bounded by what the platform saw: no fewer cached
// tokens than the answer showed the client (a rig that reports fewer would overcharge the
// customer and raise its own pay), and no more than the input billed.
func TestMeterBoundsCachedInputByWhatThePlatformSaw(t *testing.T) {
	e := setupMeter(t)
	subject := events.UsageSubject(e.provider, e.offering)
	at := e.now.Add(-time.Minute)

	// The answer showed the client 800 cached tokens; the rig's event claims 100.
	fewer, body, _ := e.routed(t, route{in: 1000, cached: 100, out: 500, at: at, record: func(g *requestlog.GatewayRequest) {
		g.Usage = &admission.TokenCount{Input: 1000, Output: 500, Cached: 800}
	}})
	e.publish(t, subject, fewer, body)
	e.drain(t)
	// As if it had reported 800: $0.00021 charged, $0.000084 owed.
	e.wantBalances(t, 210_000_000, 84_000_000)
	if n := e.count(t, `SELECT count(*) FROM usage_events WHERE event_id = $1 AND cached_input_tokens = 800
		AND reported_cached_input_tokens = 100 AND flag = 'clipped' AND flag_reason LIKE '%cached input raised from 100 to 800%'`,
		fewer); n != 1 {
		t.Error("cached tokens fewer than the answer showed were not raised to it and flagged")
	}

	// 900 of 1000 input tokens cached, but the ticket bounds the input at 600: all 600 billed
	// tokens are cached ones, no more.
	clipped, body, _ := e.routed(t, route{in: 1000, cached: 900, out: 500, at: at, ticket: func(c *ticket.Claims) { c.MaxInputTokens = 600 }})
	e.publish(t, subject, clipped, body)
	e.drain(t)
	// 600 x $0.0375/M + 500 x $0.30/M = $0.0001725; 600 x $0.015/M + 500 x $0.12/M = $0.000069.
	e.wantBalances(t, 210_000_000+172_500_000, 84_000_000+69_000_000)
	if n := e.count(t, `SELECT count(*) FROM usage_events WHERE event_id = $1 AND input_tokens = 600 AND cached_input_tokens = 600
		AND reported_cached_input_tokens = 900`, clipped); n != 1 {
		t.Error("cached tokens were billed beyond the input billed")
	}

	// An event that claims more cached tokens than input tokens is refused: no engine counts so.
	over, body, _ := e.routed(t, route{in: 100, cached: 101, out: 5, at: at})
	e.publish(t, subject, over, body)
	e.drain(t)
	if got := e.rejected(t); got[string(usage.RejectSchema)] != 1 {
		t.Errorf("rejections %v, want one %s", got, usage.RejectSchema)
	}
	e.wantBalances(t, 210_000_000+172_500_000, 84_000_000+69_000_000)
}
