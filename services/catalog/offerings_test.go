package catalog

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/fixtures"
	"github.com/gpumarket/gpumarket/services/money"
)

// setup returns a catalog on a fresh database with the default price book in force since the
// month before its clock's 2026-11-30 12:00.
func setup(t *testing.T) (*Service, context.Context, func(name string) string) {
	t.Helper()
	pool := dbtest.New(t)
	ctx := context.Background()
	s := NewService(pool, Config{Now: func() time.Time { return time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) }})
	if err := s.EnsureDefaultPrices(ctx, time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	newAccount := func(name string) string {
		return fixtures.Account(t, pool, name)
	}
	return s, ctx, newAccount
}

func f(v float64) *float64 { return &v }

// rig is a listing asking ask per million input tokens and twice that per million output tokens,
// the default price book's ratio.
func rig(model string, ask money.MicroUSD, p99 *float64) ListingInput {
	return ListingInput{GPU: "rtx-4090", GPUCount: 4, Region: "eu", Model: model, AskInput: ask, AskOutput: 2 * ask,
		ClaimedTTFTP99Ms: p99, ClaimedTokensPerSec: f(1858.57)}
}

func TestListingFollowsItsClaimedTier(t *testing.T) {
	t.Parallel()
	s, ctx, newAccount := setup(t)
	p := newAccount("Fjord")
	cases := []struct {
		p99  *float64
		want Tier
	}{{f(40), TierRealtime}, {f(448.04), TierStandard}, {f(871), TierBatch}, {nil, TierBatch}}
	for _, c := range cases {
		o, err := s.Create(ctx, p, rig("m", 50_000, c.p99))
		if err != nil {
			t.Fatal(err)
		}
		if o.Tier != c.want || o.Status != StatusActive || o.FiguresBasis() != "claimed" {
			t.Errorf("p99 %v: tier %s status %s basis %q; want %s active claimed", c.p99, o.Tier, o.Status, o.FiguresBasis(), c.want)
		}
	}
}

func TestInvalidListingSavesNothing(t *testing.T) {
	t.Parallel()
	s, ctx, newAccount := setup(t)
	p := newAccount("Fjord")
	in := ListingInput{GPU: "gtx-1080", GPUCount: 9, Region: "mars", Model: "bad model:tier", AskInput: 0, AskOutput: -1,
		ClaimedTTFTP50Ms: f(500), ClaimedTTFTP99Ms: f(100)}
	_, err := s.Create(ctx, p, in)
	var ae *services.Error
	if !errors.As(err, &ae) || ae.Code != services.CodeInvalid {
		t.Fatalf("Create = %v, want invalid", err)
	}
	for _, field := range []string{"gpu", "gpu_count", "region", "model", FieldAskInput, FieldAskOutput, "claimed_ttft_p99_ms"} {
		if ae.Fields[field] == "" {
			t.Errorf("no message for %s: %v", field, ae.Fields)
		}
	}
	if own, _ := s.ListOwn(ctx, p); len(own) != 0 {
		t.Fatalf("an invalid listing was saved: %+v", own)
	}
}

func TestProvidersSeeAndChangeOnlyTheirOwnRigs(t *testing.T) {
	t.Parallel()
	s, ctx, newAccount := setup(t)
	fjord, other := newAccount("Fjord"), newAccount("Other")
	o, err := s.Create(ctx, fjord, rig("m", 100_000, f(300)))
	if err != nil {
		t.Fatal(err)
	}
	notFound := func(what string, err error) {
		t.Helper()
		if services.ErrorCode(err) != services.CodeNotFound {
			t.Errorf("%s another's rig: %v, want not found", what, err)
		}
	}
	_, err = s.Own(ctx, other, o.ID)
	notFound("get", err)
	_, err = s.Update(ctx, other, o.ID, rig("m", 1, f(300)))
	notFound("update", err)
	notFound("pause", s.SetStatus(ctx, other, o.ID, StatusPaused))
	notFound("delist", s.SetStatus(ctx, other, o.ID, StatusDelisted))
	_, err = s.Own(ctx, fjord, "not-a-uuid")
	notFound("malformed id", err)

	got, err := s.Own(ctx, fjord, o.ID)
	if err != nil || got.AskInput != 100_000 || got.AskOutput != 200_000 || got.Status != StatusActive {
		t.Fatalf("the owner's rig changed: %+v %v", got, err)
	}
}

