package public

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/planner"
	"github.com/gpumarket/gpumarket/services/reports"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// The fleet planner (docs/planner-and-carbon-routing.md): a public GET form, and the same
// answer as JSON at GET /api/planner.

// plannerFields are the form's fields; bench_model picks the benchmark model of the sweet spots.
var plannerFields = []string{planner.FieldTokensPerDay, planner.FieldRealtimePercent, planner.FieldTargetP99Ms,
	planner.FieldBudget, planner.FieldModel, "bench_model"}

// plannerExample is the workload the page opens with: 100 million tokens a day, a fifth of
// them realtime, the rest within the standard tier's 500 ms.
var plannerExample = map[string]string{planner.FieldTokensPerDay: "100000000", planner.FieldRealtimePercent: "20",
	planner.FieldTargetP99Ms: "500", "bench_model": planner.BenchmarkModel}

// plannerAnswer is the JSON answer.
type plannerAnswer struct {
	Plan       planner.Plan        `json:"plan"`
	SweetSpots []planner.SweetSpot `json:"sweet_spots"`
	SweetSpot  struct {
		Model             string  `json:"model"`
		TargetP99Ms       float64 `json:"target_p99_ms"`
		MinStepSavingPerc float64 `json:"min_step_saving_percent"`
	} `json:"sweet_spot_rule"`
}

// benchModel is the benchmark model asked for, or the benchmark's headline model.
func benchModel(v string) (string, error) {
	if v == "" {
		return planner.BenchmarkModel, nil
	}
	if !slices.Contains(planner.BenchmarkModels(), v) {
		return "", &services.Error{Code: services.CodeInvalid, Message: "Please correct the highlighted fields.",
			Fields: map[string]string{"bench_model": "Choose a model the benchmark ran."}}
	}
	return v, nil
}

func (s *Server) planFor(c echo.Context, get func(string) string) (plannerAnswer, error) {
	var a plannerAnswer
	w, err := planner.ParseWorkload(get)
	model, merr := benchModel(get("bench_model"))
	if err != nil || merr != nil {
		return a, mergeFieldErrors(err, merr)
	}
	if a.Plan, err = planner.NewService(s.catalog).Plan(c.Request().Context(), w); err != nil {
		return a, err
	}
	a.SweetSpots = planner.SweetSpots(model, w.TargetP99Ms)
	a.SweetSpot.Model, a.SweetSpot.TargetP99Ms, a.SweetSpot.MinStepSavingPerc = model, w.TargetP99Ms, planner.MinStepSavingPercent
	return a, nil
}

// mergeFieldErrors joins the field errors of two checks into one.
func mergeFieldErrors(errs ...error) error {
	fe := services.FieldErrors{}
	for _, err := range errs {
		if se, ok := err.(*services.Error); ok {
			for k, v := range se.Fields {
				fe.Add(k, v)
			}
		} else if err != nil {
			return err
		}
	}
	return fe.Err()
}

func (s *Server) apiPlanner(c echo.Context) error {
	a, err := s.planFor(c, c.QueryParam)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, a)
}

func (s *Server) plannerPage(c echo.Context) error {
	ctx := c.Request().Context()
	models, err := s.catalog.Models(ctx)
	if err != nil {
		return err
	}
	p := templates.PlannerPage{Page: s.Page(c, "Fleet planner"), Models: []templates.Option{{Value: "", Label: "Any model on offer"}}}
	for _, m := range models {
		p.Models = append(p.Models, templates.Option{Value: m, Label: m})
	}
	for _, m := range planner.BenchmarkModels() {
		p.BenchModels = append(p.BenchModels, templates.Option{Value: m, Label: m})
	}
	q := c.QueryParams()
	p.Form.Values = map[string]string{}
	for _, k := range plannerFields {
		p.Form.Values[k] = q.Get(k)
	}
	if len(q) == 0 {
		p.Form.Values = plannerExample
	}
	a, err := s.planFor(c, func(k string) string { return p.Form.Values[k] })
	if err != nil {
		return s.FormError(c, err, func(f templates.Form) error {
			f.Values = p.Form.Values
			p.Form = f
			return s.Render(c, http.StatusUnprocessableEntity, templates.Planner(p))
		})
	}
	p.Result = plannerView(a.Plan)
	p.Bench = sweetSpotViews(a.SweetSpots)
	p.BenchModel = a.SweetSpot.Model
	p.BenchTarget = "no P99 target"
	if a.SweetSpot.TargetP99Ms > 0 {
		p.BenchTarget = "a P99 time to first token of at most " + strconv.FormatFloat(a.SweetSpot.TargetP99Ms, 'f', -1, 64) + " ms"
	}
	return s.Render(c, http.StatusOK, templates.Planner(p))
}

func kwh(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) + " kWh" }

