package catalog

import "github.com/gpumarket/gpumarket/services/hardware"

// The reference data offerings are described with lives in services/hardware, which the
// provider's agent imports too; these are its names as the catalog has always given them.

// GPU is a GPU model a provider can list, with the board power that energy estimates use.
type GPU = hardware.GPU

// Region is where a rig runs, with the yearly average carbon intensity of its grid.
type Region = hardware.Region

// GPUs lists the models that can be listed; Regions the regions a rig can be listed in.
var (
	GPUs    = hardware.GPUs
	Regions = hardware.Regions
)

// GPUBySKU finds a GPU model.
func GPUBySKU(sku string) (GPU, bool) { return hardware.GPUBySKU(sku) }

// RegionByCode finds a region.
func RegionByCode(code string) (Region, bool) { return hardware.RegionByCode(code) }

// RegionName is how pages and documents write a region: its name, or the code when no listed
// region has it.
func RegionName(code string) string { return hardware.RegionName(code) }
