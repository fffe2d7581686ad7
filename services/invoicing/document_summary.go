package invoicing

import (
	"fmt"
	"strconv"

	"github.com/gpumarket/gpumarket/services/documents"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/reports"
)

// An invoice's summary block: what the period's usage saved against the same tokens at the
// realtime price, and what its energy emitted against the same tokens on the H100 PCIe
// reference, with two charts of the same figures per tier (docs/methodology.md).

// invoiceSummaryFigures are the summary's figures and charts; none without a summary.
func invoiceSummaryFigures(sum []reports.TierSummary) ([]documents.Figure, []documents.BarChart) {
	if len(sum) == 0 {
		return nil, nil
	}
	var kwh, measured, simulated, g, baseG float64
	labels := make([]string, len(sum))
	spendUSD, baseUSD, grams, baseGrams := make([]float64, len(sum)), make([]float64, len(sum)), make([]float64, len(sum)), make([]float64, len(sum))
	spends, baselines := make([]int64, len(sum)), make([]money.BigPico, len(sum))
	for i, t := range sum {
		bc, _ := reports.CentsOf(t.Baseline)
		spends[i], baselines[i] = t.SpendCents, t.Baseline
		kwh, measured, g, baseG = kwh+t.EnergyKWh, measured+t.MeasuredKWh, g+t.GCO2e, baseG+t.BaselineGCO2e
		simulated += t.SimulatedKWh
		labels[i] = titleCase(t.Tier)
		// Chart values are for drawing only: the figures above them are exact.
		spendUSD[i], baseUSD[i] = float64(t.SpendCents)/100, float64(bc)/100
		grams[i], baseGrams[i] = t.GCO2e, t.BaselineGCO2e
	}
	// The saving is the one the month's report on /reports shows (reports.InvoicedSaving).
	inv, _ := reports.InvoicedSaving(spends, baselines)
	saved := money.FormatCents(inv.SavedCents)
	if inv.SavedPct != "" {
		saved += " (" + inv.SavedPct + "%)"
	}
	figures := []documents.Figure{
		{Label: "Usage", Value: money.FormatCents(inv.SpendCents)},
		{Label: "The same tokens at the realtime price", Value: money.FormatCents(inv.BaselineCents)},
		{Label: "Saved", Value: saved},
		{Label: "Energy", Value: energyText(kwh, measured, simulated)},
		{Label: "Emissions, location-based", Value: gramsText(g)},
		{Label: "The same tokens on H100 PCIe", Value: gramsText(baseG)},
	}
	charts := []documents.BarChart{
		{Title: "Spend against the realtime price, per tier", Unit: "USD", Labels: labels,
			Series: []documents.BarSeries{{Name: "Spend", Values: spendUSD}, {Name: "At the realtime price", Values: baseUSD}}},
		{Title: "Emissions against H100 PCIe, per tier", Unit: "gCO2e", Labels: labels,
			Series: []documents.BarSeries{{Name: "Emissions", Values: grams}, {Name: "On H100 PCIe", Values: baseGrams}}},
	}
	return figures, charts
}

// energyText is the energy with its measured part, and its simulated part when there is one:
// a simulated figure is never shown as measured.
func energyText(kwh, measured, simulated float64) string {
	if simulated > 0 {
		return fmt.Sprintf("%s kWh (%s kWh measured, %s kWh simulated)", kwhText(kwh), kwhText(measured), kwhText(simulated))
	}
	return fmt.Sprintf("%s kWh (%s kWh measured)", kwhText(kwh), kwhText(measured))
}

func kwhText(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

func gramsText(v float64) string {
	if v >= 10_000 {
		return strconv.FormatFloat(v/1000, 'f', 2, 64) + " kgCO2e"
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " gCO2e"
}

// summaryNote says where the summary's figures come from.
func summaryNote(method string) string {
	return "Savings compare the usage with the same charged tokens at the realtime tier's price in force; emissions are " +
		"location-based (energy x the region's grid average x PUE) against the same traffic at the same load on an H100 PCIe, " +
		"on the same grid and at the same PUE. " +
		"Method " + method + ", described at /methodology."
}
