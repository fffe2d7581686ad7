package simulation

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// OpenAI's Responses API, POST /v1/responses, served natively with Options.Native as vLLM
// serves it, and stateless: nothing is stored, so "store" is taken either way and answered
// false, and previous_response_id is refused. A request becomes the chat it stands for
// (instructions a system message, a string input a user message, input items messages,
// function_call items an assistant's tool calls, function_call_output items tool messages,
// function tools chat's tools), which planChat answers as the chat path does; the answer is
// encoded as a Response.

// responsesRequest is a Responses request, as much of it as the simulation reads. Fields it has
// no use for (temperature, top_p, reasoning, text, ...) are ignored.
type responsesRequest struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"`
	Instructions       *string         `json:"instructions"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	Stream             bool            `json:"stream"`
	Tools              []responsesTool `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	Store              *bool           `json:"store"`
	PreviousResponseID *string         `json:"previous_response_id"`
}

// responsesTool is a function tool, in a request and echoed in the answer.
type responsesTool struct {
	Type        string          `json:"type"` // function
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// inputItem is an item of a list input: a message (with a role), a function_call or a
// function_call_output.
type inputItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// inputPart is a part of a message's content, or of a function_call_output's output.
type inputPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// chat is the chat the request stands for.
func (req responsesRequest) chat() (chatRequest, *requestError) {
	if req.PreviousResponseID != nil && *req.PreviousResponseID != "" {
		return chatRequest{}, invalid("previous_response_id",
			"previous_response_id is not supported: this server stores no responses. Send the whole conversation in input.")
	}
	if req.MaxOutputTokens != nil && *req.MaxOutputTokens < 1 {
		return chatRequest{}, invalid("max_output_tokens", "max_output_tokens must be 1 or more.")
	}
	chat := chatRequest{Model: req.Model, MaxTokens: req.MaxOutputTokens, Stream: req.Stream}
	if req.Instructions != nil && *req.Instructions != "" {
		chat.Messages = append(chat.Messages, chatMessage{Role: "system", Content: jsonString(*req.Instructions)})
	}
	messages, e := inputMessages(req.Input)
	if e != nil {
		return chatRequest{}, e
	}
	chat.Messages = append(chat.Messages, messages...)
	for i, t := range req.Tools {
		if t.Type != "function" || t.Name == "" {
			return chatRequest{}, invalid(fmt.Sprintf("tools[%d]", i),
				`tools[%d] must be {"type": "function", "name": ...}: this server calls functions only.`, i)
		}
		var tool chatTool
		tool.Type, tool.Function.Name, tool.Function.Parameters = "function", t.Name, t.Parameters
		chat.Tools = append(chat.Tools, tool)
	}
	if len(req.ToolChoice) > 0 && string(req.ToolChoice) != "null" {
		var mode string
		var named struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		switch {
		case json.Unmarshal(req.ToolChoice, &mode) == nil:
			chat.ToolChoice = req.ToolChoice // none, auto or required, which toolToCall checks
		case json.Unmarshal(req.ToolChoice, &named) == nil && named.Type == "function" && named.Name != "":
			chat.ToolChoice, _ = json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": named.Name}})
		default:
			return chatRequest{}, invalid("tool_choice", `tool_choice must be "none", "auto", "required" or {"type": "function", "name": ...}.`)
		}
	}
	return chat, nil
}

// inputMessages reads the input, a string or a list of items, as chat messages. Function calls
// that follow an assistant message, or one another, are that one assistant turn's.
func inputMessages(input json.RawMessage) ([]chatMessage, *requestError) {
	if len(input) == 0 || string(input) == "null" {
		return nil, invalid("input", "input is required: a string, or a list of input items.")
	}
	var s string
	if json.Unmarshal(input, &s) == nil {
		return []chatMessage{{Role: "user", Content: jsonString(s)}}, nil
	}
	var items []inputItem
	if json.Unmarshal(input, &items) != nil {
		return nil, invalid("input", "input must be a string or a list of input items.")
	}
	var out []chatMessage
	for i, item := range items {
		param := fmt.Sprintf("input[%d]", i)
		if item.Type == "" && item.Role != "" {
			item.Type = "message"
		}
		switch item.Type {
		case "message":
			role := item.Role
			switch role {
			case "user", "assistant", "system":
			case "developer":
				role = "system"
			default:
				return nil, invalid(param+".role", "%s.role must be user, assistant, system or developer.", param)
			}
			text, e := partsText(item.Content, param+".content")
			if e != nil {
				return nil, e
			}
			out = append(out, chatMessage{Role: role, Content: jsonString(text)})
		case "function_call":
			if item.CallID == "" || item.Name == "" {
				return nil, invalid(param, "%s, a function_call item, needs its call_id and name.", param)
			}
			call := toolCall{ID: item.CallID, Type: "function", Function: functionCall{Name: item.Name, Arguments: item.Arguments}}
			if n := len(out); n > 0 && out[n-1].Role == "assistant" {
				out[n-1].ToolCalls = append(out[n-1].ToolCalls, call)
			} else {
				out = append(out, chatMessage{Role: "assistant", ToolCalls: []toolCall{call}})
			}
		case "function_call_output":
			if item.CallID == "" {
				return nil, invalid(param, "%s, a function_call_output item, needs the call_id of its function_call.", param)
			}
			text, e := partsText(item.Output, param+".output")
			if e != nil {
				return nil, e
			}
			out = append(out, chatMessage{Role: "tool", ToolCallID: item.CallID, Content: jsonString(text)})
		default:
			return nil, invalid(param+".type",
				"%s is a %q item: this server takes message, function_call and function_call_output items.", param, item.Type)
		}
	}
	if len(out) == 0 {
		return nil, invalid("input", "input holds no item.")
	}
	return out, nil
}

// partsText reads a message's content or a tool's output: a string, or text parts (input_text,
// output_text) joined by newlines.
func partsText(raw json.RawMessage, param string) (string, *requestError) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []inputPart
	if json.Unmarshal(raw, &parts) != nil {
		return "", invalid(param, "%s must be a string or a list of text parts.", param)
	}
	texts := make([]string, 0, len(parts))
	for k, p := range parts {
		if p.Type != "input_text" && p.Type != "output_text" {
			return "", invalid(fmt.Sprintf("%s[%d].type", param, k),
				"%s[%d] is a %q part: this server reads input_text and output_text parts.", param, k, p.Type)
		}
		texts = append(texts, p.Text)
	}
	return strings.Join(texts, "\n"), nil
}

