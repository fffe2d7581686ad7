package reports

import (
	"context"
	"time"

	"github.com/gpumarket/gpumarket/services/carbon"
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
	GCO2e         float64       `json:"g_co2e"`
	BaselineGCO2e float64       `json:"baseline_g_co2e"`
	MethodVersion string        `json:"method_version"`
}

// PeriodSummary is the account's usage of [from, to) per tier, read through q (the close's
// transaction), in tier order: the same figures as Savings and Carbon over the same hours.
func PeriodSummary(ctx context.Context, q Querier, accountID string, from, to time.Time) ([]TierSummary, error) {
	lines, err := readSavingsLines(ctx, q, accountID, from, to, "month")
	if err != nil {
		return nil, err
	}
	groups, err := readCarbonGroups(ctx, q, accountID, from, to, "month")
	if err != nil {
		return nil, err
	}
	by := map[string]*TierSummary{}
	get := func(tier string) *TierSummary {
		if s := by[tier]; s != nil {
			return s
		}
		s := &TierSummary{Tier: tier, MethodVersion: MethodVersion}
		by[tier] = s
		return s
	}
	for _, l := range lines {
		s := get(l.tier)
		s.Spend = s.Spend.Add(l.spend)
		s.Baseline = s.Baseline.Add(l.baseline)
		c, err := CentsOf(l.spend)
		if err != nil {
			return nil, err
		}
		s.SpendCents += c
	}
	for _, g := range groups {
		s, f := get(g.tier), g.figures()
		s.EnergyKWh += carbon.KWh(f.energy)
		s.MeasuredKWh += carbon.KWh(f.measured)
		s.GCO2e += f.gco2e
		s.BaselineGCO2e += f.baselineG
	}
	out := make([]TierSummary, 0, len(by))
	for _, tier := range []string{"realtime", "standard", "batch"} {
		if s := by[tier]; s != nil {
			out = append(out, *s)
			delete(by, tier)
		}
	}
	for _, s := range by {
		out = append(out, *s)
	}
	return out, nil
}