func TestPauseEditDelist(t *testing.T) {
	t.Parallel()
	s, ctx, newAccount := setup(t)
	p := newAccount("Fjord")
	o, err := s.Create(ctx, p, rig("m", 100_000, f(300)))
	if err != nil {
		t.Fatal(err)
	}
	listed := func() int {
		l, err := s.List(ctx, ListInput{})
		if err != nil {
			t.Fatal(err)
		}
		return len(l)
	}
	if o.RigState != RigPending || listed() != 0 {
		t.Fatalf("a new rig is %s, and in the catalog %d times; want pending, and not in it", o.RigState, listed())
	}
	if err := s.MarkQualified(ctx, o.ID); err != nil {
		t.Fatal(err)
	}
	if listed() != 1 {
		t.Fatal("a qualified rig is not in the catalog")
	}
	if err := s.SetStatus(ctx, p, o.ID, StatusPaused); err != nil {
		t.Fatal(err)
	}
	if listed() != 0 {
		t.Fatal("a paused rig is in the catalog")
	}
	up, err := s.Update(ctx, p, o.ID, rig("m2", 90_000, f(40)))
	if err != nil {
		t.Fatal(err)
	}
	if up.Model != "m2" || up.AskInput != 90_000 || up.AskOutput != 180_000 || up.Tier != TierRealtime || up.Status != StatusPaused {
		t.Fatalf("after edit: %+v", up)
	}
	// Another model: its rig must show it serves that one.
	if up.RigState != RigPending || up.RigProbePasses != 0 {
		t.Fatalf("after a change of model the rig is %s with %d probes passed; want pending, none", up.RigState, up.RigProbePasses)
	}
	if err := s.SetStatus(ctx, p, o.ID, StatusActive); err != nil {
		t.Fatal(err)
	}
	if listed() != 0 {
		t.Fatal("a resumed rig whose new model is not qualified is in the catalog")
	}
	if err := s.MarkQualified(ctx, o.ID); err != nil {
		t.Fatal(err)
	}
	same, err := s.Update(ctx, p, o.ID, rig("m2", 80_000, f(40)))
	if err != nil || same.RigState != RigActive {
		t.Fatalf("after an edit of its asks only the rig is %s, %v; want active still", same.RigState, err)
	}
	if listed() != 1 {
		t.Fatal("a resumed rig is not in the catalog")
	}
	if err := s.SetStatus(ctx, p, o.ID, StatusDelisted); err != nil {
		t.Fatal(err)
	}
	if listed() != 0 {
		t.Fatal("a delisted rig is in the catalog")
	}
	if err := s.SetStatus(ctx, p, o.ID, StatusActive); services.ErrorCode(err) != services.CodeNotFound {
		t.Fatalf("a delisted rig came back: %v", err)
	}
}

func TestListFiltersAndSorts(t *testing.T) {
	t.Parallel()
	s, ctx, newAccount := setup(t)
	p := newAccount("Fjord")
	mk := func(model, region string, askIn, askOut money.MicroUSD, p99, tps float64, gpu string, n int) {
		in := ListingInput{GPU: gpu, GPUCount: n, Region: region, Model: model, AskInput: askIn, AskOutput: askOut,
			ClaimedTTFTP99Ms: f(p99), ClaimedTokensPerSec: f(tps)}
		o, err := s.Create(ctx, p, in)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.MarkQualified(ctx, o.ID); err != nil {
			t.Fatal(err)
		}
	}
	// Blended asks: $0.30, $0.15 and $0.09 (the batch one asks more per input token than the standard
	// one, and less per output token: the blend orders them).
	mk("a", "eu", 200_000, 400_000, 30, 3000, "h100-pcie", 1)
	mk("a", "no", 50_000, 250_000, 450, 1850, "rtx-4090", 4)
	mk("b", "us", 60_000, 120_001, 800, 1500, "rtx-4090", 2)

	ids := func(in ListInput) []string {
		l, err := s.List(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range l {
			out = append(out, o.Model+"/"+o.Region)
		}
		return out
	}
	check := func(name string, got []string, want ...string) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%s: %v, want %v", name, got, want)
			return
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%s: %v, want %v", name, got, want)
				return
			}
		}
	}
	check("price", ids(ListInput{}), "b/us", "a/no", "a/eu")
	check("tier", ids(ListInput{Tier: TierStandard}), "a/no")
	check("model", ids(ListInput{Model: "a"}), "a/no", "a/eu")
	check("region", ids(ListInput{Region: "us"}), "b/us")
	check("max ask", ids(ListInput{MaxAsk: 150_000}), "b/us", "a/no")
	check("max ask, the blend rounded up", ids(ListInput{MaxAsk: 90_000}))
	check("max ask at the blend", ids(ListInput{MaxAsk: 90_001}), "b/us")
	check("max p99", ids(ListInput{MaxP99Ms: 500}), "a/no", "a/eu")
	check("latency", ids(ListInput{Sort: SortLatency}), "a/eu", "a/no", "b/us")
	check("throughput", ids(ListInput{Sort: SortThroughput}), "a/eu", "a/no", "b/us")
	// Carbon: H100 in the EU 350 W / 3000 tps x 242 g = 7.8 g; 4x4090 in Norway 1800 W / 1850 x 30 = 8.1 g;
	// 2x4090 in the US 900 W / 1500 x 367 = 61 g.
	check("carbon", ids(ListInput{Sort: SortCarbon}), "a/eu", "a/no", "b/us")
	if _, err := s.List(ctx, ListInput{Tier: "gold", Sort: "vibes"}); services.ErrorCode(err) != services.CodeInvalid {
		t.Errorf("bad filters: %v", err)
	}
}

