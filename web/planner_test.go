package web_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/planner"
)

// The planner over the demo catalog: the realtime share at the realtime price and the rest at
// the cheapest tier that meets the target, exactly, and the benchmark's sweet spots beside it.
func TestAPIPlanner(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var prices struct {
		Prices []catalog.Price `json:"prices"`
	}
	wantStatus(t, e.call(t, "", http.MethodGet, "/api/prices", nil, &prices), http.StatusOK)
	price := map[catalog.Tier]catalog.Price{}
	for _, p := range prices.Prices {
		price[p.Tier] = p
	}
	if len(price) != 3 {
		t.Fatalf("prices %+v", prices)
	}
	day := func(tokens int64, p catalog.Price) money.Pico {
		return money.Pico(tokens/2*int64(p.Input) + (tokens-tokens/2)*int64(p.Output))
	}

	var a struct {
		Plan       planner.Plan        `json:"plan"`
		SweetSpots []planner.SweetSpot `json:"sweet_spots"`
	}
	wantStatus(t, e.call(t, "", http.MethodGet, "/api/planner?tokens_per_day=100000001&realtime_percent=20&target_p99_ms=500&budget_usd_per_day=1", nil, &a), http.StatusOK)
	if len(a.Plan.Parts) != 2 || a.Plan.Parts[0].Tier != catalog.TierRealtime || a.Plan.Parts[1].Tier != catalog.TierStandard {
		t.Fatalf("parts %+v", a.Plan.Parts)
	}
	// 20% of 100,000,001 is 20,000,000 (rounded down); the rest 80,000,001.
	want := day(20_000_000, price[catalog.TierRealtime]) + day(80_000_001, price[catalog.TierStandard])
	if a.Plan.Total.Cost != want || a.Plan.Parts[1].Tokens != 80_000_001 {
		t.Errorf("cost %s, want %s", a.Plan.Total.Cost, want)
	}
	if all := day(100_000_001, price[catalog.TierRealtime]); a.Plan.AllRealtime.Cost != all || a.Plan.Savings != all-want {
		t.Errorf("all realtime %s, savings %s; want %s and %s", a.Plan.AllRealtime.Cost, a.Plan.Savings, all, all-want)
	}
	if a.Plan.WithinBudget == nil || *a.Plan.WithinBudget || a.Plan.OverBudget != want-money.PicoPerUSD {
		t.Errorf("budget: within %v over by %s", a.Plan.WithinBudget, a.Plan.OverBudget)
	}
	if !a.Plan.Total.EnergyKnown || !(a.Plan.Total.GCO2e > 0) || !(a.Plan.SavedGCO2e != 0) {
		t.Errorf("carbon: %+v saved %v", a.Plan.Total, a.Plan.SavedGCO2e)
	}
	// The standard part is on rigs whose P99 meets 500 ms.
	for _, pl := range a.Plan.Parts[1].Placements {
		var o struct {
			TTFTP99Ms *float64 `json:"ttft_p99_ms"`
		}
		wantStatus(t, e.call(t, "", http.MethodGet, "/api/offerings/"+pl.OfferingID, nil, &o), http.StatusOK)
		if o.TTFTP99Ms == nil || *o.TTFTP99Ms > 500 {
			t.Errorf("placement %s has P99 %v", pl.OfferingID, o.TTFTP99Ms)
		}
	}
	if len(a.SweetSpots) != 4 {
		t.Fatalf("sweet spots %+v", a.SweetSpots)
	}
	for _, s := range a.SweetSpots {
		at, ok := s.At()
		if s.Name() == "4x rtx-4090" && (!ok || at.RequestsPerSecond != 8) || s.Name() == "2x rtx-4090" && ok {
			t.Errorf("%s within 500 ms: %+v %v", s.Name(), at, ok)
		}
	}

	t.Run("bad input names its fields", func(t *testing.T) {
		var out apiErrorJSON
		wantStatus(t, e.call(t, "", http.MethodGet, "/api/planner?tokens_per_day=-3&realtime_percent=101&bench_model=gpt", nil, &out), http.StatusUnprocessableEntity)
		wantFields(t, out, "bench_model", "realtime_percent", "tokens_per_day")
	})
}

// The page works as a plain GET form: an example plan to start, the answer to a query, and
// each bad field said beside it.
func TestPlannerPage(t *testing.T) {
	t.Parallel()
	e := setup(t)
	doc := getPage(t, http.DefaultClient, e.srv.URL+"/planner")
	if doc.Find(testID("plan-part-realtime")).Length() != 1 || doc.Find(testID("savings")).Length() != 1 {
		t.Error("the example plan is missing")
	}
	if got := strings.TrimSpace(doc.Find(testID("sweet-spot-2x rtx-4090") + " " + testID("spot-rate")).Text()); got != "none" {
		t.Errorf("2x RTX 4090 within 500 ms: %q, want none", got)
	}
	doc = getPage(t, http.DefaultClient, e.srv.URL+"/planner?tokens_per_day=1000000&realtime_percent=0&target_p99_ms=")
	if got := strings.TrimSpace(doc.Find(testID("sweet-spot-2x rtx-4090") + " " + testID("spot-cost")).Text()); got != "$0.111059" {
		t.Errorf("2x RTX 4090 without a target: %q, want $0.111059", got)
	}
	if got := strings.TrimSpace(doc.Find(testID("sweet-spot-1x h100-pcie") + " " + testID("spot-cost")).Text()); got != "$0.185408" {
		t.Errorf("1x H100 without a target: %q, want $0.185408", got)
	}
	if doc.Find(testID("plan-part-batch")).Length() != 1 {
		t.Error("without a target the tokens should go to batch")
	}

	res, err := http.Get(e.srv.URL + "/planner?tokens_per_day=many&realtime_percent=5&budget_usd_per_day=-1")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("status %d, want 422", res.StatusCode)
	}
	doc, _ = goquery.NewDocumentFromReader(strings.NewReader(string(body)))
	for _, f := range []string{"tokens_per_day", "budget_usd_per_day"} {
		if doc.Find(testID("error-"+f)).Length() != 1 {
			t.Errorf("no error beside %s", f)
		}
	}
	if v, _ := doc.Find("input#realtime_percent").Attr("value"); v != "5" {
		t.Errorf("the form lost its values: realtime_percent %q", v)
	}
}
