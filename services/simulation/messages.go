package simulation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// The Anthropic Messages API, POST /v1/messages, served natively with Options.Native as vLLM
// serves it. A request becomes the chat it stands for (the system prompt a system message, a
// user's tool_result blocks tool messages, an assistant's tool_use blocks its tool calls, the
// tools function tools), which planChat answers as the chat path does; the answer is encoded
// as a Message.

// messagesRequest is a Messages request, as much of it as the simulation reads. Fields it has
// no use for (temperature, top_p, top_k, metadata, ...) are ignored; stop_sequences too, as the
// chat path ignores stop.
type messagesRequest struct {
	Model         string              `json:"model"`
	MaxTokens     *int                `json:"max_tokens"`
	Messages      []messagesTurn      `json:"messages"`
	System        json.RawMessage     `json:"system"`
	Stream        bool                `json:"stream"`
	Tools         []messagesTool      `json:"tools"`
	ToolChoice    *messagesToolChoice `json:"tool_choice"`
	StopSequences []string            `json:"stop_sequences"`
}

// messagesTurn is a message of the conversation: a string, or content blocks.
type messagesTurn struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// contentBlock is a content block of a request: text, tool_use (an assistant's call) or
// tool_result (a user's answer to a call).
type contentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

type messagesTool struct {
	Type        string          `json:"type"` // absent or custom: a tool the client runs
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type messagesToolChoice struct {
	Type string `json:"type"` // auto, any, tool or none
	Name string `json:"name"` // the tool, for type tool
}

// chat is the chat the request stands for, with its token limit.
func (req messagesRequest) chat() (chatRequest, *requestError) {
	if req.MaxTokens == nil {
		return chatRequest{}, invalid("max_tokens", "max_tokens: Field required")
	}
	if *req.MaxTokens < 1 {
		return chatRequest{}, invalid("max_tokens", "max_tokens: must be 1 or more.")
	}
	if len(req.Messages) == 0 {
		return chatRequest{}, invalid("messages", "messages: at least one message is required.")
	}
	chat := chatRequest{Model: req.Model, MaxTokens: req.MaxTokens, Stream: req.Stream}
	if len(req.System) > 0 && string(req.System) != "null" {
		system, e := blocksText(req.System, "system")
		if e != nil {
			return chatRequest{}, e
		}
		chat.Messages = append(chat.Messages, chatMessage{Role: "system", Content: jsonString(system)})
	}
	for i, m := range req.Messages {
		turn, e := m.chat(fmt.Sprintf("messages.%d", i))
		if e != nil {
			return chatRequest{}, e
		}
		chat.Messages = append(chat.Messages, turn...)
	}
	for i, t := range req.Tools {
		if t.Type != "" && t.Type != "custom" {
			return chatRequest{}, invalid("tools", "tools.%d: the tool type %q is not supported: declare your own tools (name, description, input_schema).", i, t.Type)
		}
		if t.Name == "" {
			return chatRequest{}, invalid("tools", "tools.%d.name: Field required", i)
		}
		var tool chatTool
		tool.Type, tool.Function.Name, tool.Function.Parameters = "function", t.Name, t.InputSchema
		chat.Tools = append(chat.Tools, tool)
	}
	if c := req.ToolChoice; c != nil {
		switch c.Type {
		case "auto":
			chat.ToolChoice = jsonString("auto")
		case "any":
			chat.ToolChoice = jsonString("required")
		case "none":
			chat.ToolChoice = jsonString("none")
		case "tool":
			if c.Name == "" {
				return chatRequest{}, invalid("tool_choice", "tool_choice.name: Field required")
			}
			chat.ToolChoice, _ = json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": c.Name}})
		default:
			return chatRequest{}, invalid("tool_choice", `tool_choice.type: must be "auto", "any", "tool" or "none".`)
		}
	}
	return chat, nil
}

// chat is the chat messages a turn stands for. A user's tool_result blocks become tool
// messages, first, and its text a user message after them; an assistant's text and tool_use
// blocks one assistant message with its calls.
func (m messagesTurn) chat(where string) ([]chatMessage, *requestError) {
	if m.Role != "user" && m.Role != "assistant" {
		return nil, invalid("messages", `%s.role: must be "user" or "assistant".`, where)
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return []chatMessage{{Role: m.Role, Content: jsonString(s)}}, nil
	}
	var blocks []contentBlock
	if json.Unmarshal(m.Content, &blocks) != nil {
		return nil, invalid("messages", "%s.content: must be a string or an array of content blocks.", where)
	}
	var out []chatMessage
	var texts []string
	var calls []toolCall
	for i, b := range blocks {
		at := fmt.Sprintf("%s.content.%d", where, i)
		switch {
		case b.Type == "text":
			texts = append(texts, b.Text)
		case b.Type == "tool_use" && m.Role == "assistant":
			if b.ID == "" || b.Name == "" {
				return nil, invalid("messages", "%s: a tool_use block needs its id and name.", at)
			}
			args := "{}"
			if len(b.Input) > 0 && string(b.Input) != "null" {
				var compact bytes.Buffer
				if err := json.Compact(&compact, b.Input); err != nil {
					return nil, invalid("messages", "%s.input: %v", at, err)
				}
				args = compact.String()
			}
			calls = append(calls, toolCall{ID: b.ID, Type: "function", Function: functionCall{Name: b.Name, Arguments: args}})
		case b.Type == "tool_result" && m.Role == "user":
			if b.ToolUseID == "" {
				return nil, invalid("messages", "%s.tool_use_id: Field required", at)
			}
			content := ""
			if len(b.Content) > 0 && string(b.Content) != "null" {
				var e *requestError
				if content, e = blocksText(b.Content, at+".content"); e != nil {
					return nil, e
				}
			}
			out = append(out, chatMessage{Role: "tool", ToolCallID: b.ToolUseID, Content: jsonString(content)})
		default:
			return nil, invalid("messages", "%s: content blocks of type %q are not supported here: text, tool_use (an assistant's) and tool_result (a user's) are.", at, b.Type)
		}
	}
	switch {
	case m.Role == "assistant":
		out = append(out, chatMessage{Role: "assistant", Content: jsonString(strings.Join(texts, "\n")), ToolCalls: calls})
	case len(texts) > 0 || len(out) == 0:
		out = append(out, chatMessage{Role: "user", Content: jsonString(strings.Join(texts, "\n"))})
	}
	return out, nil
}

// blocksText reads a system prompt or a tool result's content: a string, or text blocks joined
// by newlines.
func blocksText(raw json.RawMessage, where string) (string, *requestError) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var blocks []contentBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return "", invalid(where, "%s: must be a string or an array of text blocks.", where)
	}
	texts := make([]string, 0, len(blocks))
	for i, b := range blocks {
		if b.Type != "text" {
			return "", invalid(where, "%s.%d: content blocks of type %q are not supported here: text blocks are.", where, i, b.Type)
		}
		texts = append(texts, b.Text)
	}
	return strings.Join(texts, "\n"), nil
}

