package dialect

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/web/gateway/internal/wire"
	"github.com/gpumarket/gpumarket/web/internal/httperr"
)

// The Anthropic Messages API (POST /v1/messages and /v1/messages/count_tokens), served by translation to and from
// chat completions (dialect.go). See docs/gateway.md, "Anthropic Messages".

// Anthropic is the Messages API.
type Anthropic struct{}

var _ Dialect = Anthropic{}

// anthropicRequest is a Messages request, as the gateway reads it.
type anthropicRequest struct {
	Model         json.RawMessage    `json:"model"`
	Messages      []anthropicMessage `json:"messages"`
	System        json.RawMessage    `json:"system"`
	MaxTokens     json.RawMessage    `json:"max_tokens"`
	StopSequences []string           `json:"stop_sequences"`
	Stream        json.RawMessage    `json:"stream"`
	Temperature   json.RawMessage    `json:"temperature"`
	TopP          json.RawMessage    `json:"top_p"`
	TopK          json.RawMessage    `json:"top_k"`
	Tools         []anthropicTool    `json:"tools"`
	ToolChoice    *anthropicChoice   `json:"tool_choice"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// anthropicBlock is a content block of a request: text, tool_use (an assistant's), tool_result (a user's), or one
// the gateway refuses or drops.
type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

type anthropicTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type anthropicChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
}

// anthropicMembers are the top-level members of a Messages request the gateway reads (anthropicRequest), passes on
// untouched (the gateway's own gpumarket object, and provider), or takes and ignores: Anthropic's own settings that
// an open-weight model behind chat completions has no counterpart for. Any other member is refused, as Anthropic
// refuses it; so are Anthropic's features the gateway cannot serve (anthropicUnsupported).
var anthropicMembers = map[string]bool{
	"model": true, "messages": true, "system": true, "max_tokens": true, "stop_sequences": true, "stream": true,
	"temperature": true, "top_p": true, "top_k": true, "tools": true, "tool_choice": true,
	"gpumarket": true, "provider": true,
	"metadata": true, "service_tier": true, "thinking": true, "context_management": true, "inference_geo": true,
}

var anthropicUnsupported = map[string]bool{"container": true, "mcp_servers": true, "output_config": true, "output_format": true}

// anthropicInvalid is a 400 in Anthropic's shape.
func anthropicInvalid(format string, args ...any) *wire.Error {
	return wire.New(services.CodeInvalid, "", "", fmt.Sprintf(format, args...))
}

func (Anthropic) ToChat(body []byte) ([]byte, error) {
	return AnthropicToChat(body, true)
}

// AnthropicToChat translates a Messages request into a chat completions body; needMaxTokens is false for
// count_tokens (POST /v1/messages/count_tokens), which takes none.
func AnthropicToChat(body []byte, needMaxTokens bool) ([]byte, error) {
	top, ok := wire.ReadObject(body)
	if !ok {
		return nil, anthropicInvalid("The request body is not a JSON object.")
	}
	for _, m := range top {
		name := string(m.Name)
		switch {
		case anthropicUnsupported[name]:
			return nil, anthropicInvalid("%s: not supported: the gateway serves open-weight models through chat completions.", name)
		case !anthropicMembers[name]:
			return nil, anthropicInvalid("%s: Extra inputs are not permitted", name)
		}
	}
	var req anthropicRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, anthropicInvalid("The request body does not match the Messages API: %v.", err)
	}
	chat := map[string]json.RawMessage{}
	for _, name := range []string{"gpumarket", "provider", "temperature", "top_p", "top_k", "stream"} {
		if raw, ok := top.Get(name); ok {
			chat[name] = raw
		}
	}
	if len(req.Model) == 0 {
		return nil, anthropicInvalid("model: Field required")
	}
	chat["model"] = req.Model
	switch {
	case len(req.MaxTokens) > 0 && string(req.MaxTokens) != "null":
		var n int64
		if json.Unmarshal(req.MaxTokens, &n) != nil || n < 1 {
			return nil, anthropicInvalid("max_tokens: must be a whole number of tokens, 1 or more.")
		}
		chat["max_tokens"] = req.MaxTokens
	case needMaxTokens:
		return nil, anthropicInvalid("max_tokens: Field required")
	}
	if len(req.StopSequences) > 0 {
		chat["stop"], _ = json.Marshal(req.StopSequences)
	}

	var messages []map[string]any
	if len(req.System) > 0 && string(req.System) != "null" {
		system, err := anthropicText(req.System, "system")
		if err != nil {
			return nil, err
		}
		messages = append(messages, map[string]any{"role": "system", "content": system})
	}
	if len(req.Messages) == 0 {
		return nil, anthropicInvalid("messages: at least one message is required.")
	}
	for i, m := range req.Messages {
		translated, err := anthropicMessageToChat(m, fmt.Sprintf("messages.%d", i))
		if err != nil {
			return nil, err
		}
		messages = append(messages, translated...)
	}
	var err error
	if chat["messages"], err = json.Marshal(messages); err != nil {
		return nil, anthropicInvalid("messages: %v", err)
	}

	if len(req.Tools) > 0 {
		tools := make([]map[string]any, 0, len(req.Tools))
		for i, t := range req.Tools {
			if t.Type != "" && t.Type != "custom" {
				return nil, anthropicInvalid("tools.%d: the server tool %q is not supported: declare your own tools (name, description, input_schema).", i, t.Type)
			}
			if t.Name == "" {
				return nil, anthropicInvalid("tools.%d.name: Field required", i)
			}
			schema := t.InputSchema
			if len(schema) == 0 || string(schema) == "null" {
				return nil, anthropicInvalid("tools.%d.input_schema: Field required", i)
			}
			fn := map[string]any{"name": t.Name, "parameters": schema}
			if t.Description != "" {
				fn["description"] = t.Description
			}
			tools = append(tools, map[string]any{"type": "function", "function": fn})
		}
		chat["tools"], _ = json.Marshal(tools)
	}
	if c := req.ToolChoice; c != nil {
		var choice any
		switch c.Type {
		case "auto":
			choice = "auto"
		case "any":
			choice = "required"
		case "none":
			choice = "none"
		case "tool":
			if c.Name == "" {
				return nil, anthropicInvalid("tool_choice.name: Field required")
			}
			choice = map[string]any{"type": "function", "function": map[string]string{"name": c.Name}}
		default:
			return nil, anthropicInvalid(`tool_choice.type: must be "auto", "any", "tool" or "none".`)
		}
		chat["tool_choice"], _ = json.Marshal(choice)
		if c.DisableParallelToolUse && c.Type != "none" {
			chat["parallel_tool_calls"] = json.RawMessage("false")
		}
	}
	return wire.MarshalMembers(chat)
}

// anthropicText reads a system prompt or a tool result's content: a string, or text blocks joined by newlines.
func anthropicText(raw json.RawMessage, where string) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var blocks []anthropicBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return "", anthropicInvalid("%s: must be a string or an array of content blocks.", where)
	}
	texts := make([]string, 0, len(blocks))
	for i, b := range blocks {
		if b.Type != "text" {
			return "", unsupportedBlock(fmt.Sprintf("%s.%d", where, i), b.Type)
		}
		texts = append(texts, b.Text)
	}
	return strings.Join(texts, "\n"), nil
}

func unsupportedBlock(where, typ string) *wire.Error {
	switch typ {
	case "image", "document":
		return anthropicInvalid("%s: %s blocks are not supported: the models on offer read text only.", where, typ)
	}
	return anthropicInvalid("%s: content blocks of type %q are not supported here.", where, typ)
}

// anthropicMessageToChat translates one message. A user's tool_result blocks become tool messages, which come first,
// right after the assistant's calls they answer, and its text a user message after them; an assistant's text and
// tool_use blocks become one assistant message with tool calls. Thinking blocks are dropped.
func anthropicMessageToChat(m anthropicMessage, where string) ([]map[string]any, error) {
	if m.Role != "user" && m.Role != "assistant" {
		return nil, anthropicInvalid(`%s.role: must be "user" or "assistant".`, where)
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return []map[string]any{{"role": m.Role, "content": s}}, nil
	}
	var blocks []anthropicBlock
	if json.Unmarshal(m.Content, &blocks) != nil {
		return nil, anthropicInvalid("%s.content: must be a string or an array of content blocks.", where)
	}
	var out []map[string]any
	var texts []string
	var calls []map[string]any
	for i, b := range blocks {
		at := fmt.Sprintf("%s.content.%d", where, i)
		switch {
		case b.Type == "text":
			texts = append(texts, b.Text)
		case b.Type == "thinking" || b.Type == "redacted_thinking":
		case b.Type == "tool_use" && m.Role == "assistant":
			if b.ID == "" || b.Name == "" {
				return nil, anthropicInvalid("%s: a tool_use block needs its id and name.", at)
			}
			args := "{}"
			if len(b.Input) > 0 && string(b.Input) != "null" {
				var compact bytes.Buffer
				if err := json.Compact(&compact, b.Input); err != nil {
					return nil, anthropicInvalid("%s.input: %v", at, err)
				}
				args = compact.String()
			}
			calls = append(calls, map[string]any{"id": b.ID, "type": "function",
				"function": map[string]string{"name": b.Name, "arguments": args}})
		case b.Type == "tool_result" && m.Role == "user":
			if b.ToolUseID == "" {
				return nil, anthropicInvalid("%s.tool_use_id: Field required", at)
			}
			content := ""
			if len(b.Content) > 0 && string(b.Content) != "null" {
				var err error
				if content, err = anthropicText(b.Content, at+".content"); err != nil {
					return nil, err
				}
			}
			out = append(out, map[string]any{"role": "tool", "tool_call_id": b.ToolUseID, "content": content})
		default:
			return nil, unsupportedBlock(at, b.Type)
		}
	}
	switch {
	case m.Role == "assistant":
		msg := map[string]any{"role": "assistant", "content": strings.Join(texts, "\n")}
		if len(calls) > 0 {
			msg["tool_calls"] = calls
			if len(texts) == 0 {
				msg["content"] = nil
			}
		}
		out = append(out, msg)
	case len(texts) > 0 || len(out) == 0:
		out = append(out, map[string]any{"role": "user", "content": strings.Join(texts, "\n")})
	}
	return out, nil
}

// chatAnswer is what the translation reads of a chat completion, whole or a chunk. StopReason is vLLM's: the stop
// string that ended the answer, when one did.
type chatAnswer struct {
	Choices []struct {
		Message      chatAnswerMessage `json:"message"`
		Delta        chatAnswerMessage `json:"delta"`
		FinishReason string            `json:"finish_reason"`
		StopReason   json.RawMessage   `json:"stop_reason"`
	} `json:"choices"`
	Usage *chatUsage `json:"usage"`
}

type chatAnswerMessage struct {
	Content   *string `json:"content"`
	ToolCalls []struct {
		Index    int    `json:"index"`
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

type chatUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// anthropicUsage is a Messages usage object. Anthropic counts the input read from its cache apart from the rest:
// input_tokens is the prompt's tokens less the cached ones.
type anthropicUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	// Cost is what the request cost, in dollars, as every answer's usage tells it (package gateway's cost.go); absent when untold.
	Cost json.RawMessage `json:"cost,omitempty"`
}

// anthropic is the usage as Messages tells it, with the request's cost for it when t tells one.
func (u *chatUsage) anthropic(t *Translation) anthropicUsage {
	if u == nil {
		return anthropicUsage{}
	}
	out := anthropicUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
	if d := u.PromptTokensDetails; d != nil && d.CachedTokens > 0 {
		out.CacheReadInputTokens = min(d.CachedTokens, u.PromptTokens)
		out.InputTokens -= out.CacheReadInputTokens
	}
	if t != nil && t.Cost != nil {
		if cost, ok := t.Cost(&admission.TokenCount{Input: max(u.PromptTokens, 0), Output: max(u.CompletionTokens, 0),
			Cached: max(out.CacheReadInputTokens, 0)}); ok {
			out.Cost = json.RawMessage(cost.Decimal(12))
		}
	}
	return out
}

// stopReason maps a chat finish reason (and vLLM's stop string) to Anthropic's stop_reason and stop_sequence.
func stopReason(finish string, vllmStop json.RawMessage) (reason string, sequence *string) {
	switch finish {
	case "length":
		return "max_tokens", nil
	case "tool_calls", "function_call":
		return "tool_use", nil
	case "content_filter":
		return "refusal", nil
	}
	var s string
	if len(vllmStop) > 0 && json.Unmarshal(vllmStop, &s) == nil && s != "" {
		return "stop_sequence", &s
	}
	return "end_turn", nil
}

// anthropicMessageID names the answer by the gateway's request id, which the X-GPUMarket-Request-Id header carries.
func anthropicMessageID(requestID string) string {
	return "msg_" + strings.TrimPrefix(requestID, "req_")
}

type anthropicAnswer struct {
	ID           string            `json:"id"`
	Type         string            `json:"type"` // message
	Role         string            `json:"role"` // assistant
	Model        string            `json:"model"`
	Content      []json.RawMessage `json:"content"`
	StopReason   *string           `json:"stop_reason"`
	StopSequence *string           `json:"stop_sequence"`
	Usage        anthropicUsage    `json:"usage"`
}

func (Anthropic) Answer(chat []byte, t *Translation) ([]byte, error) {
	var a chatAnswer
	if err := json.Unmarshal(chat, &a); err != nil {
		return nil, err
	}
	if len(a.Choices) == 0 {
		return nil, errors.New("a chat completion without a choice")
	}
	ch := a.Choices[0]
	out := anthropicAnswer{ID: anthropicMessageID(t.RequestID), Type: "message", Role: "assistant", Model: t.Model,
		Content: []json.RawMessage{}, Usage: a.Usage.anthropic(t)}
	if c := ch.Message.Content; c != nil && *c != "" {
		b, _ := json.Marshal(map[string]string{"type": "text", "text": *c})
		out.Content = append(out.Content, b)
	}
	for _, call := range ch.Message.ToolCalls {
		b, _ := json.Marshal(map[string]any{"type": "tool_use", "id": call.ID, "name": call.Function.Name,
			"input": toolInput(call.Function.Arguments)})
		out.Content = append(out.Content, b)
	}
	reason, seq := stopReason(ch.FinishReason, ch.StopReason)
	out.StopReason, out.StopSequence = &reason, seq
	return json.Marshal(out)
}

// toolInput is a call's arguments as a tool_use block's input: the JSON object they are, or {} when they are not one
// (arguments cut short by max_tokens).
func toolInput(arguments string) json.RawMessage {
	if top, ok := wire.ReadObject([]byte(arguments)); ok && top != nil {
		return json.RawMessage(arguments)
	}
	return json.RawMessage("{}")
}

func (Anthropic) ErrorBody(ge *wire.Error) []byte {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{
		"type": httperr.ForStatus(ge.Status).AnthropicType, "message": ge.Message}})
	return b
}

// NativeAPI is the name by which agents say their engine serves the Messages API.
func (Anthropic) NativeAPI() string { return catalog.NativeMessages }

func (Anthropic) Stream(t *Translation) ChunkTranslator {
	return &anthropicStream{t: t, blocks: map[int]int{}, open: -1, text: -1}
}

// anthropicStream translates a chat completion stream into Messages events: message_start at the first chunk; a
// content block for the text and one for each tool call, each opened by content_block_start, fed by
// content_block_delta (text_delta, input_json_delta) and closed by content_block_stop when the next block opens or
// the stream ends; then message_delta with the stop reason and the usage, and message_stop. The input tokens are
// known only at the end, from the usage chunk the gateway asks every rig for: message_start says 0, message_delta the
// count.
type anthropicStream struct {
	t        *Translation
	started  bool
	next     int         // the index of the next block
	open     int         // the block open now, -1 when none
	text     int         // the open text block's index, -1 when none
	blocks   map[int]int // a tool call's index in the chat stream to its block's
	finish   string
	vllmStop json.RawMessage
	usage    *chatUsage
}

// event appends one server-sent event.
func event(out []byte, name string, v any) []byte {
	b, _ := json.Marshal(v)
	out = append(out, "event: "...)
	out = append(out, name...)
	out = append(out, "\ndata: "...)
	out = append(out, b...)
	return append(out, "\n\n"...)
}

func (s *anthropicStream) start(out []byte) []byte {
	if s.started {
		return out
	}
	s.started = true
	return event(out, "message_start", map[string]any{"type": "message_start", "message": anthropicAnswer{
		ID: anthropicMessageID(s.t.RequestID), Type: "message", Role: "assistant", Model: s.t.Model,
		Content: []json.RawMessage{}}})
}

// openBlock closes the open block and opens a new one.
func (s *anthropicStream) openBlock(out []byte, block any) ([]byte, int) {
	out = s.closeBlock(out)
	i := s.next
	s.next++
	s.open = i
	return event(out, "content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": block}), i
}

func (s *anthropicStream) closeBlock(out []byte) []byte {
	if s.open < 0 {
		return out
	}
	out = event(out, "content_block_stop", map[string]any{"type": "content_block_stop", "index": s.open})
	if s.open == s.text {
		s.text = -1
	}
	s.open = -1
	return out
}

func (s *anthropicStream) Chunk(payload []byte) ([]byte, error) {
	var c chatAnswer
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, err
	}
	out := s.start(nil)
	if c.Usage != nil {
		s.usage = c.Usage
	}
	for _, ch := range c.Choices {
		if ch.FinishReason != "" {
			s.finish = ch.FinishReason
		}
		if len(ch.StopReason) > 0 && string(ch.StopReason) != "null" {
			s.vllmStop = ch.StopReason
		}
		if d := ch.Delta.Content; d != nil && *d != "" {
			i := s.text
			if i < 0 || s.open != i {
				out, i = s.openBlock(out, map[string]string{"type": "text", "text": ""})
				s.text = i
			}
			out = event(out, "content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]string{"type": "text_delta", "text": *d}})
		}
		for _, call := range ch.Delta.ToolCalls {
			i, seen := s.blocks[call.Index]
			if !seen || call.ID != "" && i != s.open {
				out, i = s.openBlock(out, map[string]any{"type": "tool_use", "id": call.ID, "name": call.Function.Name,
					"input": json.RawMessage("{}")})
				s.blocks[call.Index] = i
			}
			if call.Function.Arguments != "" {
				out = event(out, "content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
					"delta": map[string]string{"type": "input_json_delta", "partial_json": call.Function.Arguments}})
			}
		}
	}
	return out, nil
}

func (s *anthropicStream) End() []byte {
	out := s.closeBlock(s.start(nil))
	reason, seq := stopReason(s.finish, s.vllmStop)
	u := s.usage.anthropic(s.t)
	out = event(out, "message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": reason, "stop_sequence": seq}, "usage": u})
	return event(out, "message_stop", map[string]string{"type": "message_stop"})
}

// fail is the error event Anthropic ends a stream with when it fails midway.
func (s *anthropicStream) Fail(message string) []byte {
	return event(nil, "error", map[string]any{"type": "error", "error": map[string]string{
		"type": httperr.Of(httperr.CodeBadGateway).AnthropicType, "message": message}})
}
