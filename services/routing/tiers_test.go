package routing

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/usage"

	"github.com/gpumarket/gpumarket/services/catalog"
)

func TestNextTierHasHysteresis(t *testing.T) {
	t.Parallel()
	cases := []struct {
		cur  catalog.Tier
		p99  float64
		want catalog.Tier
	}{
		{rt, 20, rt},
		{rt, 60.5, rt}, // up to 10% over its bound: stays
		{rt, 61, st},   // beyond: demoted to the tier it meets
		{rt, 600, ba},
		{st, 49.5, rt}, // 10% under realtime's bound: promoted
		{st, 50, st},   // under the bound, not by 10%: stays
		{st, 540, st},
		{st, 551, ba},
		{ba, 40, rt},
		{ba, 450, st},
		{ba, 460, ba},
		{ba, 1e6, ba},
	}
	for _, c := range cases {
		if got := nextTier(c.cur, c.p99); got != c.want {
			t.Errorf("nextTier(%s, %g) = %s, want %s", c.cur, c.p99, got, c.want)
		}
	}
}

// fillWindow replaces the offering's window with WindowSize observations ending now whose P99 is p99Ms.
func (b bundle) fillWindow(id string, p99Ms float64) {
	for i := range WindowSize {
		ttft := 10.0
		if i >= WindowSize*99/100-1 {
			ttft = p99Ms
		}
		b.r.Observe(id, Observation{TTFT: millis(ttft), Streamed: true, Duration: time.Second, OutputTokens: 10, Status: usage.StatusOK})
	}
}

// settle runs Flush's tier step on every listed offering and returns each one's tier.
func (b bundle) settle() map[string]catalog.Tier {
	out := map[string]catalog.Tier{}
	for _, l := range b.r.snap.Load().listed {
		_, tier, _, _ := l.state.settle(b.clock.Now(), l.Tier)
		out[l.ID] = tier
	}
	return out
}

// TestTiersFollowLiveP99WithoutFlapping: a P99 hovering around a bound leaves the tier alone; a clear move
// changes it, at most once a minute; and too little traffic changes nothing.
func TestTiersFollowLiveP99WithoutFlapping(t *testing.T) {
	t.Parallel()
	o := claims(offering("o", "m", rt, 100_000), 10, 20) // claims realtime; its ask fits every tier's price
	b := setup(t, o)
	step := func(p99Ms float64, after time.Duration, want catalog.Tier) {
		t.Helper()
		b.clock.Advance(after)
		b.beat(o, 0, 8)
		b.fillWindow("o", p99Ms)
		if got := b.settle()["o"]; got != want {
			t.Fatalf("P99 %g ms: tier %s, want %s", p99Ms, got, want)
		}
		tiers := b.r.Models()[0].Tiers
		if _, err := b.r.Pick(Request{Model: "m", Tier: want}); err != nil || !slices.Equal(tiers, []catalog.Tier{want}) {
			t.Fatalf("P99 %g ms: not routed in %s (%v), models list %v", p99Ms, want, err, tiers)
		}
	}

	// Too few observations: the claim stands, however slow the traffic.
	b.observe("o", catalog.MinMeasuredRequests-1, 2000)
	if got := b.settle()["o"]; got != rt {
		t.Fatalf("tier %s after %d slow requests, want the claimed realtime", got, catalog.MinMeasuredRequests-1)
	}

	for range 5 { // hovering around 55 ms: no flapping
		step(58, 2*time.Minute, rt)
		step(52, 2*time.Minute, rt)
	}
	step(61, 2*time.Minute, st)   // clearly over: demoted
	step(52, 2*time.Minute, st)   // back under, but not by 10%: stays
	step(20, 30*time.Second, rt)  // clearly under: promoted
	step(900, 30*time.Second, rt) // clearly over, but it moved less than a minute ago
	step(900, 30*time.Second, ba) // a minute on: demoted past standard, to the tier it meets
	if _, err := b.r.Pick(Request{Model: "m", Tier: rt}); err == nil {
		t.Fatal("still routed as realtime once demoted to batch")
	}
}

