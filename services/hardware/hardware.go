// Package hardware is the reference data rigs are described with: the GPU models a provider
// can list, with their board power, and the regions a rig can run in, with their grids'
// carbon intensity. It imports nothing, so that the provider's agent can use it without the
// platform's storage code.
package hardware

// GPU is a GPU model a provider can list, with the board power that energy estimates use.
type GPU struct {
	SKU         string `json:"sku"`
	Name        string `json:"name"`
	Class       string `json:"class"` // consumer or enterprise
	VRAMGB      int    `json:"vram_gb"`
	BoardPowerW int    `json:"board_power_w"`
	Source      string `json:"source"`
}

// GPUs lists the models that can be listed, from vendor specifications.
var GPUs = []GPU{
	{"rtx-3090", "NVIDIA GeForce RTX 3090", "consumer", 24, 350, "vendor spec total graphics power"},
	{"rtx-4080", "NVIDIA GeForce RTX 4080", "consumer", 16, 320, "vendor spec total graphics power"},
	{"rtx-4090", "NVIDIA GeForce RTX 4090", "consumer", 24, 450, "vendor spec total graphics power"},
	{"rtx-5090", "NVIDIA GeForce RTX 5090", "consumer", 32, 575, "vendor spec total graphics power"},
	{"l40s", "NVIDIA L40S", "enterprise", 48, 350, "vendor spec max board power"},
	{"a100-pcie-80gb", "NVIDIA A100 80GB PCIe", "enterprise", 80, 300, "vendor spec max TDP"},
	{"a100-sxm-80gb", "NVIDIA A100 80GB SXM", "enterprise", 80, 400, "vendor spec max TDP"},
	{"h100-pcie", "NVIDIA H100 PCIe 80GB", "enterprise", 80, 350, "NVIDIA product brief PB-11133: 350 W max TDP"},
	{"h100-sxm", "NVIDIA H100 SXM5 80GB", "enterprise", 80, 700, "vendor spec up to 700 W"},
	{"h200-sxm", "NVIDIA H200 SXM 141GB", "enterprise", 141, 700, "vendor spec up to 700 W"},
}

// GPUBySKU finds a GPU model.
func GPUBySKU(sku string) (GPU, bool) {
	for _, g := range GPUs {
		if g.SKU == sku {
			return g, true
		}
	}
	return GPU{}, false
}

// Region is where a rig runs, with the yearly average carbon intensity of its grid.
type Region struct {
	Code        string `json:"code"`
	Name        string `json:"name"`
	GCO2ePerKWh int    `json:"g_co2e_per_kwh"`
	Year        int    `json:"year"`
	Source      string `json:"source"`
}

// Regions lists the regions a rig can be listed in (location-based grid intensity).
var Regions = []Region{
	{"no", "Norway", 30, 2023, "Ember yearly average"},
	{"fr", "France", 56, 2023, "Ember / Energy Institute via Our World in Data"},
	{"eu", "European Union (EU-27)", 242, 2023, "Ember European Electricity Review 2024"},
	{"us", "United States", 367, 2023, "US EIA utility-scale generation 0.81 lb CO2/kWh"},
	{"de", "Germany", 381, 2023, "Ember via Our World in Data"},
	{"world", "World average", 481, 2023, "Ember Global Electricity Review"},
	{"pl", "Poland", 662, 2023, "Ember EU power sector"},
	{"in", "India", 713, 2023, "Ember"},
}

// RegionByCode finds a region.
func RegionByCode(code string) (Region, bool) {
	for _, r := range Regions {
		if r.Code == code {
			return r, true
		}
	}
	return Region{}, false
}

// RegionName is how pages and documents write a region: its name ("Norway"), or the code as it
// was given when no listed region has it.
func RegionName(code string) string {
	if r, ok := RegionByCode(code); ok {
		return r.Name
	}
	return code
}
