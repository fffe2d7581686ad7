package planner

import (
	"fmt"
	"slices"

	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/simulation"
)

// The benchmark's sweet spots: for each GPU configuration it measured, the load (offered
// requests per second) to run it at. docs/planner-and-carbon-routing.md states the rule and
// why; SweetSpotOf is it.

// BenchmarkModel is the model the benchmark's headline figures are of, and the planner's default.
const BenchmarkModel = "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B"

// USDPerGPUHour is the hourly price of a GPU that the benchmark's cost figures assume: $2.00 for
// an H100 and $0.25 for an RTX 4090. These are the paper's assumptions, not the platform's
// prices, and the cost per million tokens they give is an estimate (float64), never billed.
var USDPerGPUHour = map[string]float64{"h100-pcie": 2.00, "rtx-4090": 0.25}

// MinStepSavingPercent is how much cheaper per million tokens the next heavier load must be for
// the sweet spot to move up to it. Below it, more load buys little and costs latency headroom.
const MinStepSavingPercent = 20

// Load is one offered rate of a configuration, over all its runs.
type Load struct {
	RequestsPerSecond float64 `json:"requests_per_second"`
	Runs              int     `json:"runs"`
	// TTFTP99Ms is the worst P99 time to first token of the runs: a promise must hold on each.
	TTFTP99Ms float64 `json:"ttft_p99_ms"`
	// TokensPerSecond is the mean throughput (input plus output) of the runs.
	TokensPerSecond float64 `json:"tokens_per_second"`
	// USDPerMTok is the paper's cost formula (catalog.USDPerMillionTokens) at TokensPerSecond.
	USDPerMTok float64 `json:"usd_per_million_tokens"`
	// MeetsTarget says whether TTFTP99Ms is within the target (always, without one).
	MeetsTarget bool `json:"meets_target"`
}

// Stop says why the sweet spot is not at the next heavier load.
type Stop string

const (
	StopHeaviest    Stop = "heaviest"     // no heavier load was measured
	StopOverTarget  Stop = "over_target"  // the next load's P99 is over the target
	StopSmallSaving Stop = "small_saving" // the next load saves less than MinStepSavingPercent
	StopNone        Stop = "none"         // no load meets the target: there is no sweet spot
)

// SweetSpot is a configuration's loads and the one to run it at.
type SweetSpot struct {
	Model         string  `json:"model"`
	GPU           string  `json:"gpu"`
	GPUCount      int     `json:"gpu_count"`
	USDPerGPUHour float64 `json:"usd_per_gpu_hour"`
	Loads         []Load  `json:"loads"`
	// Spot indexes Loads; -1 when no load meets the target.
	Spot int  `json:"spot"`
	Stop Stop `json:"stop"`
	// NextSavingPercent is what the next heavier load would have saved, when it was measured.
	NextSavingPercent float64 `json:"next_saving_percent,omitempty"`
	// BreaksAt indexes Loads: the lightest load above the spot whose P99 is over the target; -1
	// when every heavier load meets it or there is no target.
	BreaksAt int `json:"breaks_at"`
}

// At is the sweet spot's load; false when there is none.
func (s SweetSpot) At() (Load, bool) {
	if s.Spot < 0 {
		return Load{}, false
	}
	return s.Loads[s.Spot], true
}

// Heaviest is the highest load measured, where a configuration shows whether it saturates.
func (s SweetSpot) Heaviest() Load { return s.Loads[len(s.Loads)-1] }

// Name is the configuration as the page shows it, e.g. "2x rtx-4090".
func (s SweetSpot) Name() string { return fmt.Sprintf("%dx %s", s.GPUCount, s.GPU) }

// LoadsOf folds a profile's runs into one Load per offered rate, in order of rate, judged
// against the target P99 time to first token (0: no target).
func LoadsOf(p simulation.Profile, usdPerGPUHour, targetMs float64) []Load {
	var out []Load
	for _, l := range p.Levels {
		n := len(out)
		if n == 0 || out[n-1].RequestsPerSecond != l.QPS {
			out = append(out, Load{RequestsPerSecond: l.QPS})
			n++
		}
		ld := &out[n-1]
		ld.TTFTP99Ms = max(ld.TTFTP99Ms, l.TTFTP99Ms)
		ld.TokensPerSecond = (ld.TokensPerSecond*float64(ld.Runs) + l.TotalTPS) / float64(ld.Runs+1)
		ld.Runs++
	}
	for i := range out {
		out[i].USDPerMTok = catalog.USDPerMillionTokens(usdPerGPUHour, p.Count, out[i].TokensPerSecond)
		out[i].MeetsTarget = targetMs <= 0 || out[i].TTFTP99Ms <= targetMs
	}
	return out
}

// SweetSpotOf applies the rule to a configuration's loads, in order of rate: start at the
// lightest load that meets the target; move up to the next heavier load while that load meets
// the target too and costs at least MinStepSavingPercent less per million tokens; stop at the
// first that does not. Past the knee of its cost curve, a configuration gains little from more
// load and loses the headroom that keeps its P99 in bounds.
func SweetSpotOf(loads []Load) (spot int, stop Stop, nextSaving float64, breaksAt int) {
	spot, breaksAt = slices.IndexFunc(loads, func(l Load) bool { return l.MeetsTarget }), -1
	if spot < 0 {
		return -1, StopNone, 0, -1
	}
	stop = StopHeaviest
	for spot+1 < len(loads) {
		next := loads[spot+1]
		nextSaving = 100 * (1 - next.USDPerMTok/loads[spot].USDPerMTok)
		if !next.MeetsTarget {
			stop = StopOverTarget
			break
		}
		// Compared as a product, not as the rounded percentage: a step of exactly 20% is taken.
		if next.USDPerMTok*100 > loads[spot].USDPerMTok*(100-MinStepSavingPercent) {
			stop = StopSmallSaving
			break
		}
		spot++
	}
	if stop == StopHeaviest {
		nextSaving = 0
	}
	for i := spot + 1; i < len(loads); i++ {
		if !loads[i].MeetsTarget {
			breaksAt = i
			break
		}
	}
	return spot, stop, nextSaving, breaksAt
}

// SweetSpots is the sweet spot of every configuration the benchmark ran the model on whose GPU
// has a price in USDPerGPUHour, H100 first then by GPU count, against the target P99 time to
// first token in milliseconds (0: no target).
func SweetSpots(model string, targetMs float64) []SweetSpot {
	var out []SweetSpot
	for _, p := range simulation.Profiles() {
		price, ok := USDPerGPUHour[p.GPU]
		if p.Model != model || !ok {
			continue
		}
		s := SweetSpot{Model: p.Model, GPU: p.GPU, GPUCount: p.Count, USDPerGPUHour: price, Loads: LoadsOf(p, price, targetMs)}
		s.Spot, s.Stop, s.NextSavingPercent, s.BreaksAt = SweetSpotOf(s.Loads)
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b SweetSpot) int {
		if (a.GPU == "h100-pcie") != (b.GPU == "h100-pcie") {
			if a.GPU == "h100-pcie" {
				return -1
			}
			return 1
		}
		return a.GPUCount - b.GPUCount
	})
	return out
}

// BenchmarkModels lists the models the benchmark ran, for the page's choice.
func BenchmarkModels() []string {
	var out []string
	for _, p := range simulation.Profiles() {
		if !slices.Contains(out, p.Model) {
			out = append(out, p.Model)
		}
	}
	slices.Sort(out)
	return out
}
