package carbon

// The baseline of a carbon report is the same tokens served by the reference enterprise
// configuration for their model: the H100 PCIe, at its rated 350 W, serving at the load where
// the benchmark behind the platform ("Idle Consumer GPUs as a Complement to Enterprise
// Hardware for LLM Inference", A. R. de Almeida, AIBC 2025, DOI 10.1145/3775043.3775047)
// found its sweet spot, 16 requests per second, with that run's measured total tokens per
// second. Its energy is estimated from board power, as the benchmark measured no power.

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

// ReferenceSource names where the references' throughputs come from.
const ReferenceSource = "benchmark run at 16 requests/s on H100 PCIe (IOG-Foundation/llm-inference-benchmarks, 2025)"

// references are the benchmark's H100 PCIe runs at 16 requests/s (run 0), one per model.
var references = map[string]Reference{
	"Qwen/QwQ-32B-Preview":                                       {GPUCount: 1, TokensPerSecond: 1766.2},
	"deepseek-ai/DeepSeek-R1-Distill-Llama-70B":                  {GPUCount: 2, TokensPerSecond: 945.31},
	"deepseek-ai/DeepSeek-R1-Distill-Llama-8B":                   {GPUCount: 1, TokensPerSecond: 4225.61},
	"deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B":                  {GPUCount: 1, TokensPerSecond: 5924.98},
	"deepseek-ai/DeepSeek-R1-Distill-Qwen-14B":                   {GPUCount: 1, TokensPerSecond: 3011.13},
	"deepseek-ai/DeepSeek-R1-Distill-Qwen-32B":                   {GPUCount: 1, TokensPerSecond: 1855.62},
	"deepseek-ai/DeepSeek-R1-Distill-Qwen-7B":                    {GPUCount: 1, TokensPerSecond: 4461.08},
	"google/gemma-2-9b-it":                                       {GPUCount: 1, TokensPerSecond: 3381.59},
	"meta-llama/Meta-Llama-3-70B-Instruct":                       {GPUCount: 2, TokensPerSecond: 1187.02},
	"meta-llama/Meta-Llama-3-8B-Instruct":                        {GPUCount: 1, TokensPerSecond: 4145.92},
	"microsoft/phi-4":                                            {GPUCount: 1, TokensPerSecond: 2502.72},
	"neuralmagic/Llama-3.1-Nemotron-70B-Instruct-HF-FP8-dynamic": {GPUCount: 2, TokensPerSecond: 1999.73},
	"nvidia/AceMath-7B-Instruct":                                 {GPUCount: 1, TokensPerSecond: 4437.61},
}

const fallbackModel = "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B"

// ReferenceFor is the reference enterprise configuration for a model.
func ReferenceFor(model string) Reference {
	r, ok := references[model]
	if !ok {
		r = references[fallbackModel]
		r.Fallback = true
	}
	r.Model, r.GPU, r.BoardPowerW, r.RequestsPerSec = model, "h100-pcie", ReferenceBoardPowerW, 16
	return r
}

// JoulesPerToken is the reference's estimated energy per token.
func (r Reference) JoulesPerToken() float64 {
	return EstimatedJoulesPerToken(r.BoardPowerW, r.GPUCount, r.TokensPerSecond)
}
