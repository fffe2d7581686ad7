package carbon

import (
	"sync"

	"github.com/gpumarket/gpumarket/services/hardware"
	"github.com/gpumarket/gpumarket/services/simulation"
)

// The carbon baseline is the same traffic served by the model's reference enterprise
// configuration, the H100 PCIe at its rated 350 W, under the same assumptions as the traffic's
// own energy figure:
//
//   - the same load: energy per token falls steeply as a GPU serves more requests at once
//     (ML.ENERGY's leaderboard: an H100 serving an 8B model takes about 0.46 J per output token
//     at batch 8 and about 0.07 J at batch 512), so a figure taken at one load says little
//     against a figure taken at another. The traffic's energy is what its rig drew at the load
//     it really had; the baseline is that energy scaled by how much less (or more) the
//     reference takes per token than the rig's configuration when both serve the same model at
//     the same request rate, ReferenceRate, in the benchmark behind the platform ("Idle
//     Consumer GPUs as a Complement to Enterprise Hardware for LLM Inference", A. R. de
//     Almeida, AIBC 2025, DOI 10.1145/3775043.3775047), which ran every configuration at it;
//   - the same tokens: both per-token figures count input and output tokens, as the
//     benchmark's throughput does;
//   - the same grid and PUE as the rig's: the comparison is the hardware, not the place.
//
// Traffic served on the reference configuration is therefore its own baseline, exactly.

// ReferenceRate is the request rate, per second, at which a rig's configuration and the
// reference are compared: every configuration in the benchmark ran at 8 requests/s.
const ReferenceRate = 8

// ReferenceGPU is the reference enterprise card, a hardware SKU.
const ReferenceGPU = "h100-pcie"

// Reference is the enterprise configuration a model's baseline energy comes from.
type Reference struct {
	Model           string  `json:"model"`
	GPU             string  `json:"gpu"`
	GPUCount        int     `json:"gpu_count"`
	BoardPowerW     int     `json:"board_power_w"`
	RequestsPerSec  float64 `json:"requests_per_second"`
	TokensPerSecond float64 `json:"tokens_per_second"`
	// Fallback is true for a model the benchmark did not run: the reference is then the
	// benchmark's headline model, DeepSeek-R1-Distill-Qwen-14B.
	Fallback bool `json:"fallback"`
}

// ReferenceBoardPowerW is the H100 PCIe's rated board power (NVIDIA product brief PB-11133,
// 350 W maximum TDP). The benchmark paper used 700 W, the SXM module's figure.
const ReferenceBoardPowerW = 350

// ReferenceSource names where the throughputs come from.
const ReferenceSource = "benchmark runs at 8 requests/s (IOG-Foundation/llm-inference-benchmarks, 2025)"

// LoadSource names where the effect of load on energy per token is taken from.
const LoadSource = "ML.ENERGY Leaderboard (ml.energy): an H100 serving an 8B model, about 0.46 J per output token at batch 8 and about 0.07 J at batch 512"

const fallbackModel = "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B"

// benchmarkTPS is the benchmark's total (input plus output) tokens per second for a model on
// count GPUs of a SKU at ReferenceRate, its first run.
func benchmarkTPS(model, gpu string, count int) (float64, bool) {
	p, ok := simulation.Lookup(model, gpu, count)
	if !ok {
		return 0, false
	}
	for _, l := range p.Levels {
		if l.QPS == ReferenceRate && l.Run == 0 {
			return l.TotalTPS, true
		}
	}
	return 0, false
}

// referenceCount is how many reference cards the benchmark ran a model on, 0 when none.
func referenceCount(model string) int {
	for _, p := range simulation.Profiles() {
		if p.Model == model && p.GPU == ReferenceGPU {
			return p.Count
		}
	}
	return 0
}

// ReferenceFor is the reference enterprise configuration for a model.
func ReferenceFor(model string) Reference {
	r := Reference{Model: model, GPU: ReferenceGPU, BoardPowerW: ReferenceBoardPowerW, RequestsPerSec: ReferenceRate}
	run := model
	if r.GPUCount = referenceCount(model); r.GPUCount == 0 {
		run, r.Fallback, r.GPUCount = fallbackModel, true, referenceCount(fallbackModel)
	}
	r.TokensPerSecond, _ = benchmarkTPS(run, ReferenceGPU, r.GPUCount)
	return r
}

// JoulesPerToken is the reference's estimated energy per token at ReferenceRate.
func (r Reference) JoulesPerToken() float64 {
	return EstimatedJoulesPerToken(r.BoardPowerW, r.GPUCount, r.TokensPerSecond)
}

// Comparison is how a rig's configuration compares with its model's reference, per token, at
// the same model and request rate.
type Comparison struct {
	Reference Reference
	// JoulesPerToken is the rig's configuration's board power over its benchmark throughput at
	// ReferenceRate.
	JoulesPerToken float64
	// Ratio is the reference's energy per token over the rig's: what the rig's energy is
	// multiplied by to make the baseline.
	Ratio float64
	// Benchmarked is false for a configuration the benchmark did not run for the model: its
	// throughput is then taken as the reference's, so that only board power tells them apart.
	Benchmarked bool
}

// comparisons caches Compare: a report compares every group it sums, and the benchmark's
// table does not change while the process runs.
var comparisons sync.Map // comparisonKey -> Comparison

type comparisonKey struct {
	model, gpu string
	count      int
}

// Compare compares count GPUs of a SKU serving a model with the model's reference. A model
// the benchmark did not run is compared as the fallback model, on both sides.
func Compare(model, gpu string, count int) Comparison {
	k := comparisonKey{model, gpu, count}
	if c, ok := comparisons.Load(k); ok {
		return c.(Comparison)
	}
	c := compare(model, gpu, count)
	comparisons.Store(k, c)
	return c
}

func compare(model, gpu string, count int) Comparison {
	ref := ReferenceFor(model)
	run := model
	if ref.Fallback {
		run = fallbackModel
	}
	c := Comparison{Reference: ref}
	tps, ok := benchmarkTPS(run, gpu, count)
	c.Benchmarked = ok
	if !ok {
		tps = ref.TokensPerSecond
	}
	g, known := hardware.GPUBySKU(gpu)
	if !known || count <= 0 {
		// Nothing to tell the rig from the reference by: it is its own baseline.
		c.JoulesPerToken, c.Ratio = ref.JoulesPerToken(), 1
		return c
	}
	c.JoulesPerToken = EstimatedJoulesPerToken(g.BoardPowerW, count, tps)
	if gpu == ReferenceGPU && count == ref.GPUCount {
		c.Ratio = 1
	} else if c.JoulesPerToken > 0 {
		c.Ratio = ref.JoulesPerToken() / c.JoulesPerToken
	}
	return c
}

// BaselineJoules is the baseline of traffic that took joules on count GPUs of a SKU serving a
// model: the same traffic at the same load on the model's reference configuration.
func BaselineJoules(joules float64, model, gpu string, count int) float64 {
	return joules * Compare(model, gpu, count).Ratio
}
