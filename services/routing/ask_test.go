package routing

import (
	"testing"

	"github.com/gpumarket/gpumarket/services/catalog"
)

func TestSplitModelTier(t *testing.T) {
	for _, c := range []struct {
		in, model string
		tier      catalog.Tier
	}{
		{"m", "m", ""},
		{"m:batch", "m", catalog.TierBatch},
		{"m:realtime", "m", catalog.TierRealtime},
		{"org/model:standard", "org/model", catalog.TierStandard},
		{"org/model:v2", "org/model:v2", ""},        // a suffix that is no tier is part of the name
		{"a:batch:standard", "a:batch", "standard"}, // the last suffix only
		{"m:Batch", "m:Batch", ""},                  // tiers are lower-case
		{":batch", "", catalog.TierBatch},
	} {
		model, tier := SplitModelTier(c.in)
		if model != c.model || tier != c.tier {
			t.Errorf("SplitModelTier(%q) = %q, %q; want %q, %q", c.in, model, tier, c.model, c.tier)
		}
	}
}

// The tier is the first of the model's suffix, the header, the body, the key's default, standard; the order is
// the body's prefer, else the key's.
func TestRequestFor(t *testing.T) {
	yes, no := true, false
	prefs := &Preferences{Only: []string{"Lisboa"}, Sort: SortLatency}
	for _, c := range []struct {
		name string
		ask  Ask
		want Request
	}{
		{"nothing said: standard, by price", Ask{Model: "m"}, Request{Model: "m", Tier: catalog.TierStandard}},
		{"the suffix over everything", Ask{Model: "m:batch", HeaderTier: catalog.TierRealtime, BodyTier: catalog.TierRealtime,
			KeyTier: catalog.TierRealtime}, Request{Model: "m", Tier: catalog.TierBatch}},
		{"the header over the body", Ask{Model: "m", HeaderTier: catalog.TierRealtime, BodyTier: catalog.TierBatch},
			Request{Model: "m", Tier: catalog.TierRealtime}},
		{"the body over the key", Ask{Model: "m", BodyTier: catalog.TierBatch, KeyTier: catalog.TierRealtime},
			Request{Model: "m", Tier: catalog.TierBatch}},
		{"the key's default", Ask{Model: "m", KeyTier: catalog.TierRealtime}, Request{Model: "m", Tier: catalog.TierRealtime}},
		{"a suffix that is no tier", Ask{Model: "m:v2", KeyTier: catalog.TierBatch}, Request{Model: "m:v2", Tier: catalog.TierBatch}},
		{"the key prefers carbon", Ask{Model: "m", KeyPrefersCarbon: true},
			Request{Model: "m", Tier: catalog.TierStandard, PreferCarbon: true}},
		{"the request says price over the key's carbon", Ask{Model: "m", KeyPrefersCarbon: true, PreferCarbon: &no},
			Request{Model: "m", Tier: catalog.TierStandard}},
		{"the request says carbon", Ask{Model: "m", PreferCarbon: &yes},
			Request{Model: "m", Tier: catalog.TierStandard, PreferCarbon: true}},
		{"the caps and the offering pass through", Ask{Model: "m:realtime", MaxPricePerMTok: 150_000, MaxTTFTMillis: 250,
			Offering: "off-1"}, Request{Model: "m", Tier: catalog.TierRealtime, MaxPricePerMTok: 150_000, MaxTTFTMillis: 250,
			Offering: "off-1"}},
		{"the preferences pass through", Ask{Model: "m", Preferences: prefs}, Request{Model: "m", Tier: catalog.TierStandard,
			Preferences: prefs}},
	} {
		if got := RequestFor(c.ask); got != c.want {
			t.Errorf("%s: RequestFor(%+v) = %+v; want %+v", c.name, c.ask, got, c.want)
		}
	}
}
