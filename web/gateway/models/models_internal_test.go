package models

import (
	"encoding/json"
	"testing"

	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/routing"
)

// TestPerTokenWritesDollarsPerTokenExactly: a price per million tokens in micro-dollars is written as
// OpenRouter writes prices, dollars per token, to the last digit.
func TestPerTokenWritesDollarsPerTokenExactly(t *testing.T) {
	t.Parallel()
	for in, want := range map[money.MicroUSD]string{
		900_000:           "0.0000009",
		1_800_000:         "0.0000018",
		150_000:           "0.00000015",
		1:                 "0.000000000001",
		0:                 "0",
		2_000_000_000:     "0.002",
		5_000_000_000_000: "5",
		1_234_567_890_123: "1.234567890123",
	} {
		if got := perToken(in); got != want {
			t.Errorf("perToken(%d) = %q, want %q", in, got, want)
		}
	}
}

// TestModelEntriesCarryEachTiersPrice: the 70B model, with a batch price of its own, shows it on its batch entry
// and, for a key whose default tier is batch, on its bare name; its standard entry shows standard's default. A bare
// name whose tier does not offer the model has no price.
func TestModelEntriesCarryEachTiersPrice(t *testing.T) {
	t.Parallel()
	const big = "meta-llama/Meta-Llama-3-70B-Instruct"
	list := []routing.ModelTiers{{Model: big, Tiers: []catalog.Tier{catalog.TierStandard, catalog.TierBatch},
		Prices: map[catalog.Tier]catalog.Price{
			catalog.TierStandard: {ID: 2, Tier: catalog.TierStandard, Input: 150_000, Output: 300_000, CachedInput: 37_500},
			catalog.TierBatch:    {ID: 9, Tier: catalog.TierBatch, Model: big, Input: 900_000, Output: 1_800_000, CachedInput: 225_000},
		}}, {Model: "m", Tiers: []catalog.Tier{catalog.TierRealtime},
		Prices: map[catalog.Tier]catalog.Price{catalog.TierRealtime: {ID: 1, Input: 300_000, Output: 600_000, CachedInput: 75_000}}}}

	pricing := func(entries []Model) map[string]string {
		out := map[string]string{}
		for _, e := range entries {
			b, _ := json.Marshal(e)
			var back struct {
				ID      string `json:"id"`
				Pricing *struct {
					Prompt         string `json:"prompt"`
					Completion     string `json:"completion"`
					InputCacheRead string `json:"input_cache_read"`
				} `json:"pricing"`
			}
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if back.Pricing == nil {
				out[back.ID] = "none"
				continue
			}
			out[back.ID] = back.Pricing.Prompt + " " + back.Pricing.Completion + " " + back.Pricing.InputCacheRead
		}
		return out
	}
	want := map[string]string{
		big:               "0.00000015 0.0000003 0.0000000375",
		big + ":standard": "0.00000015 0.0000003 0.0000000375",
		big + ":batch":    "0.0000009 0.0000018 0.000000225",
		"m":               "none",
		"m:realtime":      "0.0000003 0.0000006 0.000000075",
	}
	got := pricing(Entries(list, ""))
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s pricing %q, want %q", id, got[id], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("entries %v", got)
	}
	if got := pricing(Entries(list, catalog.TierBatch)); got[big] != "0.0000009 0.0000018 0.000000225" {
		t.Errorf("a batch key's bare 70B pricing %q", got[big])
	}
}