// response is a Response: the answer, and what a stream's lifecycle events carry. The members
// the request does not set are OpenAI's defaults.
type response struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"` // response
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"` // in_progress, completed or incomplete
	CompletedAt        *int64             `json:"completed_at"`
	Error              json.RawMessage    `json:"error"` // always null
	IncompleteDetails  *incompleteDetails `json:"incomplete_details"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int               `json:"max_output_tokens"`
	Metadata           map[string]string  `json:"metadata"`
	Model              string             `json:"model"`
	Output             []any              `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Store              bool               `json:"store"` // false: nothing is stored
	Temperature        float64            `json:"temperature"`
	ToolChoice         json.RawMessage    `json:"tool_choice"`
	Tools              []responsesTool    `json:"tools"`
	TopP               float64            `json:"top_p"`
	Usage              *responsesUsage    `json:"usage"`
}

type incompleteDetails struct {
	Reason string `json:"reason"` // max_output_tokens
}

// responsesUsage is the Responses API's usage: input_tokens include those the prefix cache
// served, which input_tokens_details tells apart.
type responsesUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// outputMessage is an output message item, with its one text part.
type outputMessage struct {
	Type    string       `json:"type"` // message
	ID      string       `json:"id"`
	Status  string       `json:"status"`
	Role    string       `json:"role"` // assistant
	Content []outputText `json:"content"`
}

