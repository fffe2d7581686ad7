package planner

import (
	"errors"
	"math"
	"testing"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/carbon"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
)

func ptr(v float64) *float64 { return &v }

// fleet is a catalog of three rigs at the benchmark's sweet spots: an H100 in a Norwegian data
// centre (realtime), a home 4x RTX 4090 in Poland (standard) and a home 2x RTX 4090 in the EU
// whose P99 only batch takes.
func fleet() []catalog.Offering {
	return []catalog.Offering{
		{ID: "h100-no", GPU: "h100-pcie", GPUCount: 1, Region: "no", Model: BenchmarkModel, Tier: catalog.TierRealtime,
			Site: carbon.SiteDatacentre, AskInput: 200_000, AskOutput: 300_000, ClaimedTTFTP99Ms: ptr(54.41), ClaimedTokensPerSec: ptr(3011.13)},
		{ID: "4090x4-pl", GPU: "rtx-4090", GPUCount: 4, Region: "pl", Model: BenchmarkModel, Tier: catalog.TierStandard,
			Site: carbon.SiteHome, AskInput: 100_000, AskOutput: 200_000, ClaimedTTFTP99Ms: ptr(337.07), ClaimedTokensPerSec: ptr(1994.82)},
		{ID: "4090x2-eu", GPU: "rtx-4090", GPUCount: 2, Region: "eu", Model: BenchmarkModel, Tier: catalog.TierBatch,
			Site: carbon.SiteHome, AskInput: 50_000, AskOutput: 100_000, ClaimedTTFTP99Ms: ptr(802.63), ClaimedTokensPerSec: ptr(1500.34)},
	}
}

var prices = map[catalog.Tier]catalog.Price{
	catalog.TierRealtime: {ID: 1, Tier: catalog.TierRealtime, Input: 300_000, Output: 600_000},
	catalog.TierStandard: {ID: 2, Tier: catalog.TierStandard, Input: 150_000, Output: 300_000},
	catalog.TierBatch:    {ID: 3, Tier: catalog.TierBatch, Input: 80_000, Output: 160_000},
}

// gramsPerToken is the estimate written out: board power x count / tokens per second, in kWh,
// x grid intensity x PUE.
func gramsPerToken(watts, tps, gPerKWh, pue float64) float64 {
	return watts / tps / 3.6e6 * gPerKWh * pue
}

func TestPlanFleet(t *testing.T) {
	t.Parallel()
	h100 := gramsPerToken(350, 3011.13, 30, 1.3)
	x4 := gramsPerToken(4*450, 1994.82, 662, 1.0)
	x2 := gramsPerToken(2*450, 1500.34, 242, 1.0)
	cases := []struct {
		name    string
		w       Workload
		tiers   []catalog.Tier
		cost    money.Pico
		savings money.Pico
		grams   float64
		within  *bool
		over    money.Pico
	}{
		{"a fifth realtime, the rest within 500 ms: standard",
			Workload{TokensPerDay: 100_000_000, RealtimePercent: 20, TargetP99Ms: 500},
			[]catalog.Tier{catalog.TierRealtime, catalog.TierStandard},
			// 10M x $0.30 + 10M x $0.60 per Mtok = $9; 40M x $0.15 + 40M x $0.30 = $18.
			27 * money.PicoPerUSD, 18 * money.PicoPerUSD, 20e6*h100 + 80e6*x4, nil, 0},
		{"no target: batch",
			Workload{TokensPerDay: 100_000_000, RealtimePercent: 20},
			[]catalog.Tier{catalog.TierRealtime, catalog.TierBatch},
			// $9 + 40M x $0.08 + 40M x $0.16 = $9 + $9.60.
			18_600_000_000_000, 26_400_000_000_000, 20e6*h100 + 80e6*x2, nil, 0},
		{"a realtime target leaves nothing to save",
			Workload{TokensPerDay: 100_000_000, RealtimePercent: 20, TargetP99Ms: 55},
			[]catalog.Tier{catalog.TierRealtime, catalog.TierRealtime},
			45 * money.PicoPerUSD, 0, 100e6 * h100, nil, 0},
		{"over budget by $7",
			Workload{TokensPerDay: 100_000_000, RealtimePercent: 20, TargetP99Ms: 500, Budget: 20 * money.PicoPerUSD},
			[]catalog.Tier{catalog.TierRealtime, catalog.TierStandard},
			27 * money.PicoPerUSD, 18 * money.PicoPerUSD, 20e6*h100 + 80e6*x4, new(bool), 7 * money.PicoPerUSD},
		{"an odd token count: the odd token is output",
			Workload{TokensPerDay: 3, TargetP99Ms: 500, Budget: money.PicoPerUSD},
			[]catalog.Tier{catalog.TierStandard},
			// 1 x 150,000 + 2 x 300,000 picodollars; all realtime 300,000 + 1,200,000.
			750_000, 750_000, 3 * x4, ptrBool(true), 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan, err := PlanFleet(c.w, fleet(), prices)
			if err != nil {
				t.Fatal(err)
			}
			var tiers []catalog.Tier
			for _, p := range plan.Parts {
				tiers = append(tiers, p.Tier)
			}
			if len(tiers) != len(c.tiers) || (len(tiers) > 0 && tiers[len(tiers)-1] != c.tiers[len(c.tiers)-1]) || tiers[0] != c.tiers[0] {
				t.Errorf("tiers %v, want %v", tiers, c.tiers)
			}
			if !plan.Total.CostKnown || plan.Total.Cost != c.cost || plan.Savings != c.savings {
				t.Errorf("cost %s, savings %s; want %s and %s", plan.Total.Cost, plan.Savings, c.cost, c.savings)
			}
			if math.Abs(plan.Total.GCO2e-c.grams) > 1e-6*c.grams || !plan.Total.EnergyKnown {
				t.Errorf("carbon %.6f g a day, want %.6f", plan.Total.GCO2e, c.grams)
			}
			if wantAll := float64(c.w.TokensPerDay) * h100; math.Abs(plan.AllRealtime.GCO2e-wantAll) > 1e-6*wantAll {
				t.Errorf("all realtime %.6f g, want %.6f", plan.AllRealtime.GCO2e, wantAll)
			}
			if (plan.WithinBudget == nil) != (c.within == nil && c.w.Budget == 0) ||
				(c.within != nil && *plan.WithinBudget != *c.within) || plan.OverBudget != c.over {
				t.Errorf("within budget %v over by %s, want %v over by %s", plan.WithinBudget, plan.OverBudget, c.within, c.over)
			}
		})
	}
}

