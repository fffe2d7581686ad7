package routing

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/fixtures"
	"github.com/gpumarket/gpumarket/services/usage"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
)

type dbBundle struct {
	bundle
	pool     *pgxpool.Pool
	catalog  *catalog.Service
	provider string
}

// setupDB returns a router on a fresh database holding the default price book and one provider account.
func setupDB(t *testing.T) dbBundle {
	t.Helper()
	pool := dbtest.New(t)
	ctx := context.Background()
	clk := newClock()
	cat := catalog.NewService(pool, catalog.Config{Now: clk.Now})
	if err := cat.EnsureDefaultPrices(ctx, clk.Now().AddDate(0, -1, 0)); err != nil {
		t.Fatal(err)
	}
	provider := fixtures.Account(t, pool, "Fjord")
	r := New(Config{Pool: pool, Now: clk.Now, Rand: rand.New(rand.NewPCG(1, 2)), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return dbBundle{bundle: bundle{r: r, clock: clk}, pool: pool, catalog: cat, provider: provider}
}

func (b dbBundle) list(t *testing.T, model string, ask money.MicroUSD, p99 float64) catalog.Offering {
	t.Helper()
	o, err := b.catalog.Create(context.Background(), b.provider, catalog.ListingInput{GPU: "rtx-4090", GPUCount: 4, Region: "eu",
		Model: model, AskInput: 2 * ask / 3, AskOutput: 2*ask - 2*ask/3, ClaimedTTFTP50Ms: f64(p99 / 2), ClaimedTTFTP99Ms: f64(p99),
		ClaimedTokensPerSec: f64(1858.57)})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.catalog.MarkQualified(context.Background(), o.ID); err != nil {
		t.Fatal(err)
	}
	return o
}

// TestRefreshLoadsRoutableOfferingsAndThePriceBook: from the catalog tables, active offerings only, and the
// tier price in force decides what may be routed.
func TestRefreshLoadsRoutableOfferingsAndThePriceBook(t *testing.T) {
	t.Parallel()
	b := setupDB(t)
	ctx := context.Background()
	cheap := b.list(t, "m", 100_000, 300)
	dear := b.list(t, "m", 200_000, 300)
	loss := b.list(t, "m", 220_000, 300)
	// Listed before standard's price was cut to what it is now, $0.14 in and $0.30 out: $0.146667 per input
	// token is above it.
	fixtures.Price(t, b.pool, "standard", b.clock.Now().Add(-time.Minute), 140000, 300000,
		fixtures.PriceCreatedAt(b.clock.Now().Add(-time.Minute)))
	if err := b.r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	for _, o := range []catalog.Offering{cheap, dear, loss} {
		b.beat(o, 0, 8)
	}
	if got := b.pickIDs(t, Request{Model: "m", Tier: st}); !slices.Equal(got, []string{cheap.ID, dear.ID}) {
		t.Fatalf("Pick = %v, want cheap then dear, not the one above the tier's price", got)
	}

	// A paused offering leaves the routing table at the next refresh.
	if err := b.catalog.SetStatus(ctx, b.provider, cheap.ID, catalog.StatusPaused); err != nil {
		t.Fatal(err)
	}
	if err := b.r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := b.pickIDs(t, Request{Model: "m", Tier: st}); !slices.Equal(got, []string{dear.ID}) {
		t.Fatalf("Pick = %v after pausing cheap", got)
	}

	// A price change in force makes the dear offering a loss too.
	fixtures.Price(t, b.pool, "standard", b.clock.Now(), 100000, 200000, fixtures.PriceCreatedAt(b.clock.Now()))
	if err := b.r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	wantPickError(t, b.r, Request{Model: "m", Tier: st}, ErrUnknownModel, services.CodeNotFound)
}

// TestFlushWritesLiveFiguresAndTier: the catalog then shows the measured figures "over N requests" and the
// tier traffic earned, not the claimed one; an offering with too little traffic keeps its claim.
func TestFlushWritesLiveFiguresAndTier(t *testing.T) {
	t.Parallel()
	b := setupDB(t)
	ctx := context.Background()
	liar := b.list(t, "m", 100_000, 40) // claims realtime
	quiet := b.list(t, "m", 100_000, 300)
	if liar.Tier != rt || quiet.Tier != st {
		t.Fatalf("claimed tiers %s, %s", liar.Tier, quiet.Tier)
	}
	if err := b.r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	end := b.clock.Now()
	for i := range 150 {
		ttft := 200.0 + float64(i) // 200..349 ms
		b.r.Observe(liar.ID, Observation{RequestID: fmt.Sprintf("req-%d", i), At: end.Add(-time.Duration(i) * time.Second),
			TTFT: millis(ttft), Streamed: true, Duration: time.Second, InputTokens: 500, OutputTokens: 500, Status: usage.StatusOK})
	}
	b.observe(quiet.ID, catalog.MinMeasuredRequests-1, 20)
	if err := b.r.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	got, err := b.catalog.Get(ctx, liar.ID)
	if err != nil {
		t.Fatal(err)
	}
	// P50 is the 75th of 200..349, P99 the 149th; 150 requests of 1,000 tokens over 150 s of busy time.
	if got.MeasuredRequests != 150 || *got.MeasuredTTFTP50Ms != 274 || *got.MeasuredTTFTP99Ms != 348 ||
		*got.MeasuredTokensPerSec != 1000 || got.Tier != st || got.FiguresBasis() != "measured over 150 requests" {
		t.Fatalf("after Flush: %d requests, P50 %v, P99 %v, %v tokens/s, tier %s, %q", got.MeasuredRequests,
			*got.MeasuredTTFTP50Ms, *got.MeasuredTTFTP99Ms, *got.MeasuredTokensPerSec, got.Tier, got.FiguresBasis())
	}
	if got.ReportedRequests != 0 || got.ReportedTTFTP99Ms != nil {
		t.Fatalf("reported figures written with no report: %d, %v", got.ReportedRequests, got.ReportedTTFTP99Ms)
	}
	if got, err := b.catalog.Get(ctx, quiet.ID); err != nil || got.MeasuredRequests != 0 || got.Tier != st || got.FiguresBasis() != "claimed" {
		t.Fatalf("the quiet offering after Flush: %+v, %v; want its claim untouched", got, err)
	}

	// The moved tier routes at once, and survives a reload.
	b.beat(liar, 0, 8)
	for range 2 {
		if _, err := b.r.Pick(Request{Model: "m", Tier: rt, Offering: liar.ID}); err == nil {
			t.Fatal("the demoted offering is still routed as realtime")
		}
		if _, err := b.r.Pick(Request{Model: "m", Tier: st, Offering: liar.ID}); err != nil {
			t.Fatal(err)
		}
		if err := b.r.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestARigsOwnLatencyCannotPromoteIt: a standard rig's agent reports 20 ms to first token for 150 requests the
// gateway measured at 200 to 349 ms. The tier stays standard, realtime's customers are never routed to it, and
// the catalog holds the rig's figures beside the gateway's, flagged: its P99 is under half the gateway's.
func TestARigsOwnLatencyCannotPromoteIt(t *testing.T) {
	t.Parallel()
	b := setupDB(t)
	ctx := context.Background()
	rig := b.list(t, "m", 100_000, 300)
	if err := b.r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	end := b.clock.Now()
	for i := range 150 {
		id, at := fmt.Sprintf("req-%d", i), end.Add(-time.Duration(i)*time.Second)
		b.r.Observe(rig.ID, Observation{RequestID: id, At: at, TTFT: millis(200 + float64(i)), Streamed: true, Duration: time.Second,
			InputTokens: 500, OutputTokens: 500, Status: usage.StatusOK})
		b.r.ObserveUsage(usage.Usage{RequestID: id, OfferingID: rig.ID, InputTokens: 500, OutputTokens: 500,
			TTFTMillis: 20, DurationMillis: 250, Status: usage.StatusOK}, at)
	}
	for range 3 { // a minute apart: a tier could have moved each time
		if err := b.r.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(time.Minute)
	}
	got, err := b.catalog.Get(ctx, rig.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Tier != st || *got.MeasuredTTFTP99Ms != 348 || got.ReportedRequests != 150 || *got.ReportedTTFTP99Ms != 20 ||
		*got.ReportedTokensPerSec != 4000 {
		t.Fatalf("after Flush: tier %s, measured P99 %v, reported %d requests at P99 %v, %v tokens/s", got.Tier,
			*got.MeasuredTTFTP99Ms, got.ReportedRequests, *got.ReportedTTFTP99Ms, *got.ReportedTokensPerSec)
	}
	if why := got.ReportDivergence(); why != "The rig reports a P99 time to first token of 20.0 ms, under half the 348.0 ms the gateway measured. "+
		"The rig reports 4000.0 tokens per second, over twice the 1000.0 the gateway measured." {
		t.Fatalf("ReportDivergence = %q", why)
	}
	b.beat(rig, 0, 8)
	wantPickError(t, b.r, Request{Model: "m", Tier: rt}, ErrTierNotOffered, services.CodeUnavailable)
	if cs := mustPick(t, b.r, Request{Model: "m", Tier: st}); cs[0].TTFTP99Ms != 348 {
		t.Fatalf("routed on a P99 of %v ms, want the gateway's 348", cs[0].TTFTP99Ms)
	}
}
