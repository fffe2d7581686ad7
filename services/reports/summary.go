package reports

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/services/carbon"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
)

// TierSummary is what an invoice states of one tier of its period's usage: the spend beside
// the baseline, and the energy and carbon beside the baseline's, by the method of
// MethodVersion. The close stores it with the invoice (services/invoicing), so that an issued
// invoice keeps the figures it was issued with.
type TierSummary struct {
	Tier          string        `json:"tier"`
	Spend         money.BigPico `json:"spend_usd"`
	SpendCents    int64         `json:"spend_cents"` // as the invoice's lines round it
	Baseline      money.BigPico `json:"baseline_usd"`
	EnergyKWh     float64       `json:"energy_kwh"`
	MeasuredKWh   float64       `json:"energy_measured_kwh"`
	SimulatedKWh  float64       `json:"energy_simulated_kwh"`
	GCO2e         float64       `json:"g_co2e"`
	BaselineGCO2e float64       `json:"baseline_g_co2e"`
	MethodVersion string        `json:"method_version"`
}

// PeriodSummaries are the accounts' usage of [from, to) per tier, by account, read through q
// (the close's transaction, one query for each of the two reports however many accounts), in
// tier order: the same figures as Savings and Carbon over the same hours. An account without
// usage has none.
func PeriodSummaries(ctx context.Context, q Querier, accountIDs []string, from, to time.Time) (map[string][]TierSummary, error) {
	lines, err := readSavingsLines(ctx, q, accountIDs, from, to, "month")
	if err != nil {
		return nil, err
	}
	groups, err := readCarbonGroups(ctx, q, accountIDs, from, to, "month")
	if err != nil {
		return nil, err
	}
	type key struct{ account, tier string }
	by := map[key]*TierSummary{}
	get := func(account, tier string) *TierSummary {
		k := key{account, tier}
		if s := by[k]; s != nil {
			return s
		}
		s := &TierSummary{Tier: tier, MethodVersion: MethodVersion}
		by[k] = s
		return s
	}
	for _, l := range lines {
		s := get(l.accountID, l.tier)
		s.Spend = s.Spend.Add(l.spend)
		s.Baseline = s.Baseline.Add(l.baseline)
		c, err := CentsOf(l.spend)
		if err != nil {
			return nil, err
		}
		s.SpendCents += c
	}
	for _, g := range groups {
		s, f := get(g.accountID, g.tier), g.figures()
		s.EnergyKWh += carbon.KWh(f.energy)
		s.MeasuredKWh += carbon.KWh(f.measured)
		s.SimulatedKWh += carbon.KWh(f.simulated)
		s.GCO2e += f.gco2e
		s.BaselineGCO2e += f.baselineG
	}
	out := map[string][]TierSummary{}
	for k, s := range by {
		out[k.account] = append(out[k.account], *s)
	}
	for _, list := range out {
		slices.SortFunc(list, func(a, b TierSummary) int {
			if c := catalog.TierRank(a.Tier) - catalog.TierRank(b.Tier); c != 0 {
				return c
			}
			return strings.Compare(a.Tier, b.Tier)
		})
	}
	return out, nil
}
