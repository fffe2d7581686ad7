// Package reports is what each customer saved and emitted: spend against a named baseline,
// and the energy and carbon of its tokens against the same tokens on enterprise GPUs. Every
// figure is computed from the hourly rollups (metering.ChargeLines and metering.EnergyLines),
// the offerings they were served on (catalog.RigsByID, for region, site and PUE) and the
// price book (catalog.ReadPriceBook), read through their owners and never written. The method,
// its constants and their sources are in services/carbon and docs/methodology.md. The package
// has no tables and names none in its SQL.
package reports

import (
	"time"

	"github.com/gpumarket/gpumarket/services/money"
)

// Group is the length of a report row's period.
type Group string

const (
	GroupDay   Group = "day"
	GroupMonth Group = "month"
)

// Query selects an account's report: the periods starting in [From, To), UTC, grouped by day
// or month.
type Query struct {
	From, To time.Time
	Group    Group
}

// SavingsRow is one period and tier of an account's spend against the baseline: the same
// chargeable tokens priced at the realtime tier's price in force at the hour they were served
// (everything on enterprise GPUs).
type SavingsRow struct {
	Period       time.Time `json:"period"`
	Tier         string    `json:"tier"`
	Requests     int64     `json:"requests"`
	InputTokens  int64     `json:"input_tokens"`
	OutputTokens int64     `json:"output_tokens"`
	// CachedInputTokens are the input tokens served from a prompt cache, a part of InputTokens:
	// the baseline prices them at the realtime tier's cached input price.
	CachedInputTokens int64         `json:"cached_input_tokens"`
	Spend             money.BigPico `json:"spend_usd"`
	Baseline          money.BigPico `json:"baseline_usd"`
	Savings           money.BigPico `json:"savings_usd"`
	SavingsPct        string        `json:"savings_percent"` // one decimal, "" when the baseline is zero
	// InvoiceSpendUSD is, in a month report, the month's spend of the tier as its invoice
	// rounds it (each usage line to the cent, then summed): dollars with two decimals.
	InvoiceSpendUSD string `json:"invoice_spend_usd,omitempty"`
	MethodVersion   string `json:"method_version"`
}

// Savings is an account's savings report.
type Savings struct {
	AccountID string        `json:"account_id"`
	From      time.Time     `json:"from"`
	To        time.Time     `json:"to"`
	Group     Group         `json:"group"`
	Rows      []SavingsRow  `json:"rows"`
	Totals    SavingsTotals `json:"totals"`
	// Reference is the optional second baseline: a hyperscaler's on-demand H100, named with
	// its source and date.
	Reference     *PriceReference `json:"reference,omitempty"`
	MethodVersion string          `json:"method_version"`
}

// SavingsTotals sums a report's rows.
type SavingsTotals struct {
	Requests          int64         `json:"requests"`
	InputTokens       int64         `json:"input_tokens"`
	OutputTokens      int64         `json:"output_tokens"`
	CachedInputTokens int64         `json:"cached_input_tokens"` // of InputTokens
	Spend             money.BigPico `json:"spend_usd"`
	Baseline          money.BigPico `json:"baseline_usd"`
	Savings           money.BigPico `json:"savings_usd"`
	SavingsPct        string        `json:"savings_percent"`
	// InvoiceSpendUSD is, in a month report, the spend as the months' invoices round it.
	InvoiceSpendUSD string `json:"invoice_spend_usd,omitempty"`
	// Invoiced is, in a month report, the spend, the baseline and the saving as the months'
	// invoices print them (InvoicedSaving).
	Invoiced *Invoiced `json:"invoiced,omitempty"`
}

// PriceReference is the same tokens priced at a named outside price.
type PriceReference struct {
	Name     string        `json:"name"`
	Source   string        `json:"source"`
	Date     string        `json:"date"`
	USDPerMT string        `json:"usd_per_million_tokens"`
	Cost     money.BigPico `json:"cost_usd"`
}

// CarbonRow is one period, tier and region of an account's energy and location-based
// emissions, beside the baseline's.
type CarbonRow struct {
	Period        time.Time `json:"period"`
	Tier          string    `json:"tier"`
	Region        string    `json:"region"`
	Requests      int64     `json:"requests"`
	Tokens        int64     `json:"tokens"`
	EnergyKWh     float64   `json:"energy_kwh"`
	MeasuredKWh   float64   `json:"energy_measured_kwh"`
	SimulatedKWh  float64   `json:"energy_simulated_kwh"` // from a simulated power sensor: never measured
	EstimatedKWh  float64   `json:"energy_estimated_kwh"`
	GramsPerKWh   float64   `json:"grid_g_co2e_per_kwh"`
	GridYear      int       `json:"grid_year"`
	GridSource    string    `json:"grid_source"`
	PUE           float64   `json:"pue"` // the energy-weighted PUE of the row's rigs
	GCO2e         float64   `json:"g_co2e"`
	BaselineKWh   float64   `json:"baseline_energy_kwh"`
	BaselineGCO2e float64   `json:"baseline_g_co2e"`
	MethodVersion string    `json:"method_version"`
}

// Carbon is an account's energy and carbon report.
type Carbon struct {
	AccountID     string       `json:"account_id"`
	From          time.Time    `json:"from"`
	To            time.Time    `json:"to"`
	Group         Group        `json:"group"`
	Rows          []CarbonRow  `json:"rows"`
	Totals        CarbonTotals `json:"totals"`
	Embodied      *Embodied    `json:"embodied,omitempty"`
	MethodVersion string       `json:"method_version"`
}

// CarbonTotals sums a report's rows.
type CarbonTotals struct {
	Requests      int64   `json:"requests"`
	Tokens        int64   `json:"tokens"`
	EnergyKWh     float64 `json:"energy_kwh"`
	MeasuredKWh   float64 `json:"energy_measured_kwh"`
	SimulatedKWh  float64 `json:"energy_simulated_kwh"`
	EstimatedKWh  float64 `json:"energy_estimated_kwh"`
	GCO2e         float64 `json:"g_co2e"`
	BaselineKWh   float64 `json:"baseline_energy_kwh"`
	BaselineGCO2e float64 `json:"baseline_g_co2e"`
	// EmbodiedGCO2e is the embodied line's grams (0 without one), and the SCI figures are
	// (operational + embodied) grams per request and per million tokens.
	EmbodiedGCO2e         float64 `json:"embodied_g_co2e"`
	SCIPerRequest         float64 `json:"sci_g_co2e_per_request"`
	SCIPerMillionTokens   float64 `json:"sci_g_co2e_per_million_tokens"`
	BaselinePerMillionTok float64 `json:"baseline_g_co2e_per_million_tokens"`
}

// Embodied is the optional embodied-carbon line: the boards' manufacturing emissions over
// their life, shared by the hours the account's requests kept them busy.
type Embodied struct {
	GCO2e       float64  `json:"g_co2e"`
	Assumptions []string `json:"assumptions"`
}
