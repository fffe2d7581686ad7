package dialect

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/web/gateway/internal/wire"
)

// The OpenAI Responses API, POST /v1/responses, served by translation to and from chat completions (dialect.go).
//
// The platform keeps no responses: every call is stateless, answered as OpenAI answers one with "store": false,
// whatever "store" says, and the answer says "store": false. What would need a stored response or conversation
// is refused with a 400 that says so: previous_response_id, conversation, background, a stored prompt
// (prompt) and an item_reference input item. A client carries the conversation itself, sending back the output
// items it got (messages, function_call items) with its function_call_output items, as a stateless client of
// OpenAI does.
//
// The request becomes a chat completion: instructions the first system message, a string input one user
// message, input items messages (developer as system), function_call items the assistant's tool_calls (those
// that follow one another, or an assistant message, one assistant turn), function_call_output items tool
// messages; reasoning items a client sends back are dropped (the rig's engine gets no encrypted reasoning).
// max_output_tokens is max_tokens; temperature, top_p, parallel_tool_calls and tool_choice go as they are (a
// function tool choice in chat's shape); function tools become chat's tools, any other tool type (web_search,
// file_search, ...) is a 400: the rigs run models, not OpenAI's tools. text.format json_schema and json_object
// become response_format; reasoning.effort is reasoning_effort; safety_identifier (else user) is user. The
// gateway's own "gpumarket" object and an OpenRouter-style "provider" object go through untouched. Other
// members are not sent to the rig.
//
// The answer is a Response named "resp_" and the attempt's request id without its "req_" (the id of its usage
// row and its gateway record): a message item with the text, then a function_call item for each tool call.
// A chat completion cut short by its length is "incomplete", with incomplete_details.reason "max_output_tokens"
// (a stream then ends with response.incomplete, as OpenAI's does); else it is "completed". Its usage is the chat
// completion's, which the meter bills. A stream is OpenAI's semantic events, each with its "event:" line and a
// sequence_number from 0: response.created and response.in_progress, then for each output item
// response.output_item.added, its content or arguments (response.content_part.added, response.output_text.delta,
// response.output_text.done, response.content_part.done; response.function_call_arguments.delta and .done) and
// response.output_item.done, and last response.completed (or response.incomplete) with the whole response and
// its usage. The usage carries the request's cost in dollars, as every answer's does (package gateway's cost.go). A model's
// reasoning text is not relayed; its tokens are in usage.output_tokens_details. Errors are OpenAI's error body,
// the gateway's own.
type Responses struct{}

// NativeAPI is the name by which agents say their engine serves the Responses API.
func (Responses) NativeAPI() string { return catalog.NativeResponses }

var _ Dialect = Responses{}

// responsesRequest is what the gateway reads of a Responses API request.
type responsesRequest struct {
	Model              json.RawMessage   `json:"model"`
	Instructions       json.RawMessage   `json:"instructions"`
	Input              json.RawMessage   `json:"input"`
	MaxOutputTokens    json.RawMessage   `json:"max_output_tokens"`
	Temperature        json.RawMessage   `json:"temperature"`
	TopP               json.RawMessage   `json:"top_p"`
	Tools              []json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls  json.RawMessage   `json:"parallel_tool_calls"`
	Stream             json.RawMessage   `json:"stream"`
	Text               json.RawMessage   `json:"text"`
	Reasoning          json.RawMessage   `json:"reasoning"`
	Metadata           json.RawMessage   `json:"metadata"`
	User               json.RawMessage   `json:"user"`
	SafetyIdentifier   json.RawMessage   `json:"safety_identifier"`
	PreviousResponseID json.RawMessage   `json:"previous_response_id"`
	Conversation       json.RawMessage   `json:"conversation"`
	Background         json.RawMessage   `json:"background"`
	Prompt             json.RawMessage   `json:"prompt"`
	GPUMarket          json.RawMessage   `json:"gpumarket"`
	Provider           json.RawMessage   `json:"provider"`
}

