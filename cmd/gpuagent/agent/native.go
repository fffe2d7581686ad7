package agent

import (
	"bytes"
	"cmp"
	"encoding/json"

	eventstream "github.com/gpumarket/gpumarket/services/sse" // named apart from the tests' sse, which writes streams
	"github.com/gpumarket/gpumarket/services/usage"
)

// The Anthropic Messages and OpenAI Responses wire formats, as much of them as the agent reads: where their answers
// name the model and count the tokens, and which events of their streams carry output, usage, a failure or the end.
// Everything else passes through untouched, as with the OpenAI format (openai.go).

// dialect is the wire format of an endpoint's answers: it says where their usage is and how their streams end.
type dialect int

const (
	dialectOpenAI    dialect = iota // chat and text completions, embeddings: usage's prompt_tokens and completion_tokens
	dialectMessages                 // Anthropic Messages, POST /v1/messages
	dialectResponses                // OpenAI Responses, POST /v1/responses
)

// usageOf decodes a usage object as the dialect writes it into the OpenAI form the report reads; nil when there
// is none (absent, null, or not an object of that form).
func (d dialect) usageOf(raw []byte) *tokenUsage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	switch d {
	case dialectMessages:
		var u messagesUsage
		if json.Unmarshal(raw, &u) != nil {
			return nil
		}
		return u.tokens(0)
	case dialectResponses:
		var u responsesUsage
		if json.Unmarshal(raw, &u) != nil {
			return nil
		}
		return u.tokens()
	default:
		var u tokenUsage
		if json.Unmarshal(raw, &u) != nil {
			return nil
		}
		return &u
	}
}

// messagesUsage is the usage object of a Messages answer, of its stream's message_start (under message) and of its
// message_delta events. Anthropic's input_tokens leaves out the prompt tokens read from the cache
// (cache_read_input_tokens) and those written to it (cache_creation_input_tokens): the prompt is all three. A field
// is nil when absent, so that a message_delta replaces only the figures it carries.
type messagesUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
}

// merge takes the figures later carries, keeping the others.
func (u *messagesUsage) merge(later *messagesUsage) {
	u.InputTokens = cmp.Or(later.InputTokens, u.InputTokens)
	u.CacheReadInputTokens = cmp.Or(later.CacheReadInputTokens, u.CacheReadInputTokens)
	u.CacheCreationInputTokens = cmp.Or(later.CacheCreationInputTokens, u.CacheCreationInputTokens)
	u.OutputTokens = cmp.Or(later.OutputTokens, u.OutputTokens)
}

// tokens is the usage in the OpenAI form: the prompt is the three input figures, of which the cache reads are
// cached; the output is output_tokens, or streamed when the answer gave none. Each input figure is bounded before
// they are added, so that no figure a rig sends can overflow the sum or make another count less; the report
// bounds the sum as it bounds chat's.
func (u *messagesUsage) tokens(streamed int64) *tokenUsage {
	read := boundedTokens(u.CacheReadInputTokens)
	t := &tokenUsage{
		PromptTokens:        boundedTokens(u.InputTokens) + read + boundedTokens(u.CacheCreationInputTokens),
		CompletionTokens:    streamed,
		PromptTokensDetails: &cachedDetails{CachedTokens: read},
	}
	if u.OutputTokens != nil {
		t.CompletionTokens = *u.OutputTokens
	}
	return t
}

// boundedTokens is a figure within [0, usage.MaxTokens], 0 when absent.
func boundedTokens(n *int64) int64 {
	if n == nil {
		return 0
	}
	return min(max(*n, 0), usage.MaxTokens)
}

// responsesUsage is the usage object of a Responses answer, whole or in a stream's response.completed,
// response.incomplete or response.failed. Unlike Anthropic's, its input_tokens include the cached ones.
type responsesUsage struct {
	InputTokens        int64          `json:"input_tokens"`
	InputTokensDetails *cachedDetails `json:"input_tokens_details"`
	OutputTokens       int64          `json:"output_tokens"`
}

// tokens is the usage in the OpenAI form, figure for figure.
func (u *responsesUsage) tokens() *tokenUsage {
	return &tokenUsage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, PromptTokensDetails: u.InputTokensDetails}
}

// nativeEvent is what the agent reads of one event of a Messages or a Responses stream. Both name the event in
// their data's type as in its event line.
type nativeEvent struct {
	Type    string `json:"type"`
	Message *struct {
		Model string         `json:"model"`
		Usage *messagesUsage `json:"usage"`
	} `json:"message"` // message_start
	Usage    *messagesUsage `json:"usage"` // message_delta
	Response *struct {
		Model string          `json:"model"`
		Usage *responsesUsage `json:"usage"`
	} `json:"response"` // response.created, response.in_progress, and the three that end a stream
}

// readNativeFrame reads one event of a Messages or Responses stream into x: the model, the usage, whether it
// carried output, whether the upstream says the request failed (then x's status is error), and whether it is the
// event that ends the stream (last).
func (a *Agent) readNativeFrame(frame eventstream.Frame, x *exchange) (output, last bool) {
	var ev nativeEvent
	if payload := frame.Payload(); payload != nil {
		_ = json.Unmarshal(payload, &ev)
	}
	name := ev.Type
	if name == "" {
		name = string(frame.Event())
	}
	failed := false
	switch x.dialect {
	case dialectMessages:
		switch name {
		case "message_start":
			if ev.Message == nil {
				break
			}
			x.model = cmp.Or(ev.Message.Model, x.model)
			if ev.Message.Usage != nil {
				// message_start's output_tokens are those of the message's start (Anthropic says 1), not its
				// count: that comes with message_delta, or else the streamed deltas count.
				start := *ev.Message.Usage
				start.OutputTokens = nil
				x.messages = &start
			}
		case "content_block_delta":
			output = true
		case "message_delta":
			if ev.Usage != nil {
				if x.messages == nil {
					x.messages = &messagesUsage{}
				}
				x.messages.merge(ev.Usage)
			}
		case "message_stop":
			last = true
		case "error":
			failed = true
		}
	case dialectResponses:
		if ev.Response != nil {
			x.model = cmp.Or(ev.Response.Model, x.model)
			if ev.Response.Usage != nil {
				x.usage = ev.Response.Usage.tokens()
			}
		}
		switch name {
		case "response.output_text.delta", "response.refusal.delta", "response.function_call_arguments.delta",
			"response.reasoning_text.delta":
			output = true
		case "response.completed", "response.incomplete":
			last = true
		case "response.failed":
			failed, last = true, true
		case "error":
			failed = true
		}
	}
	if failed {
		x.status = usage.StatusError
		a.log.Warn("inference stream reported an error", "upstream", a.upstream, "event", name)
	}
	if output {
		x.contentChunks++
	}
	return output, last
}