type outputText struct {
	Type        string `json:"type"` // output_text
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"` // always empty
}

// outputCall is a function_call output item.
type outputCall struct {
	Type      string `json:"type"` // function_call
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

// responseShell is the Response to the request before any output.
func (h *Handler) responseShell(req responsesRequest, g *generation) *response {
	choice := req.ToolChoice
	if len(choice) == 0 || string(choice) == "null" {
		choice = jsonString("auto")
	}
	tools := req.Tools
	if tools == nil {
		tools = []responsesTool{}
	}
	return &response{ID: g.id, Object: "response", CreatedAt: g.created, Status: "in_progress", Error: jsonNull,
		Instructions: req.Instructions, MaxOutputTokens: req.MaxOutputTokens, Metadata: map[string]string{},
		Model: h.model, Output: []any{}, ParallelToolCalls: true, Temperature: 1, ToolChoice: choice, Tools: tools, TopP: 1}
}

// finish sets the Response's status and usage once its output is whole: incomplete when the
// limit cut it.
func (resp *response) finish(g *generation, now int64) {
	resp.Status = "completed"
	if g.finishReason == "length" {
		resp.Status, resp.IncompleteDetails = "incomplete", &incompleteDetails{Reason: "max_output_tokens"}
	} else {
		resp.CompletedAt = &now
	}
	u := &responsesUsage{InputTokens: g.promptTokens, OutputTokens: g.completionTokens, TotalTokens: g.promptTokens + g.completionTokens}
	u.InputTokensDetails.CachedTokens = g.cachedTokens
	resp.Usage = u
}

// itemStatus is the status of the answer's output item once whole.
func (g *generation) itemStatus() string {
	if g.finishReason == "length" {
		return "incomplete"
	}
	return "completed"
}

func (h *Handler) responses(w http.ResponseWriter, r *http.Request) *requestError {
	var req responsesRequest
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
	g, e := h.planChat(chat, chat.MaxTokens, limitCaps, "resp_")
	if e != nil {
		return e
	}
	var leave func()
	g.latency, leave = h.enter()
	defer leave()
	resp := h.responseShell(req, g)
	msg := &outputMessage{Type: "message", ID: "msg_" + randomHex(16), Status: "in_progress", Role: "assistant", Content: []outputText{}}
	var call *outputCall
	if g.call != nil {
		call = &outputCall{Type: "function_call", ID: "fc_" + randomHex(16), CallID: g.call.ID, Name: g.call.Function.Name,
			Status: "in_progress"}
	}

	if !req.Stream {
		text, err := g.whole(r.Context())
		if err != nil {
			return nil // the client is gone
		}
		if call != nil {
			call.Arguments, call.Status = text, g.itemStatus()
			resp.Output = []any{call}
		} else {
			msg.Content, msg.Status = []outputText{{Type: "output_text", Text: text, Annotations: []any{}}}, g.itemStatus()
			resp.Output = []any{msg}
		}
		resp.finish(g, h.opts.Now().Unix())
		return writeJSON(w, http.StatusOK, resp)
	}
	// The stream: response.created and response.in_progress, the one output item
	// (response.output_item.added; for a message response.content_part.added, a
	// response.output_text.delta per frame of tokens, response.output_text.done and
	// response.content_part.done; for a call a response.function_call_arguments.delta per frame
	// and response.function_call_arguments.done; response.output_item.done), then
	// response.completed, or response.incomplete when the limit cut the answer, with the whole
	// Response and its usage. Like a chat stream's first chunk, its first event comes with the
	// first token.
	s := &responsesStream{events: startEvents(w)}
	var item any = msg
	itemID := msg.ID
	if call != nil {
		item, itemID = call, call.ID
	}
	var text strings.Builder
	started := false
	start := func() error {
		if started {
			return nil
		}
		started = true
		events := []responseEvent{
			{Type: "response.created", Response: resp},
			{Type: "response.in_progress", Response: resp},
			{Type: "response.output_item.added", OutputIndex: new(0), Item: item},
		}
		if call == nil {
			events = append(events, responseEvent{Type: "response.content_part.added", ItemID: itemID, OutputIndex: new(0),
				ContentIndex: new(0), Part: &outputText{Type: "output_text", Text: "", Annotations: []any{}}})
		}
		return s.send(events...)
	}
	err := g.stream(r.Context(), func(piece string) error {
		if err := start(); err != nil {
			return err
		}
		text.WriteString(piece)
		if call != nil {
			return s.send(responseEvent{Type: "response.function_call_arguments.delta", ItemID: itemID, OutputIndex: new(0), Delta: &piece})
		}
		return s.send(responseEvent{Type: "response.output_text.delta", ItemID: itemID, OutputIndex: new(0), ContentIndex: new(0),
			Delta: &piece, Logprobs: emptyList})
	})
	if err != nil || start() != nil {
		return nil
	}
	whole := text.String()
	var events []responseEvent
	if call != nil {
		call.Arguments, call.Status = whole, g.itemStatus()
		resp.Output = []any{call}
		events = []responseEvent{
			{Type: "response.function_call_arguments.done", ItemID: itemID, OutputIndex: new(0), Arguments: &whole},
			{Type: "response.output_item.done", OutputIndex: new(0), Item: call},
		}
	} else {
		part := outputText{Type: "output_text", Text: whole, Annotations: []any{}}
		msg.Content, msg.Status = []outputText{part}, g.itemStatus()
		resp.Output = []any{msg}
		events = []responseEvent{
			{Type: "response.output_text.done", ItemID: itemID, OutputIndex: new(0), ContentIndex: new(0), Text: &whole, Logprobs: emptyList},
			{Type: "response.content_part.done", ItemID: itemID, OutputIndex: new(0), ContentIndex: new(0), Part: &part},
			{Type: "response.output_item.done", OutputIndex: new(0), Item: msg},
		}
	}
	resp.finish(g, h.opts.Now().Unix())
	last := "response.completed"
	if resp.Status == "incomplete" {
		last = "response.incomplete"
	}
	_ = s.send(append(events, responseEvent{Type: last, Response: resp})...)
	return nil
}

// responsesStream numbers the events of a Responses stream from 0, as OpenAI does.
type responsesStream struct {
	events *eventWriter
	seq    int
}

// responseEvent is an event of a Responses stream: its type, its number, and the members its
// type has.
type responseEvent struct {
	Type           string          `json:"type"`
	SequenceNumber int             `json:"sequence_number"`
	Response       *response       `json:"response,omitempty"`
	OutputIndex    *int            `json:"output_index,omitempty"`
	ItemID         string          `json:"item_id,omitempty"`
	ContentIndex   *int            `json:"content_index,omitempty"`
	Item           any             `json:"item,omitempty"`
	Part           *outputText     `json:"part,omitempty"`
	Delta          *string         `json:"delta,omitempty"`
	Text           *string         `json:"text,omitempty"`
	Arguments      *string         `json:"arguments,omitempty"`
	Logprobs       json.RawMessage `json:"logprobs,omitempty"` // [] on text events: no log probabilities
}

var emptyList = json.RawMessage("[]")

// send writes the events in order, each under its type's name, stopping at the first that
// fails. Each is encoded as it is sent, so a Response or an item sent twice shows each time
// what it holds then.
func (s *responsesStream) send(events ...responseEvent) error {
	for _, ev := range events {
		ev.SequenceNumber = s.seq
		s.seq++
		if err := s.events.send(ev.Type, ev); err != nil {
			return err
		}
	}
	return nil
}