// respChatRequest is the chat completions body a Responses request becomes.
type respChatRequest struct {
	Model             json.RawMessage    `json:"model"`
	Messages          []*respChatMessage `json:"messages"`
	MaxTokens         json.RawMessage    `json:"max_tokens,omitempty"`
	Temperature       json.RawMessage    `json:"temperature,omitempty"`
	TopP              json.RawMessage    `json:"top_p,omitempty"`
	Tools             []respChatTool     `json:"tools,omitempty"`
	ToolChoice        json.RawMessage    `json:"tool_choice,omitempty"`
	ParallelToolCalls json.RawMessage    `json:"parallel_tool_calls,omitempty"`
	ResponseFormat    json.RawMessage    `json:"response_format,omitempty"`
	ReasoningEffort   json.RawMessage    `json:"reasoning_effort,omitempty"`
	User              json.RawMessage    `json:"user,omitempty"`
	Stream            json.RawMessage    `json:"stream,omitempty"`
	GPUMarket         json.RawMessage    `json:"gpumarket,omitempty"`
	Provider          json.RawMessage    `json:"provider,omitempty"`
}

type respChatMessage struct {
	Role       string             `json:"role"`
	Content    json.RawMessage    `json:"content,omitempty"`
	ToolCalls  []respChatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string             `json:"tool_call_id,omitempty"`
}

type respChatToolCall struct {
	ID       string               `json:"id"`
	Type     string               `json:"type"`
	Function respChatFunctionCall `json:"function"`
}

type respChatFunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type respChatTool struct {
	Type     string           `json:"type"`
	Function respChatFunction `json:"function"`
}

type respChatFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      json.RawMessage `json:"strict,omitempty"`
}

// respIsNull is true for a member absent or null.
func respIsNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// respNotNull is raw, or nil when it is null: a member to leave out.
func respNotNull(raw json.RawMessage) json.RawMessage {
	if respIsNull(raw) {
		return nil
	}
	return raw
}

// errNotStored is the 400 of what needs a response or conversation the platform would have stored.
func errNotStored(param string) *wire.Error {
	return wire.InvalidRequest(param, "unsupported_parameter",
		"%s is not supported: this platform does not store responses or conversations, so every request to /v1/responses "+
			"is stateless (as with \"store\": false). Send the whole conversation in input, with the output items you "+
			"received and your function_call_output items.", param)
}

func (Responses) ToChat(body []byte) ([]byte, error) {
	var r responsesRequest
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, wire.InvalidRequest("", "invalid_json", "We could not parse the JSON body of your request: %v.", respJSONProblem(err))
	}
	if s, ok := wire.String(r.PreviousResponseID); !respIsNull(r.PreviousResponseID) && (!ok || s != "") {
		return nil, errNotStored("previous_response_id")
	}
	if !respIsNull(r.Conversation) {
		return nil, errNotStored("conversation")
	}
	if !respIsNull(r.Prompt) {
		return nil, errNotStored("prompt")
	}
	if string(r.Background) == "true" {
		return nil, errNotStored("background")
	}
	chat := respChatRequest{Model: r.Model, MaxTokens: respNotNull(r.MaxOutputTokens), Temperature: respNotNull(r.Temperature),
		TopP: respNotNull(r.TopP), ParallelToolCalls: respNotNull(r.ParallelToolCalls), Stream: respNotNull(r.Stream),
		GPUMarket: r.GPUMarket, Provider: r.Provider}
	if !respIsNull(r.Instructions) {
		text, ok := wire.String(r.Instructions)
		if !ok {
			return nil, wire.InvalidRequest("instructions", "", "instructions must be a string.")
		}
		if text != "" {
			chat.Messages = append(chat.Messages, &respChatMessage{Role: "system", Content: respJSON(text)})
		}
	}
	if err := appendInput(&chat, r.Input); err != nil {
		return nil, err
	}
	for i, raw := range r.Tools {
		tool, err := respChatToolOf(raw, i)
		if err != nil {
			return nil, err
		}
		chat.Tools = append(chat.Tools, tool)
	}
	var err error
	if chat.ToolChoice, err = respChatToolChoice(r.ToolChoice); err != nil {
		return nil, err
	}
	if chat.ResponseFormat, err = respChatResponseFormat(r.Text); err != nil {
		return nil, err
	}
	if !respIsNull(r.Reasoning) {
		var reasoning struct {
			Effort json.RawMessage `json:"effort"`
		}
		if json.Unmarshal(r.Reasoning, &reasoning) != nil {
			return nil, wire.InvalidRequest("reasoning", "", "reasoning must be an object.")
		}
		chat.ReasoningEffort = respNotNull(reasoning.Effort)
	}
	chat.User = respNotNull(r.SafetyIdentifier)
	if chat.User == nil {
		chat.User = respNotNull(r.User)
	}
	return respMarshal(chat)
}

// respJSONProblem is what encoding/json found wrong with a body, without the Go types it names.
func respJSONProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Sprintf("%s must not be a %s", te.Field, te.Value)
	}
	return err.Error()
}

