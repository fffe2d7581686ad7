package public

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/carbon"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/hardware"
	"github.com/gpumarket/gpumarket/services/simulation"
	"github.com/gpumarket/gpumarket/templates"
)

// methodologyPage is the public page of the method behind every savings, energy and carbon
// figure. Every constant and worked figure on it is read from services/carbon,
// services/hardware and the benchmark data the platform embeds, never typed into the
// template, so the page cannot disagree with the figures it explains (docs/reports-pages.md,
// "The methodology page").
func (s *Server) methodologyPage(c echo.Context) error {
	m, err := methodology()
	if err != nil {
		return err
	}
	m.Page = s.Page(c, "Methodology")
	return s.Render(c, http.StatusOK, templates.Methodology(m))
}

// The benchmark runs the corrections are about: DeepSeek-R1-Distill-Qwen-14B on 2x RTX 4090
// at 4 requests/s (the paper's consumer figure) and on 4x at 8 requests/s.
const correctionsModel = "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B"

func methodology() (templates.MethodologyPage, error) {
	m := templates.MethodologyPage{
		MethodVersion: carbon.MethodVersion,
		PUEHome:       ratio(carbon.DefaultPUEHome), PUEDatacentre: ratio(carbon.DefaultPUEDatacentre),
		PUEMin: ratio(carbon.MinPUE), PUEMax: ratio(carbon.MaxPUE), PUESource: carbon.PUESource,
		Embodied: carbon.EmbodiedAssumptions(),
	}
	for _, g := range hardware.GPUs {
		m.GPUs = append(m.GPUs, templates.MethodGPU{SKU: g.SKU, Name: g.Name, Class: g.Class,
			BoardPowerW: strconv.Itoa(g.BoardPowerW), Source: g.Source})
	}
	for _, r := range hardware.Regions {
		m.Regions = append(m.Regions, templates.MethodRegion{Code: r.Code, Name: r.Name,
			GCO2ePerKWh: strconv.Itoa(r.GCO2ePerKWh), Year: strconv.Itoa(r.Year), Source: r.Source})
	}
	ref := carbon.ReferenceFor(correctionsModel)
	h100, _ := hardware.GPUBySKU(ref.GPU)
	m.Reference = templates.MethodReference{GPU: h100.Name, BoardPowerW: strconv.Itoa(ref.BoardPowerW),
		RequestsPerSecond: fmt.Sprintf("%g", ref.RequestsPerSec), Source: carbon.ReferenceSource, FallbackModel: correctionsModel,
		LoadSource: carbon.LoadSource}
	for _, model := range referenceModels() {
		r := carbon.ReferenceFor(model)
		m.Reference.Rows = append(m.Reference.Rows, templates.MethodReferenceRow{Model: model, GPUCount: strconv.Itoa(r.GPUCount),
			TokensPerSecond: fmt.Sprintf("%.2f", r.TokensPerSecond), JoulesPerToken: fmt.Sprintf("%.4f", r.JoulesPerToken())})
	}
	for _, p := range simulation.Profiles() {
		if p.GPU == carbon.ReferenceGPU {
			continue
		}
		c := carbon.Compare(p.Model, p.GPU, p.Count)
		if !c.Benchmarked {
			continue
		}
		m.Reference.Comparisons = append(m.Reference.Comparisons, templates.MethodComparisonRow{Model: p.Model,
			Configuration: fmt.Sprintf("%dx %s", p.Count, p.GPU), JoulesPerToken: fmt.Sprintf("%.4f", c.JoulesPerToken),
			ReferenceJoulesPerToken: fmt.Sprintf("%.4f", c.Reference.JoulesPerToken()), Factor: fmt.Sprintf("%.3f", c.Ratio)})
	}
	corr, err := corrections()
	if err != nil {
		return m, err
	}
	m.Corrections = corr
	return m, nil
}

// referenceModels are the models with a reference run of their own, in the benchmark's
// order (by name).
func referenceModels() []string {
	var out []string
	for _, p := range simulation.Profiles() {
		if p.GPU == "h100-pcie" && !carbon.ReferenceFor(p.Model).Fallback && (len(out) == 0 || out[len(out)-1] != p.Model) {
			out = append(out, p.Model)
		}
	}
	return out
}

