package routing

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/carbon"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
)

const (
	rt = catalog.TierRealtime
	st = catalog.TierStandard
	ba = catalog.TierBatch
)

// TestPickFiltersCandidatesByEachRule: every rule a candidate must pass, one at a time. Asks are more than 5%
// apart, so the order is cheapest first with no random draw.
func TestPickFiltersCandidatesByEachRule(t *testing.T) {
	t.Parallel()
	cheap, mid, dear := offering("cheap", "m", st, 100_000), offering("mid", "m", st, 150_000), offering("dear", "m", st, 200_000)
	cases := []struct {
		name      string
		offerings []catalog.Offering
		prepare   func(b bundle)
		req       Request
		want      []string
		wantErr   error
		wantCode  services.Code
	}{
		{name: "serves the model", offerings: []catalog.Offering{cheap, offering("other", "m2", st, 50_000)},
			req: Request{Model: "m"}, want: []string{"cheap"}},
		{name: "cheapest first, at most three", offerings: []catalog.Offering{dear, offering("dearer", "m", st, 220_000), cheap, mid},
			req: Request{Model: "m", Tier: st}, want: []string{"cheap", "mid", "dear"}},
		{name: "no tier means standard", offerings: []catalog.Offering{offering("fast", "m", rt, 50_000), cheap},
			req: Request{Model: "m"}, want: []string{"cheap"}},
		{name: "in the tier", offerings: []catalog.Offering{offering("fast", "m", rt, 50_000), offering("slow", "m", ba, 60_000), cheap},
			req: Request{Model: "m", Tier: rt}, want: []string{"fast"}},
		{name: "unknown model", offerings: []catalog.Offering{cheap},
			req: Request{Model: "nope"}, wantErr: ErrUnknownModel, wantCode: services.CodeNotFound},
		{name: "model not offered in the tier", offerings: []catalog.Offering{cheap},
			req: Request{Model: "m", Tier: rt}, wantErr: ErrTierNotOffered, wantCode: services.CodeUnavailable},
		{name: "ask above the tier's blended price is not routed", offerings: []catalog.Offering{cheap, offering("loss", "m", st, 225_001), offering("even", "m", st, 225_000)},
			req: Request{Model: "m", Tier: st}, want: []string{"cheap", "even"}},
		{name: "a model offered only above its tier's price is unknown", offerings: []catalog.Offering{offering("loss", "m", ba, 120_001)},
			req: Request{Model: "m", Tier: ba}, wantErr: ErrUnknownModel, wantCode: services.CodeNotFound},
		{name: "paused offerings are not routed", offerings: []catalog.Offering{cheap, func() catalog.Offering {
			o := offering("paused", "m", st, 50_000)
			o.Status = catalog.StatusPaused
			return o
		}()}, req: Request{Model: "m"}, want: []string{"cheap"}},
		{name: "no heartbeat for 15 s is unhealthy", offerings: []catalog.Offering{cheap, mid},
			prepare: func(b bundle) {
				b.clock.Advance(10 * time.Second)
				b.beat(mid, 0, 8)
				b.clock.Advance(5*time.Second + 1)
			},
			req: Request{Model: "m"}, want: []string{"mid"}},
		{name: "all unhealthy", offerings: []catalog.Offering{cheap},
			prepare: func(b bundle) { b.clock.Advance(HeartbeatTimeout + time.Millisecond) },
			req:     Request{Model: "m"}, wantErr: ErrUnavailable, wantCode: services.CodeUnavailable},
		{name: "a heartbeat from another provider does not count", offerings: []catalog.Offering{cheap, mid},
			prepare: func(b bundle) {
				b.clock.Advance(HeartbeatTimeout + time.Millisecond)
				b.beat(mid, 0, 8)
				b.r.recordHeartbeat(Heartbeat{OfferingID: "cheap", ProviderID: "someone-else", Capacity: 8})
			},
			req: Request{Model: "m"}, want: []string{"mid"}},
		{name: "price cap on the blended ask", offerings: []catalog.Offering{cheap, mid, dear},
			req: Request{Model: "m", MaxPricePerMTok: 150_000}, want: []string{"cheap", "mid"}},
		{name: "price cap on the blend, not on either ask", offerings: []catalog.Offering{asking("lopsided", "m", st, 20_000, 280_000), cheap},
			req: Request{Model: "m", MaxPricePerMTok: 150_000}, want: []string{"cheap", "lopsided"}},
		{name: "price cap a micro-dollar under the blend", offerings: []catalog.Offering{asking("odd", "m", st, 100_000, 200_001)},
			req: Request{Model: "m", MaxPricePerMTok: 150_000}, wantErr: ErrOverCaps, wantCode: services.CodeUnavailable},
		{name: "price cap nobody meets", offerings: []catalog.Offering{cheap, mid},
			req: Request{Model: "m", MaxPricePerMTok: 99_999}, wantErr: ErrOverCaps, wantCode: services.CodeUnavailable},
		{name: "latency cap on the claimed P99 when traffic is thin",
			offerings: []catalog.Offering{claims(cheap, 200, 400), claims(mid, 50, 90), dear},
			req:       Request{Model: "m", MaxTTFTMillis: 100}, want: []string{"mid"}},
		{name: "latency cap on the live P99 once measured",
			offerings: []catalog.Offering{claims(cheap, 20, 40), claims(mid, 50, 90)},
			prepare:   func(b bundle) { b.observe("cheap", catalog.MinMeasuredRequests, 300) },
			req:       Request{Model: "m", MaxTTFTMillis: 100}, want: []string{"mid"}},
		{name: "live traffic under the minimum does not replace the claim",
			offerings: []catalog.Offering{claims(cheap, 20, 40), claims(mid, 50, 90)},
			prepare:   func(b bundle) { b.observe("cheap", catalog.MinMeasuredRequests-1, 300) },
			req:       Request{Model: "m", MaxTTFTMillis: 100}, want: []string{"cheap", "mid"}},
		{name: "latency cap nobody meets", offerings: []catalog.Offering{claims(cheap, 200, 400)},
			req: Request{Model: "m", MaxTTFTMillis: 100}, wantErr: ErrOverCaps, wantCode: services.CodeUnavailable},
		{name: "open circuit", offerings: []catalog.Offering{cheap, mid},
			prepare: func(b bundle) {
				for range FailureThreshold {
					b.r.Failure("cheap")
				}
			},
			req: Request{Model: "m"}, want: []string{"mid"}},
		{name: "pinned offering only", offerings: []catalog.Offering{cheap, mid, dear},
			req: Request{Model: "m", Offering: "mid"}, want: []string{"mid"}},
		{name: "pinned offering of another model", offerings: []catalog.Offering{cheap, offering("x", "m2", st, 1000)},
			req: Request{Model: "m", Offering: "x"}, wantErr: ErrUnknownOffering, wantCode: services.CodeNotFound},
		{name: "pinned offering in another tier", offerings: []catalog.Offering{cheap, offering("fast", "m", rt, 50_000)},
			req: Request{Model: "m", Tier: st, Offering: "fast"}, wantErr: ErrTierNotOffered, wantCode: services.CodeUnavailable},
		{name: "pinned offering over the caps", offerings: []catalog.Offering{cheap, mid},
			req: Request{Model: "m", Offering: "mid", MaxPricePerMTok: 120_000}, wantErr: ErrOverCaps, wantCode: services.CodeUnavailable},
		{name: "pinned offering unhealthy", offerings: []catalog.Offering{cheap, mid},
			prepare: func(b bundle) { b.clock.Advance(HeartbeatTimeout + 1); b.beat(cheap, 0, 8) },
			req:     Request{Model: "m", Offering: "mid"}, wantErr: ErrUnavailable, wantCode: services.CodeUnavailable},
		{name: "invalid tier", offerings: []catalog.Offering{cheap},
			req: Request{Model: "m", Tier: "premium"}, wantCode: services.CodeInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, c.offerings...)
			if c.prepare != nil {
				c.prepare(b)
			}
			if c.wantErr != nil {
				wantPickError(t, b.r, c.req, c.wantErr, c.wantCode)
				return
			}
			if c.wantCode != "" {
				if cs, err := b.r.Pick(c.req); services.ErrorCode(err) != c.wantCode {
					t.Fatalf("Pick = %v, %v; want %s", ids(cs), err, c.wantCode)
				}
				return
			}
			if got := b.pickIDs(t, c.req); !slices.Equal(got, c.want) {
				t.Fatalf("Pick = %v, want %v", got, c.want)
			}
		})
	}
}

