package reports

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/carbon"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/hardware"
	"github.com/gpumarket/gpumarket/services/metering"
)

// The carbon report is location-based (docs/methodology.md, "Carbon"): each rig's energy, as
// it measured it or as its agent estimated it, times its region's average grid intensity,
// times its PUE (stated by its provider, else its site's default). The baseline is the same
// traffic at the same load on the model's reference enterprise configuration
// (carbon.BaselineJoules: the rig's energy times the reference's energy per token over the
// rig's configuration's, both from the benchmark at the same model and request rate), on the
// same grid and at the same PUE: only the hardware differs.

// carbonGroup is the rollups of one period, tier and region on rigs of one kind: the grain
// at which energy meets intensity and PUE.
type carbonGroup struct {
	accountID           string
	period              time.Time
	tier, region, model string
	site                string
	pue                 *float64
	gpu                 string
	gpuCount            int
	requests, tokens    int64
	energy, measured    float64
	simulated           float64
	busyMs              float64
}

// readCarbonGroups reads accounts' carbon groups: the meter's rollups of the accounts by offering
// (metering.EnergyLines, through usage_hourly_account_idx), summed by the site, region and GPUs
// of the offerings that served them (catalog.RigsByID). Rollups of an offering the catalog
// does not hold are in no group.
func readCarbonGroups(ctx context.Context, q Querier, accountIDs []string, from, to time.Time, unit string) ([]carbonGroup, error) {
	lines, err := metering.EnergyLines(ctx, q, metering.RollupWindow{AccountIDs: accountIDs, From: from, To: to, Unit: unit})
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(lines))
	seen := map[string]bool{}
	for _, l := range lines {
		if !seen[l.OfferingID] {
			seen[l.OfferingID] = true
			ids = append(ids, l.OfferingID)
		}
	}
	rigs, err := catalog.RigsByID(ctx, q, ids)
	if err != nil {
		return nil, err
	}
	type key struct {
		account             string
		period              time.Time
		tier, region, model string
		site                string
		pue                 float64
		pueStated           bool
		gpu                 string
		gpuCount            int
	}
	at := map[key]int{}
	var out []carbonGroup
	for _, l := range lines {
		o, ok := rigs[l.OfferingID]
		if !ok {
			continue
		}
		k := key{account: l.AccountID, period: l.Period, tier: l.Tier, region: o.Region, model: l.Model,
			site: string(o.Site), pueStated: o.StatedPUE != nil, gpu: o.GPU, gpuCount: o.GPUCount}
		if o.StatedPUE != nil {
			k.pue = *o.StatedPUE
		}
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, carbonGroup{accountID: l.AccountID, period: l.Period, tier: l.Tier, region: o.Region,
				model: l.Model, site: string(o.Site), pue: o.StatedPUE, gpu: o.GPU, gpuCount: o.GPUCount})
		}
		g := &out[i]
		g.requests += l.Requests
		g.tokens += l.Tokens
		g.energy += l.EnergyJ
		g.measured += l.MeasuredJ
		g.simulated += l.SimulatedJ
		g.busyMs += l.BusyMs
	}
	return out, nil
}

// grid is the region's intensity, or the world average's for a region not listed.
func grid(region string) hardware.Region {
	r, _ := carbon.Grid(region)
	return r
}

// figures are one group's energy and emissions, and its baseline's.
type figures struct {
	energy, measured, gco2e, pueEnergy float64
	simulated                          float64
	baselineJ, baselineG, embodied     float64
}

func (g carbonGroup) figures() figures {
	pue, _ := carbon.PUE(carbon.Site(g.site), g.pue)
	intensity := float64(grid(g.region).GCO2ePerKWh)
	baselineJ := carbon.BaselineJoules(g.energy, g.model, g.gpu, g.gpuCount)
	return figures{energy: g.energy, measured: g.measured, simulated: g.simulated, gco2e: carbon.GCO2e(g.energy, intensity, pue),
		pueEnergy: pue * g.energy, baselineJ: baselineJ,
		baselineG: carbon.GCO2e(baselineJ, intensity, pue),
		embodied:  carbon.EmbodiedGCO2e(g.gpu, g.gpuCount, g.busyMs)}
}