func ptrBool(b bool) *bool { return &b }

func TestPlanFleetEnergyAndPlacements(t *testing.T) {
	t.Parallel()
	plan, err := PlanFleet(Workload{TokensPerDay: 100_000_000, RealtimePercent: 20, TargetP99Ms: 500}, fleet(), prices)
	if err != nil {
		t.Fatal(err)
	}
	rt := plan.Parts[0]
	if len(rt.Placements) != 1 || rt.Placements[0].OfferingID != "h100-no" || rt.Placements[0].Tokens != 20_000_000 {
		t.Fatalf("realtime placements %+v", rt.Placements)
	}
	// kWh: the H100's 350 W over 3011.13 tokens/s, x PUE 1.3 for a data centre.
	if want := 20e6 * 350 / 3011.13 / 3.6e6 * 1.3; math.Abs(rt.KWh-want) > 1e-9 {
		t.Errorf("realtime kWh %.9f, want %.9f", rt.KWh, want)
	}
	if c := int64(3011.13 * 86400); rt.Capacity != c {
		t.Errorf("capacity %d, want %d", rt.Capacity, c)
	}
}

func TestPlanFleetBeyondCapacityAndUnserved(t *testing.T) {
	t.Parallel()
	plan, err := PlanFleet(Workload{TokensPerDay: MaxTokensPerDay, TargetP99Ms: 500}, fleet(), prices)
	if err != nil {
		t.Fatal(err)
	}
	p := plan.Parts[0]
	capacity := int64(1994.82 * 86400)
	if p.Tier != catalog.TierStandard || p.Capacity != capacity || p.Uncovered != MaxTokensPerDay-capacity || p.Note == "" {
		t.Errorf("part %+v", p)
	}
	if want := 1e12 * gramsPerToken(1800, 1994.82, 662, 1); math.Abs(p.GCO2e-want) > 1e-6*want {
		t.Errorf("carbon %.3f, want %.3f", p.GCO2e, want)
	}
	// A target no rig meets: the part has no tier and the plan no cost.
	plan, err = PlanFleet(Workload{TokensPerDay: 1000, TargetP99Ms: 10}, fleet(), prices)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Parts[0].Tier != "" || plan.Total.CostKnown || plan.Savings != 0 || plan.Parts[0].Note == "" {
		t.Errorf("unservable plan %+v", plan)
	}
	// Another model: nothing of the catalog serves it.
	plan, _ = PlanFleet(Workload{TokensPerDay: 1000, Model: "microsoft/phi-4"}, fleet(), prices)
	if plan.OfferingsSeen != 0 || plan.Total.CostKnown {
		t.Errorf("phi-4 plan %+v", plan)
	}
}

func TestParseWorkload(t *testing.T) {
	t.Parallel()
	form := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	w, err := ParseWorkload(form(FieldTokensPerDay, "50,000,000", FieldRealtimePercent, "25%", FieldTargetP99Ms, "500", FieldBudget, "$12.50"))
	if err != nil || w.TokensPerDay != 50_000_000 || w.RealtimePercent != 25 || w.TargetP99Ms != 500 || w.Budget != 12_500_000_000_000 {
		t.Fatalf("ParseWorkload = %+v, %v", w, err)
	}
	cases := []struct {
		name  string
		get   func(string) string
		field []string
	}{
		{"nothing", form(), []string{FieldTokensPerDay}},
		{"zero tokens", form(FieldTokensPerDay, "0"), []string{FieldTokensPerDay}},
		{"too many tokens", form(FieldTokensPerDay, "1000000000001"), []string{FieldTokensPerDay}},
		{"every field bad", form(FieldTokensPerDay, "lots", FieldRealtimePercent, "120", FieldTargetP99Ms, "-1", FieldBudget, "-5"),
			[]string{FieldTokensPerDay, FieldRealtimePercent, FieldTargetP99Ms, FieldBudget}},
		{"a fraction of a percent", form(FieldTokensPerDay, "10", FieldRealtimePercent, "2.5"), []string{FieldRealtimePercent}},
		{"a budget past a picodollar", form(FieldTokensPerDay, "10", FieldBudget, "0.0000000000001"), []string{FieldBudget}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseWorkload(c.get)
			var se *services.Error
			if !errors.As(err, &se) || len(se.Fields) != len(c.field) {
				t.Fatalf("err = %v, want field errors on %v", err, c.field)
			}
			for _, f := range c.field {
				if se.Fields[f] == "" {
					t.Errorf("no error on %s: %v", f, se.Fields)
				}
			}
		})
	}
}
