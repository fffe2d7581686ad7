package web

import (
	"fmt"
	"strconv"
	"time"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/templates"
)

// offeringRow formats an offering for the catalog and portal tables.
func offeringRow(o catalog.Offering) templates.OfferingRow {
	r := templates.OfferingRow{
		ID: o.ID, Provider: o.ProviderName, Model: o.Model, Region: regionLabel(o.Region),
		Hardware: fmt.Sprintf("%dx %s", o.GPUCount, o.GPUName),
		Memory:   fmt.Sprintf("%d GB", o.GPUMemoryGB),
		AskInput: o.AskInput.String(), AskOutput: o.AskOutput.String(), Basis: o.FiguresBasis(), Tier: string(o.Tier),
		Status: string(o.Status), TTFTP99: "—", TokensPerSec: "—", EnergyKWh: "—", CarbonG: "—", Reported: "—",
	}
	if p := o.TTFTP99Ms(); p != nil {
		r.TTFTP99 = formatMs(*p)
	}
	if o.Reported() {
		r.Reported = "P99 " + formatMs(*o.ReportedTTFTP99Ms)
		if t := o.ReportedTokensPerSec; t != nil {
			r.Reported += ", " + strconv.FormatFloat(*t, 'f', 0, 64) + " tokens/s"
		}
		r.Reported += " over " + strconv.FormatInt(o.ReportedRequests, 10) + " requests"
	}
	if t := o.TokensPerSec(); t != nil {
		r.TokensPerSec = strconv.FormatFloat(*t, 'f', 0, 64)
	}
	r.SitePUE = sitePUE(o.Site, o.StatedPUE)
	if f, ok := o.Footprint(); ok {
		r.EnergyKWh = strconv.FormatFloat(f.KWhPerMTok, 'f', 3, 64)
		r.CarbonG = strconv.FormatFloat(f.GCO2ePerMTok, 'f', 1, 64)
	}
	return r
}

// ownOfferingRow is offeringRow for the offering's provider, with what it should know: where its rig stands
// with the platform and why (at now), why the rig is not routed at prices (the prices in force), and whether
// its agent's own figures disagree with the gateway's.
func ownOfferingRow(o catalog.Offering, prices map[catalog.Tier]catalog.Price, now time.Time) templates.OfferingRow {
	r := withRigState(offeringRow(o), o, now)
	if why := o.NotRoutedBecause(prices); why != "" && o.Status == catalog.StatusActive {
		r.NotRouted = why
	}
	r.Divergence = o.ReportDivergence()
	return r
}

// withRigState adds to the row where the offering's rig stands and why, and what its last probe measured.
func withRigState(r templates.OfferingRow, o catalog.Offering, now time.Time) templates.OfferingRow {
	r.RigState, r.RigReason = string(o.RigState), o.RigStateReason(now)
	r.APIs, r.APIsBrief = o.APIsServed(), o.APIsServedBrief()
	if o.RigProbeAt != nil && o.RigState != catalog.RigActive {
		r.RigProbe = "Last probe at " + o.RigProbeAt.UTC().Format("15:04:05 UTC")
		if o.RigProbeTTFTMs != nil {
			r.RigProbe += ": first token in " + formatMs(*o.RigProbeTTFTMs)
			if t := o.RigProbeTokensPerSec; t != nil {
				r.RigProbe += ", " + strconv.FormatFloat(*t, 'f', 0, 64) + " tokens/s"
			}
		}
		r.RigProbe += "."
	}
	return r
}

func formatMs(ms float64) string {
	if ms >= 1000 {
		return strconv.FormatFloat(ms/1000, 'f', 2, 64) + " s"
	}
	return strconv.FormatFloat(ms, 'f', 1, 64) + " ms"
}

func regionLabel(code string) string {
	if r, ok := catalog.RegionByCode(code); ok {
		return r.Name
	}
	return code
}

func gpuOptions() []templates.Option {
	out := make([]templates.Option, 0, len(catalog.GPUs))
	for _, g := range catalog.GPUs {
		out = append(out, templates.Option{Value: g.SKU, Label: fmt.Sprintf("%s (%d GB, %d W)", g.Name, g.VRAMGB, g.BoardPowerW)})
	}
	return out
}

func regionOptions() []templates.Option {
	out := make([]templates.Option, 0, len(catalog.Regions))
	for _, r := range catalog.Regions {
		out = append(out, templates.Option{Value: r.Code, Label: fmt.Sprintf("%s (%d gCO2e/kWh)", r.Name, r.GCO2ePerKWh)})
	}
	return out
}

func roleNames() []string {
	out := make([]string, 0, len(accounts.Roles))
	for _, r := range accounts.Roles {
		out = append(out, string(r))
	}
	return out
}
