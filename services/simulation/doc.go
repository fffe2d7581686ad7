// Package simulation owns simulated inference: GPU profiles built from the public benchmark, the
// latency model drawn from them, and an OpenAI-compatible server (Handler) that behaves like a
// profile, and with Options.Native also the Anthropic Messages API and OpenAI's Responses API.
// cmd/simbackend serves it; tests elsewhere can serve it in-process.
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
//
// # Native APIs
//
// With Options.Native (simbackend -native) the server also serves the Anthropic Messages API,
// POST /v1/messages, and OpenAI's Responses API, POST /v1/responses, as vLLM serves them beside
// chat completions; without it those paths are 404 as any unknown path. A native request is read
// as the chat it stands for and planned by the chat path itself, so the same conversation gets
// the same latency, prompt tokens, cached tokens, text and tool call on every API. Only the
// encoding differs, and what a token limit does: the native APIs' clients send one with nearly
// every request, as a bound (Anthropic's max_tokens is required), so there it caps the answer's
// drawn length instead of setting it, as a real engine takes it. An answer the limit cuts is
// the chat answer with that limit, token for token; one it does not cut is the chat answer
// without a limit. Stop sequences are ignored on every API.
//
// A Messages request's system prompt is a system message; a message's text blocks its content;
// an assistant's tool_use blocks its tool calls; a user's tool_result blocks tool messages,
// before its text; its tools are function tools; tool_choice auto, any, tool (with its name) and
// none are chat's auto, required, the named function and none. max_tokens is required. The
// answer is a Message with one block: text, or a tool_use block with the call (id "toolu_<hex>",
// input the placeholder arguments, {} when max_tokens cut them short of an object); stop_reason
// is end_turn, max_tokens or tool_use. Its usage counts the prompt as Anthropic does:
// input_tokens are the prompt's tokens less cache_read_input_tokens, those the prefix cache
// served; cache_creation_input_tokens is 0. Streamed, it is message_start (usage with
// output_tokens 0) and a ping, content_block_start, a content_block_delta (text_delta or
// input_json_delta) per frame of tokens, content_block_stop, message_delta with the stop reason
// and the whole usage, and message_stop, each with its event line. Its errors are Anthropic's:
// {"type": "error", "error": {"type", "message"}}.
//
// A Responses request is stateless: store may be true or false, the answer says false, and
// previous_response_id is refused with 400, since nothing is kept. instructions are a system
// message, a string input a user message, input items messages (developer as system, content a
// string or input_text and output_text parts), function_call items an assistant's tool calls
// (following an assistant message or one another, one assistant turn), function_call_output
// items tool messages; function tools are chat's tools, tool_choice none, auto, required or
// {"type": "function", "name": ...}; max_output_tokens is the limit. The answer is a Response
// with one output item: a message with an output_text part, or a function_call (call_id
// "call_<hex>", the placeholder arguments). It is "completed", or "incomplete" with
// incomplete_details.reason "max_output_tokens" when the limit cut it, its item then
// "incomplete" too. Its usage counts the prompt as OpenAI does: input_tokens include
// input_tokens_details.cached_tokens. Streamed, it is OpenAI's semantic events, each with its
// event line and a sequence_number from 0: response.created, response.in_progress,
// response.output_item.added, for a message response.content_part.added, a
// response.output_text.delta per frame, response.output_text.done and response.content_part.done,
// for a call a response.function_call_arguments.delta per frame and
// response.function_call_arguments.done, then response.output_item.done and response.completed
// (response.incomplete when cut) with the whole Response. Its errors are OpenAI's.
//
// Both streams send their first event with the first token, as a chat stream sends its first
// chunk: the time to first token is the same on every API.
package simulation
