package catalog

import (
	"fmt"
	"math"
	"testing"
)

// The paper's Table 2: every DeepSeek-R1-Distill-Qwen-14B configuration and load of the
// benchmark, with its measured total tokens per second and the cost per million tokens in the
// raw results (four decimals) and in the paper (three; run 0 where a load was repeated).
var table2 = []struct {
	gpu           string
	count         int
	qps           float64
	usdPerGPUHour float64
	totalTPS      float64
	usdPerMTok    float64 // the raw results' figure, four decimals
	paper         string  // Table 2's figure, three decimals
}{
	{"rtx-4090", 2, 1, 0.25, 430.51, 0.3226, "0.323"},
	{"rtx-4090", 2, 4, 0.25, 1250.59, 0.1111, "0.111"},
	{"rtx-4090", 2, 8, 0.25, 1500.34, 0.0926, "0.093"},
	{"rtx-4090", 2, 16, 0.25, 1619.37, 0.0858, "0.086"},
	{"rtx-4090", 2, 32, 0.25, 1543.35, 0.0900, "0.090"},
	{"rtx-4090", 4, 1, 0.25, 431.19, 0.6442, "0.644"},
	{"rtx-4090", 4, 4, 0.25, 1344.58, 0.2066, "0.207"},
	{"rtx-4090", 4, 8, 0.25, 1858.57, 0.1495, "0.149"},
	{"rtx-4090", 4, 16, 0.25, 1994.82, 0.1392, "0.139"},
	{"rtx-4090", 4, 32, 0.25, 1593.73, 0.1743, "0.174"},
	{"rtx-4090", 8, 1, 0.25, 434.92, 1.2774, "1.277"},
	{"rtx-4090", 8, 4, 0.25, 1393.08, 0.3988, "0.399"},
	{"rtx-4090", 8, 8, 0.25, 1849.74, 0.3003, "0.300"},
	{"rtx-4090", 8, 16, 0.25, 2026.68, 0.2741, "0.274"},
	{"rtx-4090", 8, 32, 0.25, 1529.53, 0.3632, "0.363"},
	{"h100-pcie", 1, 1, 2.00, 433.76, 1.2808, "1.281"},
	{"h100-pcie", 1, 4, 2.00, 1411.84, 0.3935, "0.393"},
	{"h100-pcie", 1, 8, 2.00, 2240.95, 0.2479, "0.248"},
	{"h100-pcie", 1, 16, 2.00, 3011.13, 0.1845, "0.185"},
	{"h100-pcie", 1, 32, 2.00, 3108.12, 0.1787, "0.179"},
}

func TestUSDPerMillionTokensReproducesTable2(t *testing.T) {
	if len(table2) != 20 {
		t.Fatalf("table 2 has 20 rows, the test holds %d", len(table2))
	}
	for _, r := range table2 {
		t.Run(fmt.Sprintf("%dx %s at %g qps", r.count, r.gpu, r.qps), func(t *testing.T) {
			got := USDPerMillionTokens(r.usdPerGPUHour, r.count, r.totalTPS)
			if math.Abs(got-r.usdPerMTok) > 0.00005 {
				t.Errorf("USDPerMillionTokens = %.6f, the paper gives %.4f", got, r.usdPerMTok)
			}
			if g := fmt.Sprintf("%.3f", got); g != r.paper {
				t.Errorf("to three decimals: %s, the paper gives %s", g, r.paper)
			}
		})
	}
}

func TestUSDPerMillionTokensOtherModels(t *testing.T) {
	// Rows of other models of the benchmark: the same formula holds.
	cases := []struct {
		model         string
		count         int
		usdPerGPUHour float64
		totalTPS      float64
		want          float64
	}{
		{"Qwen/QwQ-32B-Preview 1x H100", 1, 2.0, 396.31, 1.4018},
		{"Meta-Llama-3-70B-Instruct 2x H100", 2, 2.0, 930.13, 1.1946},
		{"DeepSeek-R1-Distill-Llama-8B 1x RTX 4090", 1, 0.25, 2193.92, 0.0317},
		{"DeepSeek-R1-Distill-Qwen-7B 2x RTX 4090", 2, 0.25, 2547.06, 0.0545},
	}
	for _, c := range cases {
		if got := USDPerMillionTokens(c.usdPerGPUHour, c.count, c.totalTPS); math.Abs(got-c.want) > 0.00005 {
			t.Errorf("%s: %.6f, want %.4f", c.model, got, c.want)
		}
	}
}

func TestEstimateFootprintMatchesThePaper(t *testing.T) {
	// The paper: 2x RTX 4090 (450 W each) at 4 requests/s, EU grid 242 g/kWh: 48.4 g per million tokens.
	gpu, _ := GPUBySKU("rtx-4090")
	eu, _ := RegionByCode("eu")
	f := EstimateFootprint(gpu, 2, 1250.59, eu)
	if math.Abs(f.GCO2ePerMTok-48.4) > 0.05 {
		t.Errorf("gCO2e per million = %.2f, the paper gives 48.4", f.GCO2ePerMTok)
	}
	if want := 900.0 / 1250.59 * 1e6 / 3.6e6; math.Abs(f.KWhPerMTok-want) > 1e-12 {
		t.Errorf("kWh per million = %v, want %v", f.KWhPerMTok, want)
	}
}

func TestTierForP99(t *testing.T) {
	cases := []struct {
		p99  float64
		want Tier
	}{
		{10, TierRealtime}, {54.41, TierRealtime}, {55, TierRealtime}, {55.01, TierStandard},
		{337.07, TierStandard}, {500, TierStandard}, {500.01, TierBatch}, {9361.48, TierBatch},
	}
	for _, c := range cases {
		if got := TierForP99(c.p99); got != c.want {
			t.Errorf("TierForP99(%v) = %s, want %s", c.p99, got, c.want)
		}
	}
}
