package webtest

import (
	"fmt"
	"time"

	"github.com/gpumarket/gpumarket/services/documents"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/reports"
	"github.com/gpumarket/gpumarket/web/developer"
)

// ReportTables are the reports dashboard's chart tables as the reports give them, keyed by
// chart ("spend", "tokens", "energy", "carbon"): per period the sums of the rows, zero where a
// period has none, and per tier the tokens. A test reads the tables the browser shows and
// compares them with these, worked out from the reports (or their JSON) on their own.
func ReportTables(sav reports.Savings, car reports.Carbon) map[string][][]string {
	out := map[string][][]string{}
	next := func(t time.Time) time.Time {
		if sav.Group == reports.GroupMonth {
			return t.AddDate(0, 1, 0)
		}
		return t.AddDate(0, 0, 1)
	}
	for p := sav.From; p.Before(sav.To); p = next(p) {
		var spend, base money.BigPico
		for _, r := range sav.Rows {
			if r.Period.Equal(p) {
				spend, base = spend.Add(r.Spend), base.Add(r.Baseline)
			}
		}
		var kwh, baseKWh, g, baseG float64
		for _, r := range car.Rows {
			if r.Period.Equal(p) {
				kwh, baseKWh, g, baseG = kwh+r.EnergyKWh, baseKWh+r.BaselineKWh, g+r.GCO2e, baseG+r.BaselineGCO2e
			}
		}
		label := developer.ReportPeriodLabel(sav.Group, p)
		// Spend and baseline rounded to the cent, and the saving their difference: a row adds up.
		spendCents, _ := reports.CentsOf(spend)
		baseCents, _ := reports.CentsOf(base)
		out["spend"] = append(out["spend"], []string{label, money.FormatCents(spendCents), money.FormatCents(baseCents), money.FormatCents(baseCents - spendCents)})
		out["energy"] = append(out["energy"], []string{label, documents.ChartValue(kwh), documents.ChartValue(baseKWh)})
		out["carbon"] = append(out["carbon"], []string{label, documents.ChartValue(g), documents.ChartValue(baseG)})
	}
	for _, tier := range []string{"realtime", "standard", "batch"} {
		var req, in, outTok int64
		for _, r := range sav.Rows {
			if r.Tier == tier {
				req, in, outTok = req+r.Requests, in+r.InputTokens, outTok+r.OutputTokens
			}
		}
		out["tokens"] = append(out["tokens"], []string{tier, money.FormatCount(req), money.FormatCount(in), money.FormatCount(outTok)})
	}
	return out
}

// ReportTableScript is the JavaScript that reads a dashboard chart's table, by chart name, as
// rows of cell texts.
func ReportTableScript(chart string) string {
	return fmt.Sprintf(`[...document.querySelectorAll(%q)].map(r => [...r.children].map(c => c.innerText.trim()))`,
		"#chart-"+chart+` [data-testid="chart-row"]`)
}