func TestPickTellsWhatToDoWhenTheTierIsNotOffered(t *testing.T) {
	t.Parallel()
	b := setup(t, offering("a", "m", rt, 100_000), offering("b", "m", ba, 100_000))
	_, err := b.r.Pick(Request{Model: "m", Tier: st})
	var ae *services.Error
	if !errors.As(err, &ae) || ae.Message != "m is not offered in the standard tier; it is offered in realtime and batch: ask for m:realtime." {
		t.Fatalf("Pick = %v", err)
	}
}

func TestPickFailsUntilTheCatalogIsLoaded(t *testing.T) {
	t.Parallel()
	r := New(Config{Catalog: &fakeCatalog{}})
	wantPickError(t, r, Request{Model: "m"}, ErrNotLoaded, services.CodeUnavailable)
}

// TestPowerOfTwoChoicesPrefersTheFasterOfNearEquals: many providers behind one model with very
// different latency. Among asks within 5% of each other, routing goes by measured time to first token: the
// slowest is never the first choice (it loses every draw it is in), and the faster an offering the more often it
// is first. An offering more than 5% cheaper is first whatever its latency.
func TestPowerOfTwoChoicesPrefersTheFasterOfNearEquals(t *testing.T) {
	t.Parallel()
	b := setup(t,
		offering("fast", "m", st, 102_000), offering("quick", "m", st, 100_000),
		offering("slow", "m", st, 103_000), offering("slowest", "m", st, 101_000))
	for id, p50 := range map[string]float64{"fast": 20, "quick": 60, "slow": 400, "slowest": 1900} {
		b.observe(id, minLiveSamples, p50)
	}
	const n = 6000
	first := map[string]int{}
	var sumWait float64
	for range n {
		cs, err := b.r.Pick(Request{Model: "m"})
		if err != nil || len(cs) != MaxCandidates {
			t.Fatalf("Pick = %v, %v", ids(cs), err)
		}
		first[cs[0].OfferingID]++
		sumWait += cs[0].TTFTP50Ms
	}
	// With four near-equals, the fastest is in a draw half the time and wins it: 1/2; the next 1/3, then 1/6.
	if first["slowest"] != 0 || first["fast"] < n*45/100 || first["quick"] < n*28/100 || first["slow"] < n*12/100 ||
		first["fast"] <= first["quick"] || first["quick"] <= first["slow"] {
		t.Fatalf("first choices %v", first)
	}
	// Random choice would wait (20+60+400+1900)/4 = 595 ms on average.
	if mean := sumWait / n; mean > 200 {
		t.Fatalf("mean expected time to first token of first choices %.0f ms, want well under random's 595", mean)
	}

	cheapest := offering("cheapest", "m", st, 90_000)
	b.cat.add(cheapest)
	if err := b.r.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.beat(cheapest, 0, 8)
	b.observe("cheapest", minLiveSamples, 5000)
	for range 100 {
		if got := b.pickIDs(t, Request{Model: "m"}); got[0] != "cheapest" {
			t.Fatalf("Pick = %v, want the cheapest first: price decides beyond near-equals", got)
		}
	}
}