// respMarshal encodes v without escaping <, > and &, which a prompt holds as it is.
func respMarshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// respJSON encodes a value that always encodes: a string, a number, a struct of them.
func respJSON(v any) json.RawMessage {
	raw, err := respMarshal(v)
	if err != nil {
		panic(err)
	}
	return raw
}

// respInputItem is what the gateway reads of an input item.
type respInputItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// appendInput appends the input, a string or a list of items, to the chat's messages.
func appendInput(chat *respChatRequest, input json.RawMessage) error {
	if respIsNull(input) {
		return wire.InvalidRequest("input", "", "input is required: a string, or a list of input items.")
	}
	if text, ok := wire.String(input); ok {
		chat.Messages = append(chat.Messages, &respChatMessage{Role: "user", Content: respJSON(text)})
		return nil
	}
	var items []json.RawMessage
	if json.Unmarshal(input, &items) != nil {
		return wire.InvalidRequest("input", "", "input must be a string or a list of input items.")
	}
	for i, raw := range items {
		param := fmt.Sprintf("input[%d]", i)
		var item respInputItem
		if json.Unmarshal(raw, &item) != nil {
			return wire.InvalidRequest(param, "", "%s must be an input item: an object with a type or a role.", param)
		}
		if item.Type == "" && item.Role != "" {
			item.Type = "message"
		}
		switch item.Type {
		case "message":
			m, err := respChatMessageOf(item, param)
			if err != nil {
				return err
			}
			chat.Messages = append(chat.Messages, m)
		case "function_call":
			if item.CallID == "" || item.Name == "" {
				return wire.InvalidRequest(param, "", "%s, a function_call item, needs its call_id and name.", param)
			}
			call := respChatToolCall{ID: item.CallID, Type: "function", Function: respChatFunctionCall{Name: item.Name, Arguments: item.Arguments}}
			// Calls that follow an assistant message, or one another, are that one assistant turn's.
			if n := len(chat.Messages); n > 0 && chat.Messages[n-1].Role == "assistant" {
				last := chat.Messages[n-1]
				last.ToolCalls = append(last.ToolCalls, call)
			} else {
				chat.Messages = append(chat.Messages, &respChatMessage{Role: "assistant", ToolCalls: []respChatToolCall{call}})
			}
		case "function_call_output":
			if item.CallID == "" {
				return wire.InvalidRequest(param, "", "%s, a function_call_output item, needs the call_id of its function_call.", param)
			}
			text, err := respOutputText(item.Output, param+".output")
			if err != nil {
				return err
			}
			chat.Messages = append(chat.Messages, &respChatMessage{Role: "tool", ToolCallID: item.CallID, Content: respJSON(text)})
		case "reasoning":
			// A reasoning item sent back from an earlier answer: the rig's engine takes no reasoning in its input.
		case "item_reference":
			return errNotStored(param + " (an item_reference)")
		default:
			return wire.InvalidRequest(param+".type", "unsupported_input_item",
				"%s is a %q item: the gateway takes message, function_call, function_call_output and reasoning items.", param, item.Type)
		}
	}
	if len(chat.Messages) == 0 {
		return wire.InvalidRequest("input", "", "input has no message.")
	}
	return nil
}

// respContentPart is what the gateway reads of a message's content part.
type respContentPart struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	Refusal  string          `json:"refusal"`
	ImageURL string          `json:"image_url"`
	Detail   string          `json:"detail"`
	FileID   json.RawMessage `json:"file_id"`
}

// respChatPart is a part of a chat message's content.
type respChatPart struct {
	Type     string             `json:"type"`
	Text     string             `json:"text,omitempty"`
	ImageURL *respChatImagePart `json:"image_url,omitempty"`
}