// Carbon is the account's energy and location-based emissions per period, tier and region,
// beside the baseline's, with the embodied line and the SCI figures in the totals.
func (s *Service) Carbon(ctx context.Context, accountID string, q Query) (_ Carbon, err error) {
	defer services.Wrap(&err, "reports.Carbon(%s)", accountID)
	if err := q.Validate(); err != nil {
		return Carbon{}, err
	}
	groups, err := readCarbonGroups(ctx, s.pool, []string{accountID}, q.From, q.To, q.trunc())
	if err != nil {
		return Carbon{}, err
	}
	out := Carbon{AccountID: accountID, From: q.From, To: q.To, Group: q.Group, Rows: []CarbonRow{}, MethodVersion: MethodVersion}
	type key struct {
		period       time.Time
		tier, region string
	}
	at := map[key]int{}
	pueEnergy := map[key]float64{}
	var embodied float64
	for _, g := range groups {
		k := key{g.period, g.tier, g.region}
		i, ok := at[k]
		if !ok {
			i = len(out.Rows)
			at[k] = i
			r := grid(g.region)
			out.Rows = append(out.Rows, CarbonRow{Period: g.period, Tier: g.tier, Region: g.region,
				GramsPerKWh: float64(r.GCO2ePerKWh), GridYear: r.Year, GridSource: gridSource(g.region, r), MethodVersion: MethodVersion})
		}
		f := g.figures()
		r := &out.Rows[i]
		r.Requests += g.requests
		r.Tokens += g.tokens
		r.EnergyKWh += carbon.KWh(f.energy)
		r.MeasuredKWh += carbon.KWh(f.measured)
		r.SimulatedKWh += carbon.KWh(f.simulated)
		r.GCO2e += f.gco2e
		r.BaselineKWh += carbon.KWh(f.baselineJ)
		r.BaselineGCO2e += f.baselineG
		pueEnergy[k] += f.pueEnergy
		embodied += f.embodied
	}
	slices.SortFunc(out.Rows, func(a, b CarbonRow) int {
		if c := a.Period.Compare(b.Period); c != 0 {
			return c
		}
		if c := catalog.TierRank(a.Tier) - catalog.TierRank(b.Tier); c != 0 {
			return c
		}
		return strings.Compare(a.Region, b.Region)
	})
	t := &out.Totals
	for i := range out.Rows {
		r := &out.Rows[i]
		r.EstimatedKWh = max(0, r.EnergyKWh-r.MeasuredKWh-r.SimulatedKWh)
		r.PUE = 0
		if r.EnergyKWh > 0 {
			r.PUE = carbon.KWh(pueEnergy[key{r.Period, r.Tier, r.Region}]) / r.EnergyKWh
		}
		t.Requests += r.Requests
		t.Tokens += r.Tokens
		t.EnergyKWh += r.EnergyKWh
		t.MeasuredKWh += r.MeasuredKWh
		t.SimulatedKWh += r.SimulatedKWh
		t.GCO2e += r.GCO2e
		t.BaselineKWh += r.BaselineKWh
		t.BaselineGCO2e += r.BaselineGCO2e
	}
	t.EstimatedKWh = max(0, t.EnergyKWh-t.MeasuredKWh-t.SimulatedKWh)
	if len(groups) > 0 {
		out.Embodied = &Embodied{GCO2e: embodied, Assumptions: carbon.EmbodiedAssumptions()}
		t.EmbodiedGCO2e = embodied
	}
	if t.Requests > 0 {
		t.SCIPerRequest = (t.GCO2e + t.EmbodiedGCO2e) / float64(t.Requests)
	}
	if t.Tokens > 0 {
		t.SCIPerMillionTokens = (t.GCO2e + t.EmbodiedGCO2e) / float64(t.Tokens) * 1e6
		t.BaselinePerMillionTok = t.BaselineGCO2e / float64(t.Tokens) * 1e6
	}
	return out, nil
}

func gridSource(region string, r hardware.Region) string {
	if _, listed := carbon.Grid(region); !listed {
		return "region " + region + " is not listed: world average, " + r.Source
	}
	return r.Source
}