func TestMeasuredFiguresReplaceClaims(t *testing.T) {
	t.Parallel()
	s, ctx, newAccount := setup(t)
	p := newAccount("Fjord")
	o, err := s.EnsureSeeded(ctx, p, "k", SeedInput{Listing: rig("m", 50_000, f(40)), MeasuredRequests: 200,
		MeasuredTTFTP50Ms: 300, MeasuredTTFTP99Ms: 802.63, MeasuredTPS: 1500.34, Source: "bench"})
	if err != nil {
		t.Fatal(err)
	}
	// The provider claimed 40 ms; traffic measured 803 ms: traffic decides.
	if o.Tier != TierBatch || o.FiguresBasis() != "measured over 200 requests" || *o.TTFTP99Ms() != 802.63 {
		t.Fatalf("tier %s basis %q p99 %v", o.Tier, o.FiguresBasis(), *o.TTFTP99Ms())
	}
	// An edit of the claims does not move a measured offering's tier.
	up, err := s.Update(ctx, p, o.ID, rig("m", 50_000, f(20)))
	if err != nil || up.Tier != TierBatch {
		t.Fatalf("after editing claims: tier %s, %v", up.Tier, err)
	}
	again, err := s.EnsureSeeded(ctx, p, "k", SeedInput{Listing: rig("m", 1, f(1)), MeasuredTTFTP99Ms: 1})
	if err != nil || again.ID != o.ID || again.AskInput != 50_000 || again.AskOutput != 100_000 {
		t.Fatalf("seeding twice changed the offering: %+v %v", again, err)
	}
}

func TestPricesTakeEffectFromTheirDate(t *testing.T) {
	t.Parallel()
	s, ctx, _ := setup(t)
	start := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC) // as setup made the defaults
	if err := s.EnsureDefaultPrices(ctx, start.AddDate(0, 0, 5)); err != nil {
		t.Fatal(err)
	}
	fixtures.Price(t, s.pool, "standard", start.AddDate(0, 1, 0), 1, 2)
	before, err := s.PricesAt(ctx, start.AddDate(0, 1, 0).Add(-time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	after, err := s.PricesAt(ctx, start.AddDate(0, 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	if before[TierStandard].Input != DefaultPrices[1].Input || after[TierStandard].Input != 1 || after[TierStandard].Output != 2 {
		t.Fatalf("before %+v after %+v", before[TierStandard], after[TierStandard])
	}
	if len(before) != 3 || before[TierRealtime].Output != DefaultPrices[0].Output {
		t.Fatalf("prices %+v", before)
	}
	if none, _ := s.PricesAt(ctx, start.Add(-time.Second)); len(none) != 0 {
		t.Fatalf("prices before the book began: %+v", none)
	}
}

func TestSchedulePriceIsNeverRetroactive(t *testing.T) {
	t.Parallel()
	s, ctx, _ := setup(t)
	now := s.now()
	finance := fixtures.User(t, s.pool, fixtures.Account(t, s.pool, "ops"), "fin@example.com", "finance")
	_, err := s.SchedulePrice(ctx, finance, ScheduleInput{Tier: TierBatch, Input: 1, Output: 2, EffectiveFrom: now.Add(-time.Second)})
	if services.ErrorCode(err) != services.CodeInvalid {
		t.Fatalf("a retroactive change: %v", err)
	}
	from := now.AddDate(0, 0, 1)
	if _, err := s.SchedulePrice(ctx, finance, ScheduleInput{Tier: TierBatch, Input: 70_000, Output: 140_000, EffectiveFrom: from}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SchedulePrice(ctx, finance, ScheduleInput{Tier: TierBatch, Input: 1, Output: 1, EffectiveFrom: from}); services.ErrorCode(err) != services.CodeConflict {
		t.Fatalf("two changes at one moment: %v", err)
	}
	// Usage before the change keeps the old price.
	before, _ := s.PricesAt(ctx, from.Add(-time.Millisecond))
	after, _ := s.PricesAt(ctx, from)
	if before[TierBatch].Input != DefaultPrices[2].Input || after[TierBatch].Input != 70_000 {
		t.Fatalf("before %v after %v", before[TierBatch], after[TierBatch])
	}
	hist, err := s.PriceHistory(ctx)
	if err != nil || len(hist) != 4 || hist[0].CreatedBy != "fin@example.com" || hist[0].Input != 70_000 {
		t.Fatalf("history %+v %v", hist, err)
	}
}
