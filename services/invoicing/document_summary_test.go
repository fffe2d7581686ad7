package invoicing

import (
	"testing"

	"github.com/gpumarket/gpumarket/services/reports"
)

// An invoice's energy says how much of it was measured and how much came from a simulated
// sensor; a simulated figure is never shown as measured.
func TestSummaryEnergySaysWhatWasSimulated(t *testing.T) {
	sum := []reports.TierSummary{
		{Tier: "realtime", EnergyKWh: 0.25, SimulatedKWh: 0.25, GCO2e: 7.5, BaselineGCO2e: 7.5},
		{Tier: "standard", EnergyKWh: 1.5, MeasuredKWh: 0.5, GCO2e: 45, BaselineGCO2e: 11.7},
	}
	figures, _ := invoiceSummaryFigures(sum)
	want := map[string]string{
		"Energy":                       "1.750 kWh (0.500 kWh measured, 0.250 kWh simulated)",
		"Emissions, location-based":    "52.5 gCO2e",
		"The same tokens on H100 PCIe": "19.2 gCO2e",
	}
	for _, f := range figures {
		if w, ok := want[f.Label]; ok && f.Value != w {
			t.Errorf("%s = %q, want %q", f.Label, f.Value, w)
		}
		delete(want, f.Label)
	}
	if len(want) != 0 {
		t.Errorf("figures missing: %v", want)
	}
	figures, _ = invoiceSummaryFigures(sum[1:])
	for _, f := range figures {
		if f.Label == "Energy" && f.Value != "1.500 kWh (0.500 kWh measured)" {
			t.Errorf("without simulated energy: %q", f.Value)
		}
	}
}
