package routing

import (
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
		b.r.Observe(id, Observation{TTFT: millis(ttft), Duration: time.Second, OutputTokens: 10, Status: usage.StatusOK})
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
