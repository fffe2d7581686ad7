// Package simulation owns simulated inference: GPU profiles built from the public benchmark, the
// latency model drawn from them, and an OpenAI-compatible server (Handler) that behaves like a
// profile. cmd/simbackend serves it; tests elsewhere can serve it in-process.
//
// # Profiles
//
// profiles.csv is the project's own table of every run (130) of the benchmark behind "Idle
// Consumer GPUs as a Complement to Enterprise Hardware for LLM Inference" (A. R. de Almeida,
// AIBC 2025, DOI 10.1145/3775043.3775047; raw results IOG-Foundation/llm-inference-benchmarks):
// vLLM, 200 ShareGPT prompts per run at a Poisson rate of 1 to 32 requests/s. It holds exactly
// the figures the model uses. A Profile is one (model, GPU, count) with its runs as load Levels;
// Zero is the profile without latency, for measuring the overhead of what sits in front of it.
//
// # The latency model
//
// Each level is placed at its concurrency by Little's law: the mean number of requests in
// flight is the completion rate (req_s) times the mean request duration, and that duration is
// the mean time to first token plus the mean output length times the mean time per output
// token, each mean taken over the distribution below. A request that arrives when c requests
// (itself included) are in flight gets the figures of the levels just below and above c,
// interpolated linearly in c, in the logarithm of each latency; below the lowest level or above
// the highest, that level's figures (the model does not extrapolate past saturation). Some runs
// at a low rate measured more latency than runs at a higher concurrency of the same rig (the
// multi-GPU RTX 4090 rigs at 1 request/s waited seconds for a first token, longer than at 8
// requests/s); since less load should not be slower, each latency figure of a level is replaced
// by the lowest that any level at equal or higher concurrency measured. Latencies thus never
// fall as concurrency rises.
//
// The time to first token is drawn from a distribution that matches the level's p50, p90 and
// p99 exactly: its quantile function is piecewise linear in the logarithm between those three
// points, continued below the median with the slope from p50 to p90 and above p99 with the
// slope from p90 to p99 (so its lowest value is p50·(p50/p90)^1.25 and its highest
// p99·(p99/p90)^(1/9)). The time per output token is drawn once per request the same way from
// its p50 and p99, the slope between them continued at both ends, and separates every two
// tokens of that request. Draws come from a PCG generator seeded by the server's seed, so a
// sequence of requests draws the same latencies run after run.
//
// # Text and tokens
//
// Tokens are counted by CountTokens: a run of letters and digits, or any other rune that is
// not white space. A prompt's tokens are those of each message's role and content. An answer is
// as long as the request's max_completion_tokens or max_tokens (finish reason "length"), else
// a length drawn uniformly between half and one and a half times the profile's mean output
// (finish reason "stop"). Its text comes from a word generator seeded by the server's seed,
// the model and the prompt, so the same prompt always gets the same text, and a limited answer
// is a prefix of the unlimited one. Embeddings are unit vectors seeded the same way by their
// input. The calls an assistant message carries count as its content: each call's function name
// and arguments. Tool definitions do not count.
//
// # Tool calls
//
// A chat request whose tools array is not empty, whose tool_choice is not "none" and whose last
// message is not a tool's result (role "tool") is answered with one call of a function instead
// of text: the function tool_choice names when it is {"type": "function", "function": {"name":
// ...}}, else the first tool. The answer's message is {"role": "assistant", "content": null,
// "tool_calls": [{"id": "call_<hex>", "type": "function", "function": {"name", "arguments"}}]}
// with finish reason "tool_calls". The arguments are a JSON object, written without white
// space, that gives each property the tool's parameters schema lists as required, in that
// order, a placeholder by its type: "example" for a string, 1 for a number or an integer, true
// for a boolean, [] for an array, {} for an object, null for a property without a type; {}
// when none is required. They are the answer's output: its completion tokens are their tokens
// by CountTokens, and a max_completion_tokens or max_tokens below that cuts them at the limit,
// finishing for "length". Streamed, the call comes as OpenAI streams it: a first chunk with the
// role, a null content and the call's index 0, id, type, name and empty arguments, then the
// arguments in pieces on the profile's schedule, then a chunk with finish reason "tool_calls"
// (and the usage chunk when asked for). A request whose last message is a tool's result is
// answered with text, as a model answers once it has what it called for; so is one whose
// tool_choice is "none". Only function tools are served: a tool of another type, a
// tool_choice that names a function not among the tools, or one that asks for a call without
// tools, is refused with 400.
package simulation
