package planner

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/carbon"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
)

// MaxTokensPerDay bounds a workload so that a day of it at any price the book allows stays
// exact in a Pico.
const MaxTokensPerDay = 1_000_000_000_000

// secondsPerDay turns an offering's tokens per second into its daily capacity.
const secondsPerDay = 86_400

// Workload is what a customer plans for: a day's tokens, the share of them a person waits on
// (realtime), the P99 time to first token the rest must meet, and a daily budget.
type Workload struct {
	TokensPerDay    int64 `json:"tokens_per_day"`
	RealtimePercent int   `json:"realtime_percent"`
	// TargetP99Ms is the P99 time to first token the traffic that is not realtime must meet;
	// 0 means none (batch will do).
	TargetP99Ms float64 `json:"target_p99_ms"`
	// Budget is what a day may cost; 0 means no budget.
	Budget money.Pico `json:"budget_per_day"`
	// Model narrows the offerings to one model; "" plans over every model on offer.
	Model string `json:"model,omitempty"`
}

// Fields of the planner's form and query, as field errors name them.
const (
	FieldTokensPerDay    = "tokens_per_day"
	FieldRealtimePercent = "realtime_percent"
	FieldTargetP99Ms     = "target_p99_ms"
	FieldBudget          = "budget_usd_per_day"
	FieldModel           = "model"
)

// ParseWorkload reads a workload from the planner's form or query (get returns a field's text,
// "" when absent), with every problem at once as field errors.
func ParseWorkload(get func(string) string) (Workload, error) {
	fe := services.FieldErrors{}
	var w Workload
	text := func(f string) string { return strings.TrimSpace(get(f)) }
	if s := strings.ReplaceAll(text(FieldTokensPerDay), "_", ""); s == "" {
		fe.Add(FieldTokensPerDay, "Enter how many tokens (input and output) a day you serve, like 50000000.")
	} else if v, err := strconv.ParseInt(strings.ReplaceAll(s, ",", ""), 10, 64); err != nil || v <= 0 || v > MaxTokensPerDay {
		fe.Add(FieldTokensPerDay, "Use a whole number of tokens from 1 to 1,000,000,000,000.")
	} else {
		w.TokensPerDay = v
	}
	if s := text(FieldRealtimePercent); s != "" {
		if v, err := strconv.Atoi(strings.TrimSuffix(s, "%")); err != nil || v < 0 || v > 100 {
			fe.Add(FieldRealtimePercent, "Use a whole percentage from 0 to 100.")
		} else {
			w.RealtimePercent = v
		}
	}
	if s := text(FieldTargetP99Ms); s != "" {
		if v, err := strconv.ParseFloat(s, 64); err != nil || !(v >= 0) || v > 600_000 {
			fe.Add(FieldTargetP99Ms, "Use a number of milliseconds from 0 to 600000, or leave it empty for no target.")
		} else {
			w.TargetP99Ms = v
		}
	}
	if s := text(FieldBudget); s != "" {
		if v, err := money.ParseUSD(s); err != nil || v < 0 || v > 1_000_000*money.PicoPerUSD {
			fe.Add(FieldBudget, "Use an amount in dollars a day, like 25 or 12.50, or leave it empty for no budget.")
		} else {
			w.Budget = v
		}
	}
	w.Model = text(FieldModel)
	return w, fe.Err()
}

// Placement is the share of a part one offering takes.
type Placement struct {
	OfferingID   string  `json:"offering_id"`
	ProviderName string  `json:"provider_name"`
	Hardware     string  `json:"hardware"` // e.g. "4x NVIDIA GeForce RTX 4090"
	Region       string  `json:"region"`
	Model        string  `json:"model"`
	Tokens       int64   `json:"tokens_per_day"`
	Capacity     int64   `json:"capacity_tokens_per_day"`
	GCO2ePerMTok float64 `json:"g_co2e_per_million_tokens"`
}