type respChatImagePart struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// respChatMessageOf translates a message item.
func respChatMessageOf(item respInputItem, param string) (*respChatMessage, error) {
	role := item.Role
	switch role {
	case "user", "assistant", "system":
	case "developer":
		role = "system"
	default:
		return nil, wire.InvalidRequest(param+".role", "", "%s.role must be user, assistant, system or developer.", param)
	}
	if text, ok := wire.String(item.Content); ok {
		return &respChatMessage{Role: role, Content: respJSON(text)}, nil
	}
	var parts []respContentPart
	if json.Unmarshal(item.Content, &parts) != nil {
		return nil, wire.InvalidRequest(param+".content", "", "%s.content must be a string or a list of content parts.", param)
	}
	out := make([]respChatPart, 0, len(parts))
	for k, p := range parts {
		where := fmt.Sprintf("%s.content[%d]", param, k)
		switch {
		case p.Type == "input_text" || p.Type == "output_text" || p.Type == "text":
			out = append(out, respChatPart{Type: "text", Text: p.Text})
		case p.Type == "refusal" && role == "assistant":
			out = append(out, respChatPart{Type: "text", Text: p.Refusal})
		case p.Type == "input_image" && role == "user":
			if p.ImageURL == "" {
				return nil, wire.InvalidRequest(where, "unsupported_content",
					"%s: an image is taken by its image_url (a URL or a data: URL); this platform stores no files.", where)
			}
			out = append(out, respChatPart{Type: "image_url", ImageURL: &respChatImagePart{URL: p.ImageURL, Detail: p.Detail}})
		default:
			return nil, wire.InvalidRequest(where+".type", "unsupported_content",
				"%s is a %q part, which a %s message cannot carry here: text parts, and images in user messages.", where, p.Type, item.Role)
		}
	}
	if len(out) == 1 && out[0].Type == "text" {
		return &respChatMessage{Role: role, Content: respJSON(out[0].Text)}, nil
	}
	return &respChatMessage{Role: role, Content: respJSON(out)}, nil
}

// respOutputText is a function_call_output's output, a string or a list of text parts, as the tool message's text.
func respOutputText(raw json.RawMessage, param string) (string, error) {
	if text, ok := wire.String(raw); ok {
		return text, nil
	}
	var parts []respContentPart
	if json.Unmarshal(raw, &parts) != nil {
		return "", wire.InvalidRequest(param, "", "%s must be a string or a list of input_text parts.", param)
	}
	var text strings.Builder
	for k, p := range parts {
		if p.Type != "input_text" && p.Type != "output_text" && p.Type != "text" {
			return "", wire.InvalidRequest(fmt.Sprintf("%s[%d].type", param, k), "unsupported_content",
				"%s[%d] is a %q part: a tool's output is text here.", param, k, p.Type)
		}
		text.WriteString(p.Text)
	}
	return text.String(), nil
}

// respChatToolOf translates a tool: a function tool, the only kind a rig can call.
func respChatToolOf(raw json.RawMessage, i int) (respChatTool, error) {
	var t struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      json.RawMessage `json:"strict"`
	}
	param := fmt.Sprintf("tools[%d]", i)
	if json.Unmarshal(raw, &t) != nil {
		return respChatTool{}, wire.InvalidRequest(param, "", "%s must be a tool object.", param)
	}
	if t.Type != "function" {
		return respChatTool{}, wire.InvalidRequest(param+".type", "unsupported_tool",
			"%s is a %q tool: this platform runs open models on providers' GPUs and offers only function tools, which your code runs.",
			param, t.Type)
	}
	if t.Name == "" {
		return respChatTool{}, wire.InvalidRequest(param+".name", "", "%s, a function tool, needs a name.", param)
	}
	return respChatTool{Type: "function", Function: respChatFunction{Name: t.Name, Description: t.Description,
		Parameters: respNotNull(t.Parameters), Strict: respNotNull(t.Strict)}}, nil
}

// respChatToolChoice translates tool_choice: auto, none and required as they are, a function by its name in chat's
// shape.
func respChatToolChoice(raw json.RawMessage) (json.RawMessage, error) {
	if respIsNull(raw) {
		return nil, nil
	}
	if s, ok := wire.String(raw); ok {
		switch s {
		case "auto", "none", "required":
			return raw, nil
		}
		return nil, wire.InvalidRequest("tool_choice", "", "tool_choice must be auto, none, required or {\"type\": \"function\", \"name\": ...}.")
	}
	var c struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &c) != nil || c.Type != "function" || c.Name == "" {
		return nil, wire.InvalidRequest("tool_choice", "unsupported_tool",
			"tool_choice must be auto, none, required or {\"type\": \"function\", \"name\": ...}: only function tools are offered.")
	}
	return respJSON(map[string]any{"type": "function", "function": map[string]string{"name": c.Name}}), nil
}