// jsonString is s as a JSON string.
func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// message is the answer, a Message, whole or as message_start carries it.
type message struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"` // message
	Role         string         `json:"role"` // assistant
	Model        string         `json:"model"`
	Content      []messageBlock `json:"content"`
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"` // always null: stop sequences are not simulated
	Usage        messagesUsage  `json:"usage"`
}

// messageBlock is a content block of the answer: text, or a tool_use with its input.
type messageBlock struct {
	Type  string          `json:"type"`
	Text  *string         `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

// messagesUsage is Anthropic's usage: the prompt's tokens are input_tokens plus those read from
// the cache (the prefix cache's) plus those written to it (none: the simulated cache keeps
// every prompt without a charge of its own).
type messagesUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
}

func (g *generation) messagesUsage(output int) messagesUsage {
	return messagesUsage{InputTokens: g.promptTokens - g.cachedTokens, OutputTokens: output, CacheReadInputTokens: g.cachedTokens}
}

// stopReason is Anthropic's stop_reason of the answer.
func (g *generation) stopReason() string {
	switch g.finishReason {
	case "length":
		return "max_tokens"
	case "tool_calls":
		return "tool_use"
	}
	return "end_turn"
}

// toolUseID is the answer's call's id as Anthropic spells one.
func (g *generation) toolUseID() string { return "toolu_" + strings.TrimPrefix(g.call.ID, "call_") }

// toolInput is a call's arguments as a tool_use block's input: the JSON object they are, or {}
// when max_tokens cut them short of one.
func toolInput(arguments string) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(arguments), &obj) != nil || obj == nil {
		return json.RawMessage("{}")
	}
	return json.RawMessage(arguments)
}

func (h *Handler) messages(w http.ResponseWriter, r *http.Request) *requestError {
	var req messagesRequest
	if e := h.read(w, r, &req); e != nil {
		return e
	}
	if e := h.servesModel(req.Model); e != nil {
		return e
	}
	chat, e := req.chat()
	if e != nil {
		return e
	}
	g, e := h.planChat(chat, chat.MaxTokens, limitCaps, "msg_")
	if e != nil {
		return e
	}
	var leave func()
	g.latency, leave = h.enter()
	defer leave()
	answer := message{ID: g.id, Type: "message", Role: "assistant", Model: h.model, Content: []messageBlock{}}

	if !req.Stream {
		text, err := g.whole(r.Context())
		if err != nil {
			return nil // the client is gone
		}
		block := messageBlock{Type: "text", Text: &text}
		if g.call != nil {
			block = messageBlock{Type: "tool_use", ID: g.toolUseID(), Name: g.call.Function.Name, Input: toolInput(text)}
		}
		reason := g.stopReason()
		answer.Content, answer.StopReason, answer.Usage = []messageBlock{block}, &reason, g.messagesUsage(g.completionTokens)
		return writeJSON(w, http.StatusOK, answer)
	}
	// The stream: message_start and a ping, the one content block (content_block_start, a
	// content_block_delta per frame of tokens, content_block_stop), message_delta with the stop
	// reason and the usage, message_stop. Like a chat stream's first chunk, its first event comes
	// with the first token.
	events := startEvents(w)
	started := false
	start := func() error {
		if started {
			return nil
		}
		started = true
		answer.Usage = g.messagesUsage(0)
		block := messageBlock{Type: "text", Text: new("")}
		if g.call != nil {
			block = messageBlock{Type: "tool_use", ID: g.toolUseID(), Name: g.call.Function.Name, Input: json.RawMessage("{}")}
		}
		return events.sendAll(
			namedEvent{"message_start", map[string]any{"type": "message_start", "message": answer}},
			namedEvent{"ping", map[string]string{"type": "ping"}},
			namedEvent{"content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": block}})
	}
	err := g.stream(r.Context(), func(text string) error {
		if err := start(); err != nil {
			return err
		}
		delta := map[string]string{"type": "text_delta", "text": text}
		if g.call != nil {
			delta = map[string]string{"type": "input_json_delta", "partial_json": text}
		}
		return events.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": delta})
	})
	if err != nil || start() != nil {
		return nil
	}
	_ = events.sendAll(
		namedEvent{"content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}},
		namedEvent{"message_delta", map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": g.stopReason(), "stop_sequence": nil},
			"usage": g.messagesUsage(g.completionTokens)}},
		namedEvent{"message_stop", map[string]string{"type": "message_stop"}})
	return nil
}