// Part is the share of the workload one tier serves.
type Part struct {
	// Need says what the tokens need: "realtime" or "the rest".
	Need   string       `json:"need"`
	Tier   catalog.Tier `json:"tier"` // "" when no tier on offer can serve them
	Tokens int64        `json:"tokens_per_day"`
	// Price is the tier's price in force; Cost the day's tokens at it, half input and half
	// output (as the catalog's blended ask assumes), exact.
	Price catalog.Price `json:"price"`
	Cost  money.Pico    `json:"cost_per_day"`
	// Placements fill the tier's offerings cheapest ask first, each up to its capacity, as
	// routing prefers the cheapest offering that keeps the promise.
	Placements []Placement `json:"placements"`
	Capacity   int64       `json:"capacity_tokens_per_day"`
	// Uncovered is what the offerings' capacity does not cover; it is estimated at their
	// capacity-weighted mean.
	Uncovered   int64   `json:"uncovered_tokens_per_day"`
	KWh         float64 `json:"kwh_per_day"`
	GCO2e       float64 `json:"g_co2e_per_day"`
	EnergyKnown bool    `json:"energy_known"`
	Note        string  `json:"note,omitempty"`
}

// Totals is the cost, energy and carbon of a day.
type Totals struct {
	Cost        money.Pico `json:"cost_per_day"`
	CostKnown   bool       `json:"cost_known"`
	KWh         float64    `json:"kwh_per_day"`
	GCO2e       float64    `json:"g_co2e_per_day"`
	EnergyKnown bool       `json:"energy_known"`
}

// Plan is the recommended mix for a workload, and what it saves against serving every token
// in the realtime tier.
type Plan struct {
	Workload     Workload   `json:"workload"`
	Parts        []Part     `json:"parts"`
	Total        Totals     `json:"total"`
	AllRealtime  Totals     `json:"all_realtime"`
	Savings      money.Pico `json:"savings_per_day"`
	SavedGCO2e   float64    `json:"saved_g_co2e_per_day"`
	WithinBudget *bool      `json:"within_budget,omitempty"`
	// OverBudget is how much the plan passes the budget by, when it does.
	OverBudget    money.Pico `json:"over_budget_per_day,omitempty"`
	CarbonMethod  string     `json:"carbon_method"`
	OfferingsSeen int        `json:"offerings_considered"`
}

// PlanFleet recommends a mix of tiers for the workload from the offerings on offer and the
// prices in force (docs/planner-and-carbon-routing.md):
//   - the realtime share goes to the realtime tier;
//   - the rest goes to the tier with the lowest price (input plus output) that has an offering
//     of the model whose P99 time to first token (measured, else claimed) meets the target;
//     without a target any tier will do;
//   - each part's energy and carbon follow from the offerings it fills (Offering.Emissions).
func PlanFleet(w Workload, offerings []catalog.Offering, prices map[catalog.Tier]catalog.Price) (Plan, error) {
	offerings = filterModel(offerings, w.Model)
	plan := Plan{Workload: w, CarbonMethod: carbon.MethodVersion, OfferingsSeen: len(offerings)}
	realtime := w.TokensPerDay * int64(w.RealtimePercent) / 100
	var err error
	if realtime > 0 {
		part := tierPart("realtime", catalog.TierRealtime, realtime, 0, offerings, prices)
		plan.Parts = append(plan.Parts, part)
	}
	if rest := w.TokensPerDay - realtime; rest > 0 {
		plan.Parts = append(plan.Parts, restPart(rest, w.TargetP99Ms, offerings, prices))
	}
	plan.Total = Totals{CostKnown: true, EnergyKnown: true}
	for _, p := range plan.Parts {
		if p.Tier == "" {
			plan.Total.CostKnown = false
		} else if plan.Total.Cost, err = plan.Total.Cost.Add(p.Cost); err != nil {
			return Plan{}, err
		}
		plan.Total.KWh += p.KWh
		plan.Total.GCO2e += p.GCO2e
		plan.Total.EnergyKnown = plan.Total.EnergyKnown && p.EnergyKnown
	}
	all := tierPart("all", catalog.TierRealtime, w.TokensPerDay, 0, offerings, prices)
	plan.AllRealtime = Totals{Cost: all.Cost, CostKnown: all.Tier != "", KWh: all.KWh, GCO2e: all.GCO2e, EnergyKnown: all.EnergyKnown}
	if plan.Total.CostKnown && plan.AllRealtime.CostKnown {
		plan.Savings = plan.AllRealtime.Cost - plan.Total.Cost
	}
	if plan.Total.EnergyKnown && plan.AllRealtime.EnergyKnown {
		plan.SavedGCO2e = plan.AllRealtime.GCO2e - plan.Total.GCO2e
	}
	if w.Budget > 0 && plan.Total.CostKnown {
		within := plan.Total.Cost <= w.Budget
		plan.WithinBudget = &within
		if !within {
			plan.OverBudget = plan.Total.Cost - w.Budget
		}
	}
	return plan, nil
}

