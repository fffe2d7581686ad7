package catalog

import (
	"math"
	"testing"

	"github.com/gpumarket/gpumarket/services/carbon"
)

func TestEstimateEmissions(t *testing.T) {
	t.Parallel()
	pue := 1.1
	cases := []struct {
		name       string
		gpu        string
		count      int
		tps        float64
		region     string
		site       carbon.Site
		stated     *float64
		ok         bool
		gPerMTok   float64
		kWhPerMTok float64
	}{
		// The paper's 2x RTX 4090 at 4 requests/s on the EU grid: 48.4 g per million tokens at home (PUE 1.0).
		{"home, default PUE", "rtx-4090", 2, 1250.59, "eu", carbon.SiteHome, nil, true, 900 / 1250.59 / 3.6 * 242, 900 / 1250.59 / 3.6},
		{"data centre, default PUE 1.3", "h100-pcie", 1, 3011.13, "no", carbon.SiteDatacentre, nil, true,
			350 / 3011.13 / 3.6 * 30 * 1.3, 350 / 3011.13 / 3.6 * 1.3},
		{"a stated PUE", "h100-pcie", 1, 3011.13, "pl", carbon.SiteDatacentre, &pue, true, 350 / 3011.13 / 3.6 * 662 * 1.1, 350 / 3011.13 / 3.6 * 1.1},
		{"unknown GPU", "gtx-480", 1, 100, "eu", carbon.SiteHome, nil, false, 0, 0},
		{"unknown region", "rtx-4090", 1, 100, "mars", carbon.SiteHome, nil, false, 0, 0},
		{"no throughput", "rtx-4090", 1, 0, "eu", carbon.SiteHome, nil, false, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, ok := EstimateEmissions(c.gpu, c.count, c.tps, c.region, c.site, c.stated)
			if ok != c.ok {
				t.Fatalf("ok = %v, want %v", ok, c.ok)
			}
			if !ok {
				return
			}
			if math.Abs(e.GCO2ePerMTok()-c.gPerMTok) > 1e-9 || math.Abs(e.KWhPerMTok()-c.kWhPerMTok) > 1e-12 {
				t.Errorf("%.6f g and %.6f kWh per million, want %.6f and %.6f", e.GCO2ePerMTok(), e.KWhPerMTok(), c.gPerMTok, c.kWhPerMTok)
			}
			if e.PUEStated != (c.stated != nil) {
				t.Errorf("PUE stated %v", e.PUEStated)
			}
		})
	}
	// The paper's own figure for that first case.
	if e, _ := EstimateEmissions("rtx-4090", 2, 1250.59, "eu", carbon.SiteHome, nil); math.Abs(e.GCO2ePerMTok()-48.4) > 0.05 {
		t.Errorf("the paper's figure: %.2f g, want 48.4", e.GCO2ePerMTok())
	}
}
