// Package carbon is the method behind every energy and carbon figure the platform shows:
// the constants with their sources, the formulas, and the version of the method that every
// report row carries. docs/methodology.md states it in words; the /methodology page renders
// it from these values, so the page and the figures cannot disagree.
//
// Energy and carbon are physical estimates, not money: float64 is right here.
package carbon

import "github.com/gpumarket/gpumarket/services/hardware"

// MethodVersion names this method. It changes whenever a constant or a formula here
// changes, so that a figure can always be traced to the method that produced it.
const MethodVersion = "gpumarket-carbon-2026.12.2"

// JoulesPerKWh converts joules to kilowatt-hours.
const JoulesPerKWh = 3.6e6

// Site is where a rig runs: it decides the default PUE.
type Site string

const (
	SiteHome       Site = "home"
	SiteDatacentre Site = "datacentre"
)

// Valid says whether s is a site a rig can be listed at.
func (s Site) Valid() bool { return s == SiteHome || s == SiteDatacentre }

// Default PUE (power usage effectiveness: the facility's energy over the IT equipment's) of
// a site when the provider states none. A home rig has no cooling plant of its own beyond
// the room; a data centre's 1.3 is a round figure below the industry's surveyed average of
// about 1.56 (Uptime Institute Global Data Center Survey 2024), as operators who rent GPUs
// run newer facilities than the average.
const (
	DefaultPUEHome       = 1.0
	DefaultPUEDatacentre = 1.3
	PUESource            = "gpumarket default by site; Uptime Institute Global Data Center Survey 2024 puts the average at 1.56"
)

// MinPUE and MaxPUE bound what a provider may state.
const (
	MinPUE = 1.0
	MaxPUE = 3.0
)

// DefaultPUE is the site's PUE when the provider states none.
func DefaultPUE(s Site) float64 {
	if s == SiteDatacentre {
		return DefaultPUEDatacentre
	}
	return DefaultPUEHome
}

// PUE is the PUE a rig's figures use: the one its provider stated, or its site's default.
// stated says which.
func PUE(s Site, providerStated *float64) (pue float64, stated bool) {
	if providerStated != nil {
		return *providerStated, true
	}
	return DefaultPUE(s), false
}

// KWh is joules in kilowatt-hours.
func KWh(joules float64) float64 { return joules / JoulesPerKWh }

// GCO2e is the location-based emissions of energy drawn from a grid: energy x the grid's
// average intensity x the site's PUE (the operational term E x I of the Green Software
// Foundation's SCI). No market-based instrument is netted off.
func GCO2e(joules, gramsPerKWh, pue float64) float64 {
	return KWh(joules) * gramsPerKWh * pue
}

// EstimatedJoulesPerToken is the estimate used where a rig does not measure its energy:
// the full board power of its GPUs over the tokens (input and output) it serves per second.
// At full board power it is an upper bound for a rig that is not saturated.
func EstimatedJoulesPerToken(boardPowerW, gpuCount int, tokensPerSecond float64) float64 {
	if tokensPerSecond <= 0 {
		return 0
	}
	return float64(boardPowerW*gpuCount) / tokensPerSecond
}

// PerMillionTokens scales a per-token figure to a million tokens.
func PerMillionTokens(perToken float64) float64 { return perToken * 1e6 }

// Intensity is a region's grid intensity in gCO2e per kWh, with its year and source.
func Intensity(region string) (hardware.Region, bool) { return hardware.RegionByCode(region) }