// TestNonStreamedTrafficKeepsARealtimeTier is the finding of a gateway that counted a whole answer's generation
// time as its time to first token: at 40 requests a second, half of them not streamed, realtime offerings were
// demoted at the next flush. Streamed requests have a P99 of 46 ms; the whole answers took 1,171 ms. The tier
// is judged on the streamed ones only, so it stays, and a burst of whole answers alone changes nothing.
func TestNonStreamedTrafficKeepsARealtimeTier(t *testing.T) {
	t.Parallel()
	o := claims(offering("o", "m", rt, 100_000), 20, 50)
	b := setup(t, o)
	for i := range WindowSize {
		if i%2 == 0 {
			ttft := 30.0
			if i >= WindowSize*98/100 { // the slowest 1% of the streamed half
				ttft = 46
			}
			b.r.Observe("o", Observation{RequestID: fmt.Sprintf("s%d", i), TTFT: millis(ttft), Streamed: true,
				Duration: millis(ttft + 800), InputTokens: 200, OutputTokens: 100, Status: usage.StatusOK})
			continue
		}
		b.r.Observe("o", Observation{RequestID: fmt.Sprintf("w%d", i), TTFT: millis(1171), Duration: millis(1171),
			InputTokens: 200, OutputTokens: 100, Status: usage.StatusOK})
	}
	f := b.r.Figures("o")
	if f.Requests != WindowSize/2 || f.TTFTP99Ms != 46 || f.TTFTP50Ms != 30 {
		t.Fatalf("figures %+v; want the %d streamed requests only, P50 30 ms, P99 46 ms", f, WindowSize/2)
	}
	if got := b.settle()["o"]; got != rt {
		t.Fatalf("tier %s after half the traffic answered whole; want realtime kept", got)
	}
	if _, err := b.r.Pick(Request{Model: "m", Tier: rt}); err != nil {
		t.Fatalf("not routed as realtime: %v", err)
	}

	// A burst of whole answers only, however slow, is no measure of the first token: the claim stands.
	q := claims(offering("q", "m", rt, 100_000), 20, 50)
	bq := setup(t, q)
	for i := range WindowSize {
		bq.r.Observe("q", Observation{RequestID: fmt.Sprintf("w%d", i), TTFT: millis(5000), Duration: millis(5000),
			OutputTokens: 500, Status: usage.StatusOK})
	}
	if f := bq.r.Figures("q"); f.Requests != 0 || f.TokensPerSec <= 0 {
		t.Fatalf("figures %+v; want no time to first token, and the throughput of the whole answers", f)
	}
	if got := bq.settle()["q"]; got != rt {
		t.Fatalf("tier %s after whole answers only; want realtime kept", got)
	}
	if got := bq.r.ProbeTargets(); len(got) != 0 {
		t.Fatalf("probes %v for an offering in its claimed tier", ids(got))
	}
}

// TestDemotedOfferingIsProbedBackIntoItsTier: an offering demoted to batch by a slow spell sees no streamed
// traffic there; the platform's probes, every ProbeEvery, are its only streamed requests. Once they have filled
// the window with recovered times to first token, it is promoted back, and probing stops.
func TestDemotedOfferingIsProbedBackIntoItsTier(t *testing.T) {
	t.Parallel()
	o := claims(offering("o", "m", rt, 100_000), 20, 50)
	idle := claims(offering("idle", "m", rt, 100_000), 20, 50)
	b := setup(t, o, idle)
	b.fillWindow("o", 900)
	if got := b.settle()["o"]; got != ba {
		t.Fatalf("tier %s after a P99 of 900 ms; want batch", got)
	}
	if _, err := b.r.Pick(Request{Model: "m", Tier: rt, Offering: "o"}); err == nil {
		t.Fatal("still routed as realtime once demoted")
	}
	targets := b.r.ProbeTargets()
	if len(targets) != 1 || targets[0].OfferingID != "o" || targets[0].Tier != ba {
		t.Fatalf("probe targets %+v; want o alone, in batch", targets)
	}

	// The rig recovers. Probes come every ProbeEvery: until the slow spell has left the window, it stays.
	probes := 0
	for b.settle()["o"] != rt {
		if probes > 200 {
			t.Fatalf("not promoted after %d probes at 30 ms; figures %+v", probes, b.r.Figures("o"))
		}
		b.clock.Advance(ProbeEvery)
		b.beat(o, 0, 8)
		if len(b.r.ProbeTargets()) != 1 {
			t.Fatalf("probing stopped after %d probes, before the offering was promoted", probes)
		}
		b.r.Observe("o", Observation{RequestID: fmt.Sprintf("probe-%d", probes), TTFT: millis(30), Streamed: true,
			Duration: millis(31), InputTokens: 8, OutputTokens: 1, Status: usage.StatusOK})
		probes++
	}
	// The window's Window of probes, every ProbeEvery, once the slow spell is older than Window.
	if want := int(Window / ProbeEvery); probes < want || probes > want+2 {
		t.Fatalf("promoted after %d probes; want about %d, a window of them", probes, want)
	}
	if f := b.r.Figures("o"); f.TTFTP99Ms != 30 {
		t.Fatalf("P99 %g ms at promotion; want the probes' 30 ms", f.TTFTP99Ms)
	}
	if _, err := b.r.Pick(Request{Model: "m", Tier: rt, Offering: "o"}); err != nil {
		t.Fatalf("not routed as realtime once promoted: %v", err)
	}
	if got := b.r.ProbeTargets(); len(got) != 0 {
		t.Fatalf("still probing %v once promoted", ids(got))
	}
}
