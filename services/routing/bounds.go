package routing

// The bounds a route ticket puts on a request's billable tokens (see docs/gateway-integrity.md): the meter bills no
// more than them, whatever a rig reports, so a rig cannot charge ten million tokens for a request that asked for one.

const (
	// InputAllowance is what the input bound adds to the size of the forwarded body: the tokens a model's chat
	// template adds around the messages (role markers, a default system prompt) that the body's bytes do not hold.
	// For the byte-level tokenizers served here a token is at least one byte, so the body's size in bytes bounds the
	// tokens of the text it carries.
	InputAllowance = 512
	// DefaultOutputLimit bounds one choice's output on a model the platform knows no limit for: the largest context
	// window among the models it serves.
	DefaultOutputLimit = 131_072
	// MaxChoices is the most choices (n) a request may ask for.
	MaxChoices = 128
)

// contextWindows are the context windows of the models the platform serves, in tokens: no choice can produce more
// output than its model's window holds.
var contextWindows = map[string]int64{
	"Qwen/QwQ-32B-Preview":                                       32_768,
	"deepseek-ai/DeepSeek-R1-Distill-Llama-70B":                  131_072,
	"deepseek-ai/DeepSeek-R1-Distill-Llama-8B":                   131_072,
	"deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B":                  131_072,
	"deepseek-ai/DeepSeek-R1-Distill-Qwen-14B":                   131_072,
	"deepseek-ai/DeepSeek-R1-Distill-Qwen-32B":                   131_072,
	"deepseek-ai/DeepSeek-R1-Distill-Qwen-7B":                    131_072,
	"google/gemma-2-9b-it":                                       8_192,
	"meta-llama/Meta-Llama-3-70B-Instruct":                       8_192,
	"meta-llama/Meta-Llama-3-8B-Instruct":                        8_192,
	"microsoft/phi-4":                                            16_384,
	"neuralmagic/Llama-3.1-Nemotron-70B-Instruct-HF-FP8-dynamic": 131_072,
	"nvidia/AceMath-7B-Instruct":                                 32_768,
}

// OutputLimit is the most output tokens one choice of a request to the model can produce.
func OutputLimit(model string) int64 {
	if n, ok := contextWindows[model]; ok {
		return n
	}
	return DefaultOutputLimit
}

// Bounds are a request's bounds on billable tokens.
type Bounds struct {
	MaxInputTokens  int64
	MaxOutputTokens int64
}

// BoundsFor bounds a request to model whose forwarded body is bodyBytes long: the input by the body's size plus
// InputAllowance; the output by maxTokens (the request's max_completion_tokens or max_tokens, nil when it set
// none, when its model's OutputLimit applies) times its choices; no output at all for a request that makes none
// (an embedding).
func BoundsFor(model string, bodyBytes int, maxTokens *int64, choices int64, makesOutput bool) Bounds {
	b := Bounds{MaxInputTokens: int64(bodyBytes) + InputAllowance}
	if !makesOutput {
		return b
	}
	per := OutputLimit(model)
	if maxTokens != nil {
		per = min(*maxTokens, per)
	}
	b.MaxOutputTokens = per * min(max(choices, 1), MaxChoices)
	return b
}