// TestPickWeighsLoad: between near-equals with equal latency, the less loaded one wins; a rig at capacity goes
// after those with room even when it is cheaper.
func TestPickWeighsLoad(t *testing.T) {
	t.Parallel()
	a, c := claims(offering("a", "m", st, 100_000), 100, 200), claims(offering("c", "m", st, 104_000), 100, 200)
	b := setup(t, a, c)
	b.beat(a, 6, 8)
	for range 50 {
		if got := b.pickIDs(t, Request{Model: "m"}); !slices.Equal(got, []string{"c", "a"}) {
			t.Fatalf("Pick = %v, want the less loaded first", got)
		}
	}

	full := claims(offering("full", "m", st, 50_000), 100, 200)
	b = setup(t, full, a)
	b.beat(full, 0, 2)
	end1, end2 := b.r.Begin("full"), b.r.Begin("full") // this gateway's own requests fill it between heartbeats
	if got := b.pickIDs(t, Request{Model: "m"}); !slices.Equal(got, []string{"a", "full"}) {
		t.Fatalf("Pick = %v, want the rig at capacity last", got)
	}
	end1()
	end1() // a second end changes nothing
	cs, _ := b.r.Pick(Request{Model: "m"})
	if got := ids(cs); !slices.Equal(got, []string{"full", "a"}) || cs[0].InFlight != 1 || cs[0].Capacity != 2 {
		t.Fatalf("Pick = %+v, want the cheap rig first once it has room", cs)
	}
	end2()
}