// corrections are the two corrections to the benchmark paper, computed from its own runs:
// the H100 PCIe at its rated board power, and the two rows behind the quoted consumer price.
func corrections() (templates.MethodCorrections, error) {
	rtx, _ := hardware.GPUBySKU("rtx-4090")
	sxm, _ := hardware.GPUBySKU("h100-sxm")
	two, err := benchmarkRun(2, 4)
	if err != nil {
		return templates.MethodCorrections{}, err
	}
	four, err := benchmarkRun(4, 8)
	if err != nil {
		return templates.MethodCorrections{}, err
	}
	// The paper's enterprise figure: one H100 PCIe at 16 requests/s.
	h100, err := benchmarkLevel("h100-pcie", 1, 16)
	if err != nil {
		return templates.MethodCorrections{}, err
	}
	rated := carbon.EstimatedJoulesPerToken(carbon.ReferenceBoardPowerW, 1, h100.TotalTPS)
	consumer := carbon.EstimatedJoulesPerToken(rtx.BoardPowerW, 2, two.TotalTPS)
	paper := carbon.EstimatedJoulesPerToken(sxm.BoardPowerW, 1, h100.TotalTPS)
	equal := carbon.Compare(correctionsModel, rtx.SKU, 2)
	eu, _ := hardware.RegionByCode("eu")
	grams := func(jPerToken float64) string {
		return fmt.Sprintf("%.1f", carbon.GCO2e(carbon.PerMillionTokens(jPerToken), float64(eu.GCO2ePerKWh), carbon.DefaultPUEHome))
	}
	price, err := gpuHourPrice(rtx.SKU)
	if err != nil {
		return templates.MethodCorrections{}, err
	}
	return templates.MethodCorrections{
		Model:            correctionsModel,
		PaperBoardPowerW: strconv.Itoa(sxm.BoardPowerW), RatedBoardPowerW: strconv.Itoa(carbon.ReferenceBoardPowerW),
		ReferenceTPS:      fmt.Sprintf("%.2f", h100.TotalTPS),
		ReferenceRate:     fmt.Sprintf("%g", h100.QPS),
		AdvantageEqual:    fmt.Sprintf("%.1f", 1/equal.Ratio),
		EqualRate:         fmt.Sprintf("%g", equal.Reference.RequestsPerSec),
		ConsumerTPS:       fmt.Sprintf("%.2f", two.TotalTPS),
		ConsumerPowerW:    strconv.Itoa(2 * rtx.BoardPowerW),
		AdvantagePaper:    fmt.Sprintf("%.1f", consumer/paper),
		AdvantageRated:    fmt.Sprintf("%.1f", consumer/rated),
		GramsConsumer:     grams(consumer),
		GramsPaper:        grams(paper),
		GramsRated:        grams(rated),
		GridName:          eu.Name,
		GridGCO2ePerKWh:   strconv.Itoa(eu.GCO2ePerKWh),
		USDPerGPUHour:     fmt.Sprintf("%.2f", price),
		TwoXUSDPerMTok:    fmt.Sprintf("%.3f", catalog.USDPerMillionTokens(price, 2, two.TotalTPS)),
		TwoXRequestsPerS:  fmt.Sprintf("%g", two.QPS),
		FourXUSDPerMTok:   fmt.Sprintf("%.3f", catalog.USDPerMillionTokens(price, 4, four.TotalTPS)),
		FourXRequestsPerS: fmt.Sprintf("%g", four.QPS),
		TwoXTPS:           fmt.Sprintf("%.2f", two.TotalTPS),
		FourXTPS:          fmt.Sprintf("%.2f", four.TotalTPS),
	}, nil
}

// benchmarkRun is the first run of the corrections' model on count RTX 4090s at qps.
func benchmarkRun(count int, qps float64) (simulation.Level, error) {
	return benchmarkLevel("rtx-4090", count, qps)
}

// benchmarkLevel is the first run of the corrections' model on count GPUs of a SKU at qps.
func benchmarkLevel(gpu string, count int, qps float64) (simulation.Level, error) {
	p, ok := simulation.Lookup(correctionsModel, gpu, count)
	if ok {
		for _, l := range p.Levels {
			if l.QPS == qps && l.Run == 0 {
				return l, nil
			}
		}
	}
	return simulation.Level{}, fmt.Errorf("methodology: no benchmark run of %dx %s at %g requests/s", count, gpu, qps)
}

// gpuHourPrice is the price per GPU-hour the benchmark's costs assume for a SKU.
func gpuHourPrice(sku string) (float64, error) {
	rows, err := demo.Rows()
	if err != nil {
		return 0, err
	}
	for _, r := range rows {
		if r.GPU == sku {
			return r.USDPerHour / float64(r.GPUCount), nil
		}
	}
	return 0, fmt.Errorf("methodology: no benchmark price for %s", sku)
}

// ratio writes a PUE with the decimals it has: "1", "1.3".
func ratio(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