// respChatResponseFormat translates text.format: text is chat's default, json_object and json_schema become
// response_format.
func respChatResponseFormat(text json.RawMessage) (json.RawMessage, error) {
	if respIsNull(text) {
		return nil, nil
	}
	var t struct {
		Format json.RawMessage `json:"format"`
	}
	if json.Unmarshal(text, &t) != nil {
		return nil, wire.InvalidRequest("text", "", "text must be an object.")
	}
	if respIsNull(t.Format) {
		return nil, nil
	}
	var f struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Schema      json.RawMessage `json:"schema,omitempty"`
		Strict      json.RawMessage `json:"strict,omitempty"`
	}
	if json.Unmarshal(t.Format, &f) != nil {
		return nil, wire.InvalidRequest("text.format", "", "text.format must be an object.")
	}
	switch f.Type {
	case "text":
		return nil, nil
	case "json_object":
		return json.RawMessage(`{"type":"json_object"}`), nil
	case "json_schema":
		if f.Name == "" || respIsNull(f.Schema) {
			return nil, wire.InvalidRequest("text.format", "", "text.format of type json_schema needs a name and a schema.")
		}
		type jsonSchema struct {
			Name        string          `json:"name"`
			Description string          `json:"description,omitempty"`
			Schema      json.RawMessage `json:"schema"`
			Strict      json.RawMessage `json:"strict,omitempty"`
		}
		return respJSON(struct {
			Type       string     `json:"type"`
			JSONSchema jsonSchema `json:"json_schema"`
		}{"json_schema", jsonSchema{f.Name, f.Description, f.Schema, respNotNull(f.Strict)}}), nil
	}
	return nil, wire.InvalidRequest("text.format.type", "", "text.format.type must be text, json_object or json_schema.")
}

func (Responses) ErrorBody(ge *wire.Error) []byte { return wire.OpenAIJSON(ge) }

// The answer.