// TestCandidatesCarryWhatTheGatewayNeeds: and the terms the route ticket fixes, the asks and the price book's row
// in force (realtime is row 1 of the default book: $0.30 in, $0.60 out).
func TestCandidatesCarryWhatTheGatewayNeeds(t *testing.T) {
	t.Parallel()
	o := claims(asking("a", "m", rt, 150_000, 250_000), 20, 40)
	b := setup(t, o)
	cs, err := b.r.Pick(Request{Model: "m", Tier: rt})
	if err != nil {
		t.Fatal(err)
	}
	want := Candidate{OfferingID: "a", ProviderID: "provider-a", Model: "m", Tier: rt,
		AskInput: 150_000, AskOutput: 250_000, PriceID: 1, PriceInput: 300_000, PriceOutput: 600_000, PriceCachedInput: 75_000,
		TTFTP50Ms: 20, TTFTP99Ms: 40, Capacity: 8}
	if len(cs) != 1 || !reflect.DeepEqual(cs[0], want) {
		t.Fatalf("Pick = %+v, want %+v", cs, want)
	}
}

// TestEachAskIsHeldToItsOwnPrice: an offering is offered in a tier when its input ask is at most the tier's input
// price and its output ask at most the output price, whatever its blend: standard pays $0.15 in and $0.30 out.
func TestEachAskIsHeldToItsOwnPrice(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		in, out money.MicroUSD
		offered bool
	}{
		{"at both prices", 150_000, 300_000, true},
		{"under both", 1, 1, true},
		{"input over, blend under", 150_001, 100_000, false},
		{"output over, blend under", 10_000, 300_001, false},
		{"both over", 400_000, 400_000, false},
	}
	for _, c := range cases {
		b := setup(t, asking("o", "m", st, c.in, c.out))
		_, err := b.r.Pick(Request{Model: "m", Tier: st})
		if offered := err == nil; offered != c.offered {
			t.Errorf("%s (%d in, %d out): Pick = %v; want offered %v", c.name, c.in, c.out, err, c.offered)
		}
		if models := b.r.Models(); (len(models) == 1) != c.offered {
			t.Errorf("%s: Models = %+v", c.name, models)
		}
		if !c.offered {
			wantPickError(t, b.r, Request{Model: "m", Tier: st}, ErrUnknownModel, services.CodeNotFound)
		}
	}
}

