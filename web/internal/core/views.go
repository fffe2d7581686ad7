package core

import (
	"fmt"
	"strconv"
	"time"

	"github.com/gpumarket/gpumarket/services/carbon"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/reliability"
	"github.com/gpumarket/gpumarket/templates"
)

// OfferingRow formats an offering for the catalog and portal tables.
func OfferingRow(o catalog.Offering) templates.OfferingRow {
	r := templates.OfferingRow{
		ID: o.ID, Provider: o.ProviderName, Model: o.Model, Region: RegionLabel(o.Region),
		Hardware: fmt.Sprintf("%dx %s", o.GPUCount, o.GPUName),
		Memory:   fmt.Sprintf("%d GB", o.GPUMemoryGB),
		AskInput: o.AskInput.String(), AskOutput: o.AskOutput.String(), Basis: o.FiguresBasis(), Tier: string(o.Tier),
		Status: string(o.Status), TTFTP99: "—", TokensPerSec: "—", EnergyKWh: "—", CarbonG: "—", Reported: "—",
	}
	if p := o.TTFTP99Ms(); p != nil {
		r.TTFTP99 = FormatMs(*p)
	}
	if o.Reported() {
		r.Reported = "P99 " + FormatMs(*o.ReportedTTFTP99Ms)
		if t := o.ReportedTokensPerSec; t != nil {
			r.Reported += ", " + strconv.FormatFloat(*t, 'f', 0, 64) + " tokens/s"
		}
		r.Reported += " over " + money.Counted(o.ReportedRequests, "request", "requests")
	}
	if t := o.TokensPerSec(); t != nil {
		r.TokensPerSec = strconv.FormatFloat(*t, 'f', 0, 64)
	}
	r.SitePUE = SitePUE(o.Site, o.StatedPUE)
	if f, ok := o.Footprint(); ok {
		r.EnergyKWh = strconv.FormatFloat(f.KWhPerMTok, 'f', 3, 64)
		r.CarbonG = strconv.FormatFloat(f.GCO2ePerMTok, 'f', 1, 64)
	}
	return r
}

// OwnOfferingRow is offeringRow for the offering's provider, with what it should know: where its rig stands
// with the platform and why (at now), why the rig is not routed at prices (the prices in force), and whether
// its agent's own figures disagree with the gateway's.
func OwnOfferingRow(o catalog.Offering, prices map[catalog.Tier]catalog.Price, now time.Time) templates.OfferingRow {
	r := WithRigState(OfferingRow(o), o, now)
	if why := o.NotRoutedBecause(prices); why != "" && o.Status == catalog.StatusActive {
		r.NotRouted = why
	}
	r.Divergence = o.ReportDivergence()
	return r
}

// WithRigState adds to the row where the offering's rig stands and why, and what its last probe measured.
func WithRigState(r templates.OfferingRow, o catalog.Offering, now time.Time) templates.OfferingRow {
	r.RigState, r.RigReason = string(o.RigState), o.RigStateReason(now)
	r.APIs, r.APIsBrief = o.APIsServed(), o.APIsServedBrief()
	if o.RigProbeAt != nil && o.RigState != catalog.RigActive {
		r.RigProbe = "Last probe at " + MomentIn(time.UTC, *o.RigProbeAt, "15:04:05")
		if o.RigProbeTTFTMs != nil {
			r.RigProbe += ": first token in " + FormatMs(*o.RigProbeTTFTMs)
			if t := o.RigProbeTokensPerSec; t != nil {
				r.RigProbe += ", " + strconv.FormatFloat(*t, 'f', 0, 64) + " tokens/s"
			}
		}
		r.RigProbe += "."
	}
	return r
}

// FormatMs writes a duration in milliseconds, in seconds from one second.
func FormatMs(ms float64) string {
	if ms >= 1000 {
		return strconv.FormatFloat(ms/1000, 'f', 2, 64) + " s"
	}
	return strconv.FormatFloat(ms, 'f', 1, 64) + " ms"
}

// RegionLabel is a region's name, or its code where the platform knows no such region.
func RegionLabel(code string) string { return catalog.RegionName(code) }

// GPUOptions are the GPUs a listing may name, as a form's choices.
func GPUOptions() []templates.Option {
	out := make([]templates.Option, 0, len(catalog.GPUs))
	for _, g := range catalog.GPUs {
		out = append(out, templates.Option{Value: g.SKU, Label: fmt.Sprintf("%s (%d GB, %d W)", g.Name, g.VRAMGB, g.BoardPowerW)})
	}
	return out
}

