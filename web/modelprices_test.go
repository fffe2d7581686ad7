package web_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
)

// TestTheCatalogShowsModelsAtTheirOwnPrice: the demo prices the 70B model in batch at $0.90 in and $1.80 out per
// million tokens. The price list carries it apart from the tiers' defaults; the catalog's API shows the 70B
// offering at it, marked as its model's own, and an 8B offering at its tier's default; the catalog page lists it
// under the batch tier.
func TestTheCatalogShowsModelsAtTheirOwnPrice(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const big = "meta-llama/Meta-Llama-3-70B-Instruct"
	var prices struct {
		Prices      []catalog.Price `json:"prices"`
		ModelPrices []catalog.Price `json:"model_prices"`
	}
	wantStatus(t, e.call(t, "", http.MethodGet, "/api/prices", nil, &prices), http.StatusOK)
	var own catalog.Price
	for _, p := range prices.ModelPrices {
		if p.Tier == catalog.TierBatch && p.Model == big {
			own = p
		}
	}
	if len(prices.Prices) != len(catalog.Tiers) || own.Input != 900_000 || own.Output != 1_800_000 {
		t.Fatalf("prices %+v", prices)
	}
	for _, p := range prices.Prices {
		if p.Model != "" {
			t.Errorf("a model's price among the tiers' defaults: %+v", p)
		}
	}

	var list struct {
		Offerings []struct {
			Model      string         `json:"model"`
			Tier       string         `json:"tier"`
			PriceIn    money.MicroUSD `json:"tier_input_usd_per_mtok"`
			PriceOut   money.MicroUSD `json:"tier_output_usd_per_mtok"`
			ModelPrice bool           `json:"model_price"`
			AskIn      money.MicroUSD `json:"ask_input_usd_per_mtok"`
		} `json:"offerings"`
	}
	for model, want := range map[string]string{big: "batch 900000 1800000 true", "meta-llama/Meta-Llama-3-8B-Instruct": "realtime 300000 600000 false"} {
		list.Offerings = nil
		wantStatus(t, e.call(t, "", http.MethodGet, "/api/offerings?model="+url.QueryEscape(model)+"&tier="+strings.Fields(want)[0], nil, &list), http.StatusOK)
		if len(list.Offerings) == 0 {
			t.Fatalf("no %s offering listed", model)
		}
		for _, o := range list.Offerings {
			got := strings.Join([]string{o.Tier, itoa(int64(o.PriceIn)), itoa(int64(o.PriceOut)), boolText(o.ModelPrice)}, " ")
			if got != want || o.AskIn > o.PriceIn {
				t.Errorf("%s listed as %q asking %d, want %q", model, got, o.AskIn, want)
			}
		}
	}

	doc := getPage(t, http.DefaultClient, e.srv.URL+"/catalog?tier=batch")
	if text := doc.Find(`[data-testid="model-prices-batch"]`).Text(); !strings.Contains(text, big) || !strings.Contains(text, "$0.90 per million input") {
		t.Errorf("the batch section's model prices read %q", text)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func boolText(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