// TestAScheduledPriceChangeTakesEffectAtItsInstant: the router holds the whole price book, so a change scheduled
// for 13:00 routes by the new price from 13:00 on, with no catalog reload in between. At $0.12 in and $0.25 out
// the dearer offering ($0.14 and $0.28) leaves standard; the cheaper one carries the new row's id.
func TestAScheduledPriceChangeTakesEffectAtItsInstant(t *testing.T) {
	t.Parallel()
	cheap, dear := asking("cheap", "m", st, 100_000, 200_000), asking("dear", "m", st, 140_000, 280_000)
	b := setup(t)
	b.cat.book[st] = append(b.cat.book[st], catalog.Price{ID: 9, Tier: st, Input: 120_000, Output: 250_000,
		EffectiveFrom: b.clock.Now().Add(time.Hour)})
	b.cat.add(cheap, dear)
	if err := b.r.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.beat(cheap, 0, 8)
	b.beat(dear, 0, 8)
	cs := mustPick(t, b.r, Request{Model: "m", Offering: "dear"})
	if cs[0].PriceID != 2 || cs[0].PriceInput != 150_000 || cs[0].PriceOutput != 300_000 {
		t.Fatalf("before the change: %+v", cs[0])
	}
	b.clock.Advance(time.Hour - time.Nanosecond)
	b.beat(cheap, 0, 8)
	b.beat(dear, 0, 8)
	if got := b.pickIDs(t, Request{Model: "m"}); !slices.Equal(got, []string{"cheap", "dear"}) {
		t.Fatalf("a nanosecond before the change: %v", got)
	}
	b.clock.Advance(time.Nanosecond)
	b.beat(cheap, 0, 8)
	b.beat(dear, 0, 8)
	cs = mustPick(t, b.r, Request{Model: "m"})
	if got := ids(cs); !slices.Equal(got, []string{"cheap"}) || cs[0].PriceID != 9 || cs[0].PriceInput != 120_000 || cs[0].PriceOutput != 250_000 {
		t.Fatalf("at the change: %+v", cs)
	}
	wantPickError(t, b.r, Request{Model: "m", Offering: "dear"}, ErrUnknownOffering, services.CodeNotFound)
}

func TestModelsListsEachModelWithItsTiers(t *testing.T) {
	t.Parallel()
	b := setup(t,
		offering("a", "m1", ba, 100_000), offering("b", "m1", rt, 300_000), offering("c", "m1", rt, 200_000),
		offering("d", "m2", st, 100_000),
		offering("e", "m3", ba, 500_000)) // asks more than batch's price: not on offer
	want := []ModelTiers{{Model: "m1", Tiers: []catalog.Tier{rt, ba}}, {Model: "m2", Tiers: []catalog.Tier{st}}}
	if got := b.r.Models(); !slices.EqualFunc(got, want, func(x, y ModelTiers) bool {
		return x.Model == y.Model && slices.Equal(x.Tiers, y.Tiers)
	}) {
		t.Fatalf("Models = %+v, want %+v", got, want)
	}
}

// rig is an offering of the benchmark's 4x RTX 4090 at its sweet spot (1858.57 tokens/s claimed), home-run, in a
// region.
func rig(id, region string, tier catalog.Tier, blend money.MicroUSD) catalog.Offering {
	o := claims(offering(id, "m", tier, blend), 100, 448)
	o.GPU, o.GPUCount, o.Region, o.Site, o.ClaimedTokensPerSec = "rtx-4090", 4, region, carbon.SiteHome, f64(1858.57)
	return o
}

