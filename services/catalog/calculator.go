package catalog

// The benchmark's cost formula and the energy estimate. These are estimates shown to people
// comparing hardware, not money that moves: float64 is right here, and nothing here is billed.

// USDPerMillionTokens is the paper's formula: the hourly price of the configuration over the
// tokens (input and output) it serves in an hour, per million.
func USDPerMillionTokens(usdPerGPUHour float64, gpuCount int, tokensPerSecond float64) float64 {
	return usdPerGPUHour * float64(gpuCount) * 1e6 / (3600 * tokensPerSecond)
}

// Footprint is the estimated energy and carbon of a million tokens.
type Footprint struct {
	KWhPerMTok   float64 `json:"kwh_per_million_tokens"`
	GCO2ePerMTok float64 `json:"g_co2e_per_million_tokens"`
	Basis        string  `json:"basis"`
}

// EstimateFootprint takes full board power times GPU count over tokens per second (the
// paper's method) and the region's grid intensity.
func EstimateFootprint(gpu GPU, gpuCount int, tokensPerSecond float64, region Region) Footprint {
	joulesPerToken := float64(gpu.BoardPowerW*gpuCount) / tokensPerSecond
	kwh := joulesPerToken * 1e6 / 3.6e6
	return Footprint{
		KWhPerMTok:   kwh,
		GCO2ePerMTok: kwh * float64(region.GCO2ePerKWh),
		Basis:        "estimate: board power x GPU count / tokens per second, region's yearly grid intensity",
	}
}
