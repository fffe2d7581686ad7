package catalog

import "github.com/gpumarket/gpumarket/services/carbon"

// Emissions is an offering's estimated energy and carbon per token, with the PUE of its site:
// what the planner projects and carbon-aware routing ranks by (docs/planner-and-carbon-routing.md).
// Unlike Footprint, it counts the site's PUE.
type Emissions struct {
	JoulesPerToken float64 `json:"joules_per_token"`
	PUE            float64 `json:"pue"`
	PUEStated      bool    `json:"pue_stated"` // the provider's figure, else the site's default
	GCO2ePerKWh    int     `json:"g_co2e_per_kwh"`
	// GCO2ePerToken is JoulesPerToken x the region's grid intensity x PUE.
	GCO2ePerToken float64 `json:"g_co2e_per_token"`
}

// KWhPerMTok is the facility's energy of a million tokens (the IT energy times PUE).
func (e Emissions) KWhPerMTok() float64 {
	return carbon.KWh(carbon.PerMillionTokens(e.JoulesPerToken)) * e.PUE
}

// GCO2ePerMTok is the carbon of a million tokens.
func (e Emissions) GCO2ePerMTok() float64 { return carbon.PerMillionTokens(e.GCO2ePerToken) }

// EstimateEmissions is the estimate for count GPUs of a model serving tokensPerSecond in a
// region at a site: full board power over throughput (carbon.EstimatedJoulesPerToken), the
// region's yearly grid intensity and the site's PUE (carbon.PUE). It is false when the GPU or
// region is unknown or the throughput is not positive.
func EstimateEmissions(gpu string, count int, tokensPerSecond float64, region string, site carbon.Site, statedPUE *float64) (Emissions, bool) {
	g, okG := GPUBySKU(gpu)
	r, okR := RegionByCode(region)
	if !okG || !okR || !(tokensPerSecond > 0) {
		return Emissions{}, false
	}
	e := Emissions{JoulesPerToken: carbon.EstimatedJoulesPerToken(g.BoardPowerW, count, tokensPerSecond), GCO2ePerKWh: r.GCO2ePerKWh}
	e.PUE, e.PUEStated = carbon.PUE(site, statedPUE)
	e.GCO2ePerToken = carbon.GCO2e(e.JoulesPerToken, float64(r.GCO2ePerKWh), e.PUE)
	return e, true
}

// Emissions estimates the offering's energy and carbon per token from the throughput the
// catalog shows (measured, else claimed; Offering.TokensPerSec).
func (o Offering) Emissions() (Emissions, bool) {
	tps := o.TokensPerSec()
	if tps == nil {
		return Emissions{}, false
	}
	return EstimateEmissions(o.GPU, o.GPUCount, *tps, o.Region, o.Site, o.StatedPUE)
}