// respChatCompletion is what the gateway reads of a whole chat completion.
type respChatCompletion struct {
	Choices []struct {
		Message struct {
			Content   *string `json:"content"`
			Refusal   *string `json:"refusal"`
			ToolCalls []struct {
				ID       string               `json:"id"`
				Function respChatFunctionCall `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *respChatUsage `json:"usage"`
}

// respChatUsage is a chat completion's usage.
type respChatUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// responseObject is a Response, the answer and what a stream's lifecycle events carry.
type responseObject struct {
	ID                 string                 `json:"id"`
	Object             string                 `json:"object"`
	CreatedAt          int64                  `json:"created_at"`
	Status             string                 `json:"status"`
	CompletedAt        *int64                 `json:"completed_at"`
	Error              json.RawMessage        `json:"error"`
	IncompleteDetails  *respIncompleteDetails `json:"incomplete_details"`
	Instructions       json.RawMessage        `json:"instructions"`
	MaxOutputTokens    json.RawMessage        `json:"max_output_tokens"`
	Model              string                 `json:"model"`
	Output             []any                  `json:"output"`
	ParallelToolCalls  bool                   `json:"parallel_tool_calls"`
	PreviousResponseID json.RawMessage        `json:"previous_response_id"`
	Reasoning          json.RawMessage        `json:"reasoning"`
	Store              bool                   `json:"store"`
	Temperature        json.RawMessage        `json:"temperature"`
	Text               json.RawMessage        `json:"text"`
	ToolChoice         json.RawMessage        `json:"tool_choice"`
	Tools              json.RawMessage        `json:"tools"`
	TopP               json.RawMessage        `json:"top_p"`
	Truncation         string                 `json:"truncation"`
	Usage              *responseUsage         `json:"usage"`
	User               json.RawMessage        `json:"user"`
	Metadata           json.RawMessage        `json:"metadata"`
	Background         bool                   `json:"background"`
}

type respIncompleteDetails struct {
	Reason string `json:"reason"`
}

type responseUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
	// Cost is what the request cost, in dollars, as an answer's usage tells it (package gateway's cost.go); absent when untold.
	Cost json.RawMessage `json:"cost,omitempty"`
}

// respMessageItem is an output message.
type respMessageItem struct {
	Type    string           `json:"type"`
	ID      string           `json:"id"`
	Status  string           `json:"status"`
	Role    string           `json:"role"`
	Content []respOutputPart `json:"content"`
}

// respOutputPart is an output message's text.
type respOutputPart struct {
	Type        string   `json:"type"`
	Text        string   `json:"text"`
	Annotations []string `json:"annotations"` // always empty: the rigs cite nothing
}

// respFunctionCallItem is a tool call.
type respFunctionCallItem struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

// responseShell is a Response with what the request sets, before any output.
func responseShell(t *Translation) *responseObject {
	var r responsesRequest
	_ = json.Unmarshal(t.Request, &r) // it was read once already, in ToChat
	orNull := func(raw json.RawMessage) json.RawMessage {
		if respIsNull(raw) {
			return json.RawMessage("null")
		}
		return raw
	}
	or := func(raw json.RawMessage, def string) json.RawMessage {
		if respIsNull(raw) {
			return json.RawMessage(def)
		}
		return raw
	}
	resp := &responseObject{ID: responseID(t.RequestID), Object: "response", CreatedAt: t.Created.Unix(), Status: "in_progress",
		Error: json.RawMessage("null"), Instructions: orNull(r.Instructions), MaxOutputTokens: orNull(r.MaxOutputTokens),
		Model: t.Model, Output: []any{}, ParallelToolCalls: string(r.ParallelToolCalls) != "false",
		PreviousResponseID: json.RawMessage("null"), Temperature: or(r.Temperature, "1"), TopP: or(r.TopP, "1"),
		Text: or(r.Text, `{"format":{"type":"text"}}`), ToolChoice: or(r.ToolChoice, `"auto"`), Tools: json.RawMessage("[]"),
		Truncation: "disabled", User: orNull(r.SafetyIdentifier), Metadata: or(r.Metadata, "{}")}
	if string(resp.User) == "null" {
		resp.User = orNull(r.User)
	}
	resp.Reasoning = json.RawMessage(`{"effort":null,"summary":null}`)
	if !respIsNull(r.Reasoning) {
		var reasoning struct {
			Effort json.RawMessage `json:"effort"`
		}
		if json.Unmarshal(r.Reasoning, &reasoning) == nil && !respIsNull(reasoning.Effort) {
			resp.Reasoning = respJSON(map[string]json.RawMessage{"effort": reasoning.Effort, "summary": json.RawMessage("null")})
		}
	}
	if len(r.Tools) > 0 {
		resp.Tools = respJSON(r.Tools)
	}
	return resp
}

// finish sets a Response's status from the chat's finish reason, and its usage with the request's cost.
func (resp *responseObject) finish(finishReason string, u *respChatUsage, at int64, t *Translation) {
	switch finishReason {
	case "length":
		resp.Status, resp.IncompleteDetails = "incomplete", &respIncompleteDetails{Reason: "max_output_tokens"}
	case "content_filter":
		resp.Status, resp.IncompleteDetails = "incomplete", &respIncompleteDetails{Reason: "content_filter"}
	default:
		resp.Status, resp.CompletedAt = "completed", &at
	}
	if u != nil {
		ru := &responseUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
		if u.PromptTokensDetails != nil {
			ru.InputTokensDetails.CachedTokens = u.PromptTokensDetails.CachedTokens
		}
		if u.CompletionTokensDetails != nil {
			ru.OutputTokensDetails.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
		}
		if ru.TotalTokens == 0 {
			ru.TotalTokens = ru.InputTokens + ru.OutputTokens
		}
		if t.Cost != nil {
			if cost, ok := t.Cost(&admission.TokenCount{Input: max(u.PromptTokens, 0), Output: max(u.CompletionTokens, 0),
				Cached: max(ru.InputTokensDetails.CachedTokens, 0)}); ok {
				ru.Cost = json.RawMessage(cost.Decimal(12))
			}
		}
		resp.Usage = ru
	}
}

// responseID names a Response by the attempt's request id.
func responseID(requestID string) string { return "resp_" + strings.TrimPrefix(requestID, "req_") }

// itemID names an output item of a Response: "msg_" or "fc_", the request id, and the item's place.
func itemID(prefix, requestID string, index int) string {
	return prefix + strings.TrimPrefix(requestID, "req_") + "_" + strconv.Itoa(index)
}

func (Responses) Answer(chat []byte, t *Translation) ([]byte, error) {
	var c respChatCompletion
	if err := json.Unmarshal(chat, &c); err != nil {
		return nil, err
	}
	if len(c.Choices) == 0 {
		return nil, fmt.Errorf("a chat completion without a choice")
	}
	ch := c.Choices[0]
	resp := responseShell(t)
	resp.finish(ch.FinishReason, c.Usage, time.Now().Unix(), t)
	itemStatus := "completed"
	if resp.Status == "incomplete" {
		itemStatus = "incomplete"
	}
	text := ""
	if ch.Message.Content != nil {
		text = *ch.Message.Content
	} else if ch.Message.Refusal != nil {
		text = *ch.Message.Refusal
	}
	if text != "" || len(ch.Message.ToolCalls) == 0 {
		resp.Output = append(resp.Output, respMessageItem{Type: "message", ID: itemID("msg_", t.RequestID, len(resp.Output)),
			Status: itemStatus, Role: "assistant", Content: []respOutputPart{{Type: "output_text", Text: text, Annotations: []string{}}}})
	}
	for _, tc := range ch.Message.ToolCalls {
		resp.Output = append(resp.Output, respFunctionCallItem{Type: "function_call", ID: itemID("fc_", t.RequestID, len(resp.Output)),
			CallID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments, Status: "completed"})
	}
	return respMarshal(resp)
}

// The stream.

// responsesStream translates a chat completion stream into the Responses API's events.
type responsesStream struct {
	t       *Translation
	resp    *responseObject
	seq     int
	started bool
	finish  string
	usage   *respChatUsage
	open    int // the output item being written, -1 when none
	text    strings.Builder
	calls   map[int]int // a tool call's index in the chat stream to its output item's
	args    map[int]*strings.Builder
	out     bytes.Buffer
}

func (Responses) Stream(t *Translation) ChunkTranslator {
	return &responsesStream{t: t, resp: responseShell(t), open: -1, calls: map[int]int{}, args: map[int]*strings.Builder{}}
}

// responseEvent is one event of the stream: its type, its sequence number and the members of its type.
type responseEvent struct {
	Type           string          `json:"type"`
	SequenceNumber int             `json:"sequence_number"`
	Response       *responseObject `json:"response,omitempty"`
	OutputIndex    *int            `json:"output_index,omitempty"`
	ItemID         string          `json:"item_id,omitempty"`
	ContentIndex   *int            `json:"content_index,omitempty"`
	Item           any             `json:"item,omitempty"`
	Part           *respOutputPart `json:"part,omitempty"`
	Delta          *string         `json:"delta,omitempty"`
	Text           *string         `json:"text,omitempty"`
	Arguments      *string         `json:"arguments,omitempty"`
	Logprobs       *[]string       `json:"logprobs,omitempty"`
}

// emit writes an event as OpenAI sends it: its event line, its data line, a blank line.
func (s *responsesStream) emit(e responseEvent) {
	e.SequenceNumber = s.seq
	s.seq++
	s.out.WriteString("event: ")
	s.out.WriteString(e.Type)
	s.out.WriteString("\ndata: ")
	s.out.Write(respJSON(e))
	s.out.WriteString("\n\n")
}

// snapshot is the Response as it stands, for a lifecycle event: its own copy, since the stream goes on.
func (s *responsesStream) snapshot() *responseObject {
	r := *s.resp
	r.Output = append([]any{}, s.resp.Output...)
	return &r
}

// respChatChunk is what the gateway reads of a streamed chunk.
type respChatChunk struct {
	Choices []struct {
		Delta struct {
			Content   string `json:"content"`
			Refusal   string `json:"refusal"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *respChatUsage `json:"usage"`
}

func (s *responsesStream) Chunk(payload []byte) ([]byte, error) {
	var c respChatChunk
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, err
	}
	s.out.Reset()
	s.start()
	if c.Usage != nil {
		s.usage = c.Usage
	}
	for _, ch := range c.Choices {
		d := ch.Delta
		if text := d.Content + d.Refusal; text != "" {
			s.appendText(text)
		}
		for _, tc := range d.ToolCalls {
			s.appendCall(tc.Index, tc.ID, tc.Function.Name, tc.Function.Arguments)
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			s.finish = *ch.FinishReason
		}
		break // the Responses API answers one choice
	}
	return bytes.Clone(s.out.Bytes()), nil
}

// start sends response.created and response.in_progress, once.
func (s *responsesStream) start() {
	if s.started {
		return
	}
	s.started = true
	s.emit(responseEvent{Type: "response.created", Response: s.snapshot()})
	s.emit(responseEvent{Type: "response.in_progress", Response: s.snapshot()})
}

func respIntp(i int) *int { return &i }

// appendText adds text to the message item.
func (s *responsesStream) appendText(text string) {
	s.openMessage()
	item := s.resp.Output[s.open].(*respMessageItem)
	s.text.WriteString(text)
	s.emit(responseEvent{Type: "response.output_text.delta", OutputIndex: respIntp(s.open), ItemID: item.ID, ContentIndex: respIntp(0),
		Delta: &text, Logprobs: &[]string{}})
}

// openMessage opens the message item, after closing any other item open, unless it is open.
func (s *responsesStream) openMessage() {
	if s.open >= 0 {
		if _, ok := s.resp.Output[s.open].(*respMessageItem); ok {
			return
		}
		s.closeOpen()
	}
	s.open = len(s.resp.Output)
	item := &respMessageItem{Type: "message", ID: itemID("msg_", s.t.RequestID, s.open), Status: "in_progress", Role: "assistant",
		Content: []respOutputPart{}}
	s.resp.Output = append(s.resp.Output, item)
	s.emit(responseEvent{Type: "response.output_item.added", OutputIndex: respIntp(s.open), Item: item})
	s.emit(responseEvent{Type: "response.content_part.added", OutputIndex: respIntp(s.open), ItemID: item.ID, ContentIndex: respIntp(0),
		Part: &respOutputPart{Type: "output_text", Text: "", Annotations: []string{}}})
}

// appendCall adds to the tool call with the chat stream's index: a new one opens its function_call item after
// closing the item open; its arguments come as deltas.
func (s *responsesStream) appendCall(index int, id, name, arguments string) {
	at, seen := s.calls[index]
	if !seen {
		s.closeOpen()
		at = len(s.resp.Output)
		s.calls[index], s.args[index] = at, &strings.Builder{}
		item := &respFunctionCallItem{Type: "function_call", ID: itemID("fc_", s.t.RequestID, at), CallID: id, Name: name,
			Status: "in_progress"}
		s.resp.Output = append(s.resp.Output, item)
		s.open = at
		s.emit(responseEvent{Type: "response.output_item.added", OutputIndex: respIntp(at), Item: item})
	}
	item := s.resp.Output[at].(*respFunctionCallItem)
	if item.CallID == "" {
		item.CallID = id
	}
	if item.Name == "" {
		item.Name = name
	}
	if arguments == "" {
		return
	}
	s.args[index].WriteString(arguments)
	if s.open == at {
		s.emit(responseEvent{Type: "response.function_call_arguments.delta", OutputIndex: respIntp(at), ItemID: item.ID, Delta: &arguments})
	}
	// Arguments of a call already closed (a stream that interleaves its calls) are kept for the final
	// response, without an event.
	item.Arguments = s.args[index].String()
}

// closeOpen ends the output item open, if any, with its done events.
func (s *responsesStream) closeOpen() {
	if s.open < 0 {
		return
	}
	at := s.open
	s.open = -1
	status := "completed"
	if s.finish == "length" || s.finish == "content_filter" {
		status = "incomplete"
	}
	switch item := s.resp.Output[at].(type) {
	case *respMessageItem:
		text := s.text.String()
		part := respOutputPart{Type: "output_text", Text: text, Annotations: []string{}}
		s.emit(responseEvent{Type: "response.output_text.done", OutputIndex: respIntp(at), ItemID: item.ID, ContentIndex: respIntp(0),
			Text: &text, Logprobs: &[]string{}})
		s.emit(responseEvent{Type: "response.content_part.done", OutputIndex: respIntp(at), ItemID: item.ID, ContentIndex: respIntp(0),
			Part: &part})
		item.Content, item.Status = []respOutputPart{part}, status
		s.emit(responseEvent{Type: "response.output_item.done", OutputIndex: respIntp(at), Item: item})
	case *respFunctionCallItem:
		args := item.Arguments
		s.emit(responseEvent{Type: "response.function_call_arguments.done", OutputIndex: respIntp(at), ItemID: item.ID, Arguments: &args})
		item.Status = status
		s.emit(responseEvent{Type: "response.output_item.done", OutputIndex: respIntp(at), Item: item})
	}
}

// fail is the Responses API's error event, which ends a stream that failed midway.
func (s *responsesStream) Fail(message string) []byte {
	s.out.Reset()
	e := struct {
		Type           string  `json:"type"`
		Code           string  `json:"code"`
		Message        string  `json:"message"`
		Param          *string `json:"param"`
		SequenceNumber int     `json:"sequence_number"`
	}{Type: "error", Code: "server_error", Message: message, SequenceNumber: s.seq}
	s.seq++
	s.out.WriteString("event: error\ndata: ")
	s.out.Write(respJSON(e))
	s.out.WriteString("\n\n")
	return bytes.Clone(s.out.Bytes())
}

func (s *responsesStream) End() []byte {
	s.out.Reset()
	s.start()
	if len(s.resp.Output) == 0 {
		s.openMessage() // an answer without output still has its (empty) message, as a whole answer does
	}
	s.closeOpen()
	s.resp.finish(s.finish, s.usage, time.Now().Unix(), s.t)
	typ := "response.completed"
	if s.resp.Status == "incomplete" {
		typ = "response.incomplete"
	}
	s.emit(responseEvent{Type: typ, Response: s.snapshot()})
	return bytes.Clone(s.out.Bytes())
}
