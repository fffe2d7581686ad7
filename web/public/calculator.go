package public

import (
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// calculatorInput is the calculator's question.
type calculatorInput struct {
	USDPerGPUHour   float64
	GPUCount        int
	TokensPerSecond float64
	GPU             *catalog.GPU
	Region          *catalog.Region
	P99Ms           float64
}

func readCalculator(get func(string) string) (calculatorInput, error) {
	var in calculatorInput
	fe := services.FieldErrors{}
	num := func(name, problem string) float64 {
		v, err := strconv.ParseFloat(strings.TrimSpace(get(name)), 64)
		if err != nil || v <= 0 || v > 1e9 {
			fe.Add(name, problem)
		}
		return v
	}
	in.USDPerGPUHour = num("usd_per_gpu_hour", "Enter the price of one GPU-hour in dollars, like 0.25.")
	count := num("gpu_count", "Enter how many GPUs, from 1 to 8.")
	if count != float64(int(count)) || count < 1 || count > 8 {
		fe.Add("gpu_count", "Enter how many GPUs, from 1 to 8.")
	}
	in.GPUCount = int(count)
	in.TokensPerSecond = num("tokens_per_second", "Enter the measured tokens per second (input + output), like 1858.57.")
	if sku := get("gpu"); sku != "" {
		g, ok := catalog.GPUBySKU(sku)
		if !ok {
			fe.Add("gpu", "Choose a GPU model from the list.")
		}
		in.GPU = &g
	}
	if code := get("region"); code != "" {
		r, ok := catalog.RegionByCode(code)
		if !ok {
			fe.Add("region", "Choose a region from the list.")
		}
		in.Region = &r
	}
	if v := strings.TrimSpace(get("p99_ms")); v != "" {
		in.P99Ms = num("p99_ms", "Enter a P99 target in milliseconds, like 500.")
	}
	return in, fe.Err()
}

// calculatorAnswer is the calculator's JSON answer.
type calculatorAnswer struct {
	USDPerMillionTokens float64            `json:"usd_per_million_tokens"`
	USDPerHour          float64            `json:"usd_per_hour"`
	Footprint           *catalog.Footprint `json:"footprint_estimate,omitempty"`
	Cheapest            *core.OfferingJSON `json:"cheapest_offering,omitempty"`
}

func (s *Server) calculate(c echo.Context, in calculatorInput) (calculatorAnswer, *catalog.Offering, error) {
	a := calculatorAnswer{
		USDPerMillionTokens: catalog.USDPerMillionTokens(in.USDPerGPUHour, in.GPUCount, in.TokensPerSecond),
		USDPerHour:          in.USDPerGPUHour * float64(in.GPUCount),
	}
	if in.GPU != nil && in.Region != nil {
		f := catalog.EstimateFootprint(*in.GPU, in.GPUCount, in.TokensPerSecond, *in.Region)
		a.Footprint = &f
	}
	if in.P99Ms <= 0 {
		return a, nil, nil
	}
	ctx := c.Request().Context()
	list, err := s.catalog.List(ctx, catalog.ListInput{MaxP99Ms: in.P99Ms, Sort: catalog.SortPrice})
	if err != nil || len(list) == 0 {
		return a, nil, err
	}
	prices, err := s.catalog.CurrentModelPrices(ctx, list[0].Model)
	if err != nil {
		return a, nil, err
	}
	j := core.OfferingToJSON(list[0], prices, false)
	a.Cheapest = &j
	return a, &list[0], nil
}

func (s *Server) apiCalculator(c echo.Context) error {
	in, err := readCalculator(c.QueryParam)
	if err != nil {
		return err
	}
	a, _, err := s.calculate(c, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, a)
}

func (s *Server) calculatorPage(c echo.Context) error {
	p := templates.CalculatorPage{Page: s.Page(c, "Calculator"), GPUs: append([]templates.Option{{Value: "", Label: "—"}}, core.GPUOptions()...),
		Regions: append([]templates.Option{{Value: "", Label: "—"}}, core.RegionOptions()...)}
	q := c.QueryParams()
	p.Form.Values = map[string]string{}
	for _, k := range []string{"usd_per_gpu_hour", "gpu_count", "tokens_per_second", "gpu", "region", "p99_ms"} {
		p.Form.Values[k] = q.Get(k)
	}
	if q.Get("usd_per_gpu_hour") == "" && q.Get("tokens_per_second") == "" {
		// A worked example: 4x RTX 4090 serving the 14B model at 16 requests/s in the benchmark.
		p.Form.Values = map[string]string{"usd_per_gpu_hour": "0.25", "gpu_count": "4", "tokens_per_second": "1994.82",
			"gpu": "rtx-4090", "region": "eu", "p99_ms": "500"}
		return s.Render(c, http.StatusOK, templates.Calculator(p))
	}
	in, err := readCalculator(q.Get)
	if err != nil {
		return s.FormError(c, err, func(f templates.Form) error {
			f.Values = p.Form.Values
			p.Form = f
			return s.Render(c, http.StatusUnprocessableEntity, templates.Calculator(p))
		})
	}
	a, cheapest, err := s.calculate(c, in)
	if err != nil {
		return err
	}
	r := &templates.CalculatorResult{
		USDPerMTok: modelledPrice(a.USDPerMillionTokens),
		Exact:      strconv.FormatFloat(a.USDPerMillionTokens, 'f', -1, 64),
	}
	if a.Footprint != nil {
		r.EnergyKWh = strconv.FormatFloat(a.Footprint.KWhPerMTok, 'f', 4, 64)
		r.CarbonG = strconv.FormatFloat(a.Footprint.GCO2ePerMTok, 'f', 1, 64)
	}
	if in.P99Ms > 0 {
		r.P99Target = strconv.FormatFloat(in.P99Ms, 'f', -1, 64)
		if cheapest != nil {
			row := core.OfferingRow(*cheapest)
			r.Cheapest = &row
		}
	}
	p.Result = r
	return s.Render(c, http.StatusOK, templates.Calculator(p))
}

// modelledPrice writes a modelled price per million tokens (the calculator's and the planner's,
// worked out from the benchmark's figures in floating point) as every price is written: rounded
// to the micro-dollar, by money's one formatter ("$0.13925").
func modelledPrice(usdPerMTok float64) string {
	return money.FormatPrice(money.MicroUSD(math.Round(usdPerMTok * 1e6)))
}