func filterModel(os []catalog.Offering, model string) []catalog.Offering {
	if model == "" {
		return os
	}
	var out []catalog.Offering
	for _, o := range os {
		if o.Model == model {
			out = append(out, o)
		}
	}
	return out
}

// restPart places the tokens that are not realtime in the cheapest tier that meets the target.
func restPart(tokens int64, targetMs float64, offerings []catalog.Offering, prices map[catalog.Tier]catalog.Price) Part {
	tiers := slices.Clone(catalog.Tiers)
	slices.SortStableFunc(tiers, func(a, b catalog.Tier) int {
		return cmp.Compare(prices[a].Input+prices[a].Output, prices[b].Input+prices[b].Output)
	})
	for _, tier := range tiers {
		if _, priced := prices[tier]; !priced {
			continue
		}
		if p := tierPart("the rest", tier, tokens, targetMs, offerings, prices); len(p.Placements) > 0 {
			return p
		}
	}
	note := "No offering on offer can serve these tokens now."
	if targetMs > 0 {
		note = fmt.Sprintf("No offering on offer meets a P99 time to first token of %g ms now.", targetMs)
	}
	return Part{Need: "the rest", Tokens: tokens, Note: note}
}

// tierPart places tokens on the tier's offerings that meet the target (0: none), cheapest ask
// first, each up to its capacity.
func tierPart(need string, tier catalog.Tier, tokens int64, targetMs float64, offerings []catalog.Offering, prices map[catalog.Tier]catalog.Price) Part {
	part := Part{Need: need, Tokens: tokens}
	price, ok := prices[tier]
	if !ok {
		part.Note = "The " + string(tier) + " tier has no price in force."
		return part
	}
	part.Tier, part.Price = tier, price
	in := tokens / 2
	cin, err1 := money.ChargeFor(in, price.Input)
	cout, err2 := money.ChargeFor(tokens-in, price.Output)
	if part.Cost, _ = cin.Add(cout); err1 != nil || err2 != nil {
		// Bounded by MaxTokensPerDay and the price book's asks; unreachable in practice.
		part.Tier = ""
		return part
	}
	type fit struct {
		o   catalog.Offering
		e   catalog.Emissions
		cap int64
	}
	var fits []fit
	for _, o := range offerings {
		if o.Tier != tier {
			continue
		}
		if targetMs > 0 {
			if p := o.TTFTP99Ms(); p == nil || *p > targetMs {
				continue
			}
		}
		e, ok := o.Emissions()
		if !ok {
			continue
		}
		fits = append(fits, fit{o: o, e: e, cap: int64(*o.TokensPerSec() * secondsPerDay)})
	}
	slices.SortStableFunc(fits, func(a, b fit) int {
		return cmp.Or(cmp.Compare(a.o.AskInput+a.o.AskOutput, b.o.AskInput+b.o.AskOutput), strings.Compare(a.o.ID, b.o.ID))
	})
	left := tokens
	var capG, capJ float64 // capacity-weighted sums, for what the capacity does not cover
	for _, f := range fits {
		part.Capacity += f.cap
		capG += float64(f.cap) * f.e.GCO2ePerToken
		capJ += float64(f.cap) * f.e.JoulesPerToken * f.e.PUE
		take := min(left, f.cap)
		left -= take
		part.Placements = append(part.Placements, Placement{
			OfferingID: f.o.ID, ProviderName: f.o.ProviderName, Hardware: fmt.Sprintf("%dx %s", f.o.GPUCount, cmp.Or(f.o.GPUName, f.o.GPU)),
			Region: f.o.Region, Model: f.o.Model, Tokens: take, Capacity: f.cap, GCO2ePerMTok: f.e.GCO2ePerMTok(),
		})
		part.GCO2e += float64(take) * f.e.GCO2ePerToken
		part.KWh += carbon.KWh(float64(take) * f.e.JoulesPerToken * f.e.PUE)
	}
	if len(fits) == 0 {
		part.Note = "No offering in the tier can serve these tokens now."
		return part
	}
	part.EnergyKnown = true
	if left > 0 && part.Capacity > 0 {
		part.Uncovered = left
		part.GCO2e += float64(left) * capG / float64(part.Capacity)
		part.KWh += carbon.KWh(float64(left) * capJ / float64(part.Capacity))
		part.Note = fmt.Sprintf("The tier's offerings serve %d tokens a day at most; the rest is estimated at their average.", part.Capacity)
	}
	return part
}
