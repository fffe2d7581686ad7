package simulation_test

// An external test: the demo's catalog reaches this package through catalog and carbon, so
// a test inside it could not import the demo.

import (
	"testing"

	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/simulation"
)

func TestLookupFindsEveryDemoConfiguration(t *testing.T) {
	t.Parallel()
	rows, err := demo.Rows()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal("no demo rows")
	}
	for _, r := range rows {
		p, ok := simulation.Lookup(r.Model, r.GPU, r.GPUCount)
		if !ok {
			t.Errorf("no profile for demo offering %dx %s %s", r.GPUCount, r.GPU, r.Model)
			continue
		}
		// The demo lists the 8 qps run; the profile must carry the same figures.
		found := false
		for _, l := range p.Levels {
			if l.QPS == r.QPS && l.Run == 0 {
				found = l.TTFTP50Ms == r.TTFTP50Ms && l.TTFTP99Ms == r.TTFTP99Ms && l.TotalTPS == r.TotalTPS
			}
		}
		if !found {
			t.Errorf("%s: the %g qps run differs from the demo's figures", p, r.QPS)
		}
	}
	if _, ok := simulation.Lookup("deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", "h100-pcie", 3); ok {
		t.Error("found a configuration that was never measured")
	}
}