func plannerView(plan planner.Plan) *templates.PlanView {
	v := &templates.PlanView{Considered: plan.OfferingsSeen, Method: plan.CarbonMethod}
	for _, p := range plan.Parts {
		pv := templates.PlanPartView{Need: p.Need, Tier: string(p.Tier), Tokens: core.Count(p.Tokens), Note: p.Note}
		if p.Tier != "" {
			pv.Price = p.Price.Input.String() + " in / " + p.Price.Output.String() + " out"
			pv.Cost = money.FormatCentsOf(p.Cost)
		}
		if p.EnergyKnown {
			pv.Energy, pv.Carbon = kwh(p.KWh), grams(p.GCO2e)
		}
		for _, pl := range p.Placements {
			if pl.Tokens == 0 {
				continue
			}
			pv.Placements = append(pv.Placements, fmt.Sprintf("%s (%s, %s): %s tokens at %.1f gCO2e per million",
				pl.Hardware, pl.ProviderName, pl.Region, core.Count(pl.Tokens), pl.GCO2ePerMTok))
		}
		v.Parts = append(v.Parts, pv)
	}
	total := func(t planner.Totals) (cost, energy, carbon string) {
		cost, energy, carbon = "—", "—", "—"
		if t.CostKnown {
			cost = money.FormatCentsOf(t.Cost)
		}
		if t.EnergyKnown {
			energy, carbon = kwh(t.KWh), grams(t.GCO2e)
		}
		return
	}
	v.Cost, v.Energy, v.Carbon = total(plan.Total)
	v.AllCost, v.AllEnergy, v.AllCarbon = total(plan.AllRealtime)
	if plan.Total.CostKnown && plan.AllRealtime.CostKnown {
		// The difference of the two costs as they are printed, so that the three add up at their
		// cents, and its share of the all-realtime cost.
		// (It cannot fail: a Pico counts millionths of a millionth of a dollar, so its cents fit an int64.)
		saving, _ := reports.RoundedSaving(money.BigPicoOf(plan.Total.Cost), money.BigPicoOf(plan.AllRealtime.Cost))
		v.Savings = money.FormatCents(saving.SavedCents)
		if saving.SavedPct != "" {
			v.SavingsPercent = saving.SavedPct + "%"
		}
	}
	if plan.Total.EnergyKnown && plan.AllRealtime.EnergyKnown {
		// Honest either way: consumer cards use more energy per token, so a cheaper mix
		// may emit more than all-realtime.
		if plan.SavedGCO2e >= 0 {
			v.CarbonSaved = "Emits " + grams(plan.SavedGCO2e) + " CO2e a day less than all-realtime."
		} else {
			v.CarbonSaved = "Emits " + grams(-plan.SavedGCO2e) + " CO2e a day more than all-realtime."
		}
	}
	if plan.WithinBudget != nil {
		if *plan.WithinBudget {
			v.Budget = "Within the budget of " + money.FormatCentsOf(plan.Workload.Budget) + " a day."
		} else {
			v.Budget = "Over the budget of " + money.FormatCentsOf(plan.Workload.Budget) + " a day by " + money.FormatCentsOf(plan.OverBudget) + "."
			v.OverBudget = true
		}
	}
	return v
}

var stopWords = map[planner.Stop]string{
	planner.StopHeaviest:    "the heaviest load measured",
	planner.StopOverTarget:  "the next load is over the target",
	planner.StopSmallSaving: "the next load saves less than 20%",
	planner.StopNone:        "no load meets the target",
}

func sweetSpotViews(spots []planner.SweetSpot) []templates.SweetSpotView {
	var out []templates.SweetSpotView
	for _, s := range spots {
		v := templates.SweetSpotView{Config: s.Name(), Why: stopWords[s.Stop]}
		if at, ok := s.At(); ok {
			v.Rate = strconv.FormatFloat(at.RequestsPerSecond, 'f', -1, 64)
			v.Cost = modelledPrice(at.USDPerMTok)
			v.P99 = strconv.FormatFloat(at.TTFTP99Ms, 'f', 0, 64) + " ms"
		}
		if s.Stop == planner.StopSmallSaving || s.Stop == planner.StopOverTarget {
			v.Why += fmt.Sprintf(" (%.1f%% cheaper)", s.NextSavingPercent)
		}
		if s.BreaksAt >= 0 {
			b := s.Loads[s.BreaksAt]
			v.Breaks = fmt.Sprintf("%g req/s (P99 %.0f ms)", b.RequestsPerSecond, b.TTFTP99Ms)
		}
		h := s.Heaviest()
		v.Heaviest = fmt.Sprintf("%.0f ms at %g req/s", h.TTFTP99Ms, h.RequestsPerSecond)
		for i, l := range s.Loads {
			v.Loads = append(v.Loads, templates.LoadView{Rate: strconv.FormatFloat(l.RequestsPerSecond, 'f', -1, 64),
				P99: strconv.FormatFloat(l.TTFTP99Ms, 'f', 1, 64), TPS: strconv.FormatFloat(l.TokensPerSecond, 'f', 1, 64),
				Cost: modelledPrice(l.USDPerMTok), Meets: l.MeetsTarget, Spot: i == s.Spot})
		}
		out = append(out, v)
	}
	return out
}

// grams writes a mass of CO2e in grams, or in kilograms from 10 kg.
func grams(g float64) string {
	if g >= 10_000 {
		return strconv.FormatFloat(g/1000, 'f', 2, 64) + " kg"
	}
	return strconv.FormatFloat(g, 'f', 1, 64) + " g"
}