// RegionOptions are the regions a listing may name, as a form's choices.
func RegionOptions() []templates.Option {
	out := make([]templates.Option, 0, len(catalog.Regions))
	for _, r := range catalog.Regions {
		out = append(out, templates.Option{Value: r.Code, Label: fmt.Sprintf("%s (%d gCO2e/kWh)", r.Name, r.GCO2ePerKWh)})
	}
	return out
}

// SiteName is a site in the page's words.
func SiteName(s carbon.Site) string {
	if s == carbon.SiteDatacentre {
		return "data centre"
	}
	return "home"
}

// DefaultPUEText is the site's default PUE as the pages show it: "default 1.0 (home)".
func DefaultPUEText(s carbon.Site) string {
	return "default " + strconv.FormatFloat(carbon.DefaultPUE(s), 'f', 1, 64) + " (" + SiteName(s) + ")"
}

// SitePUE is a rig's site and the PUE its figures use: "home, PUE default 1.0 (home)" or
// "data centre, PUE 1.12 (stated)".
func SitePUE(s carbon.Site, stated *float64) string {
	if stated != nil {
		return SiteName(s) + ", PUE " + strconv.FormatFloat(*stated, 'f', -1, 64) + " (stated)"
	}
	return SiteName(s) + ", PUE " + DefaultPUEText(s)
}

// OfferingJSON is an offering as the API shows it, with the figures the catalog shows.
type OfferingJSON struct {
	catalog.Offering
	TTFTP99Ms    *float64           `json:"ttft_p99_ms"`
	TokensPerSec *float64           `json:"tokens_per_second"`
	FiguresBasis string             `json:"figures_basis"`
	Footprint    *catalog.Footprint `json:"footprint_estimate,omitempty"`
	// TierPriceIn and TierPriceOut are what the offering's customers pay: the price in force for its model in
	// its tier, the model's own (ModelPrice) where it has one, else the tier's default.
	TierPriceIn  money.MicroUSD `json:"tier_input_usd_per_mtok"`
	TierPriceOut money.MicroUSD `json:"tier_output_usd_per_mtok"`
	ModelPrice   bool           `json:"model_price,omitempty"`
	BlendedAsk   money.MicroUSD `json:"blended_ask_usd_per_mtok"` // what the catalog sorts and caps by
	// PUE is the one the rig's figures use: stated by its provider, else its site's default.
	PUE       float64 `json:"pue"`
	PUEStated bool    `json:"pue_stated"`
	// For the offering's provider: why it is not routed at the prices in force, and how its rig's own figures
	// disagree with the gateway's; empty when neither.
	NotRoutedBecause string `json:"not_routed_because,omitempty"`
	ReportDivergence string `json:"report_divergence,omitempty"`
	// Reliability is the offering's reliability record, in the public catalog (RecordOf).
	Reliability *reliability.Record `json:"reliability,omitempty"`
	// For the offering's provider: where its rig stands with the platform and why ("Pending: 2 of 3 probes
	// passed"; docs/listing-states.md).
	RigStateReason string `json:"rig_state_reason,omitempty"`
	// For the offering's provider: the APIs besides chat completions its rig's engine serves natively, as its
	// agent last said ("messages", "responses"), and how the gateway serves the two on it.
	NativeAPIs []string `json:"native_apis,omitempty"`
	APIsServed string   `json:"apis_served,omitempty"`
}

// OfferingToJSON shows the offering at prices, the prices in force for its model (catalog.PriceBook.ForModel).
func OfferingToJSON(o catalog.Offering, prices map[catalog.Tier]catalog.Price, owner bool) OfferingJSON {
	j := OfferingJSON{Offering: o, TTFTP99Ms: o.TTFTP99Ms(), TokensPerSec: o.TokensPerSec(), FiguresBasis: o.FiguresBasis(),
		BlendedAsk: o.BlendedAsk()}
	j.PUE, j.PUEStated = carbon.PUE(o.Site, o.StatedPUE)
	if f, ok := o.Footprint(); ok {
		j.Footprint = &f
	}
	if p, ok := prices[o.Tier]; ok {
		j.TierPriceIn, j.TierPriceOut, j.ModelPrice = p.Input, p.Output, p.Model != ""
	}
	if owner {
		if o.Status == catalog.StatusActive {
			j.NotRoutedBecause = o.NotRoutedBecause(prices)
		}
		j.ReportDivergence = o.ReportDivergence()
	}
	return j
}