// TestPreferCarbonPicksTheLowestCarbonRigThatKeepsThePromise: a Norwegian rig (30 gCO2e/kWh) over a cheaper Polish
// one (662) in the same tier when the request prefers carbon; the cheaper one otherwise; and never one that breaks
// the tier or the caps.
func TestPreferCarbonPicksTheLowestCarbonRigThatKeepsThePromise(t *testing.T) {
	t.Parallel()
	poland, norway, germany := rig("poland", "pl", st, 100_000), rig("norway", "no", st, 200_000), rig("germany", "de", st, 150_000)
	fastNorway := rig("fast-norway", "no", rt, 100_000)
	fastNorway.GPU, fastNorway.GPUCount = "h100-pcie", 1
	unknown := offering("unknown", "m", st, 120_000) // no GPU, region or throughput: no estimate
	cases := []struct {
		name string
		req  Request
		want []string
	}{
		{"by ask without the preference", Request{Model: "m", Tier: st}, []string{"poland", "unknown", "germany"}},
		{"by carbon with it, the rig without an estimate last", Request{Model: "m", Tier: st, PreferCarbon: true}, []string{"norway", "germany", "poland"}},
		{"the caps still hold", Request{Model: "m", Tier: st, PreferCarbon: true, MaxPricePerMTok: 150_000}, []string{"germany", "poland", "unknown"}},
		{"the tier still holds", Request{Model: "m", Tier: rt, PreferCarbon: true}, []string{"fast-norway"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := setup(t, poland, norway, germany, fastNorway, unknown)
			if got := b.pickIDs(t, c.req); !slices.Equal(got, c.want) {
				t.Errorf("Pick = %v, want %v", got, c.want)
			}
		})
	}
	// The candidate carries its estimate: 1800 W over 1858.57 tokens/s, in kWh, x 30 g/kWh x PUE 1.0 at home.
	b := setup(t, poland, norway)
	cs, err := b.r.Pick(Request{Model: "m", PreferCarbon: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := 1800 / 1858.57 / 3.6e6 * 30; cs[0].OfferingID != "norway" || math.Abs(cs[0].GCO2ePerToken-want) > 1e-15 {
		t.Errorf("first %s at %g g per token, want norway at %g", cs[0].OfferingID, cs[0].GCO2ePerToken, want)
	}
	if want := 1800 / 1858.57 / 3.6e6 * 662; math.Abs(cs[1].GCO2ePerToken-want) > 1e-15 {
		t.Errorf("poland at %g g per token, want %g", cs[1].GCO2ePerToken, want)
	}
}

// TestPreferCarbonCountsPUEAndLiveThroughput: a data centre's PUE 1.3 and a stated PUE weigh in, and enough live
// traffic replaces the claimed throughput.
func TestPreferCarbonCountsPUEAndLiveThroughput(t *testing.T) {
	t.Parallel()
	home, dc := rig("home", "de", st, 100_000), rig("dc", "de", st, 100_000)
	dc.Site = carbon.SiteDatacentre
	b := setup(t, home, dc)
	if got := b.pickIDs(t, Request{Model: "m", PreferCarbon: true}); !slices.Equal(got, []string{"home", "dc"}) {
		t.Errorf("home at PUE 1.0 should come before a data centre at 1.3: %v", got)
	}
	dc.StatedPUE = f64(1.0)
	dc.ClaimedTokensPerSec = f64(2000)
	b = setup(t, home, dc)
	if got := b.pickIDs(t, Request{Model: "m", PreferCarbon: true}); !slices.Equal(got, []string{"dc", "home"}) {
		t.Errorf("a data centre stating PUE 1.0 with more throughput should come first: %v", got)
	}
	// Live traffic replaces both claims: a hundred requests of 200 tokens over the same 1.1 s (observe) is
	// 18,182 tokens/s, so both now estimate the same energy per token at PUE 1.0, and the id breaks the tie.
	b.observe("dc", catalog.MinMeasuredRequests, 100)
	b.observe("home", catalog.MinMeasuredRequests, 100)
	b.clock.Advance(figuresTTL) // past the figures the last Pick cached
	cs, err := b.r.Pick(Request{Model: "m", PreferCarbon: true})
	if err != nil {
		t.Fatal(err)
	}
	want := 1800 / (catalog.MinMeasuredRequests * 200 / 1.1) / 3.6e6 * 381
	for _, c := range cs {
		if math.Abs(c.GCO2ePerToken-want) > 1e-12 {
			t.Errorf("%s at %g g per token, want %g from its live throughput", c.OfferingID, c.GCO2ePerToken, want)
		}
	}
	if got := ids(cs); !slices.Equal(got, []string{"dc", "home"}) {
		t.Errorf("order %v", got)
	}
}

func TestCapacityIsTheLastHeartbeats(t *testing.T) {
	t.Parallel()
	o := offering("a", "m", st, 100_000)
	b := setup(t, o)
	b.beat(o, 1, 12)
	if got, none := b.r.Capacity("a"), b.r.Capacity("nobody"); got != 12 || none != 0 {
		t.Errorf("Capacity = %d and %d, want 12 and 0", got, none)
	}
}

// TestBatchRequestsTakeIdleSlotsOfFasterRigs: a batch request goes to batch rigs first, then to a
// realtime or standard rig only while its heartbeat reports at least two free slots and its
// asks are within the batch price it is paid at; it is ticketed at the batch tier and price.
// A request of a faster tier never borrows, and a pinned batch request does not either.
func TestBatchRequestsTakeIdleSlotsOfFasterRigs(t *testing.T) {
	t.Parallel()
	slow := claims(offering("slow", "m", ba, 110_000), 3000, 6000)
	fast := claims(offering("fast", "m", rt, 60_000), 20, 40)
	dear := claims(offering("dear", "m", st, 130_000), 200, 400) // over the batch price: never borrowed
	b := setup(t, slow, fast, dear)
	b.beat(fast, 0, 8)
	cs, err := b.r.Pick(Request{Model: "m", Tier: ba})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(cs); !slices.Equal(got, []string{"slow", "fast"}) {
		t.Fatalf("Pick = %v, want the batch rig, then the idle realtime one", got)
	}
	batch := cs[0]
	if f := cs[1]; f.Tier != ba || f.PriceID != batch.PriceID || f.PriceInput != batch.PriceInput || f.PriceOutput != batch.PriceOutput {
		t.Errorf("the borrowed slot is ticketed at %s, price %d (%d/%d); want the batch tier's %d (%d/%d)",
			f.Tier, f.PriceID, f.PriceInput, f.PriceOutput, batch.PriceID, batch.PriceInput, batch.PriceOutput)
	}
	b.beat(fast, 7, 8) // one free slot: kept for its own tier
	if got := b.pickIDs(t, Request{Model: "m", Tier: ba}); !slices.Equal(got, []string{"slow"}) {
		t.Errorf("with one free slot: Pick = %v, want the batch rig alone", got)
	}
	b.beat(fast, 0, 0) // no capacity reported
	if got := b.pickIDs(t, Request{Model: "m", Tier: ba}); !slices.Equal(got, []string{"slow"}) {
		t.Errorf("without a reported capacity: Pick = %v, want the batch rig alone", got)
	}
	b.beat(fast, 0, 8)
	if got := b.pickIDs(t, Request{Model: "m", Tier: rt}); !slices.Equal(got, []string{"fast"}) {
		t.Errorf("a realtime request: Pick = %v", got)
	}
	if got := b.pickIDs(t, Request{Model: "m", Tier: ba, Offering: "slow"}); !slices.Equal(got, []string{"slow"}) {
		t.Errorf("a pinned batch request: Pick = %v", got)
	}

	// A model whose only rig was promoted out of the batch tier still serves batch work while
	// that rig has room.
	b = setup(t, fast)
	b.beat(fast, 1, 8)
	if got := b.pickIDs(t, Request{Model: "m", Tier: ba}); !slices.Equal(got, []string{"fast"}) {
		t.Errorf("no batch rig: Pick = %v, want the idle realtime one", got)
	}
	b.beat(fast, 7, 8)
	if _, err := b.r.Pick(Request{Model: "m", Tier: ba}); !errors.Is(err, ErrTierNotOffered) {
		t.Errorf("no batch rig and no idle slot: %v, want %v", err, ErrTierNotOffered)
	}
}
