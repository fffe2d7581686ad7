package simulation

import (
	"encoding/json"
	"errors"
	"strings"
)

// The OpenAI wire format, as much of it as simbackend reads and writes. Fields a request may
// carry that the simulation has no use for (temperature, top_p, parallel_tool_calls, ...) are
// ignored.

type chatRequest struct {
	Model               string          `json:"model"`
	Messages            []chatMessage   `json:"messages"`
	Stream              bool            `json:"stream"`
	StreamOptions       *streamOptions  `json:"stream_options"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	N                   *int            `json:"n"`
	Tools               []chatTool      `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []toolCall      `json:"tool_calls"`   // an assistant's calls
	ToolCallID string          `json:"tool_call_id"` // the call a tool message answers
}

// chatTool is a tool a request offers: a function with the JSON Schema of its arguments.
type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// toolCall is a call of a function, in an assistant message or an answer.
type toolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"` // function
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // a JSON object, as text
}

// text is the message's text: a string, the text parts of an array of parts, or nothing.
func (m chatMessage) text() (string, error) {
	if len(m.Content) == 0 || string(m.Content) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(m.Content, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(m.Content, &parts); err != nil {
		return "", errors.New("content must be a string or an array of content parts")
	}
	var texts []string
	for _, p := range parts {
		if p.Type == "text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n"), nil
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type completionRequest struct {
	Model         string          `json:"model"`
	Prompt        json.RawMessage `json:"prompt"`
	Stream        bool            `json:"stream"`
	StreamOptions *streamOptions  `json:"stream_options"`
	MaxTokens     *int            `json:"max_tokens"`
	N             *int            `json:"n"`
}

type embeddingRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
}

// texts decodes an input or a prompt: a string, an array of strings, an array of token ids or
// an array of such arrays. Token ids stand for themselves: each is one token, and their
// decimal spelling keys the deterministic output.
func texts(raw json.RawMessage) (texts []string, tokens []int, err error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return []string{s}, []int{CountTokens(s)}, nil
	}
	var ss []string
	if err := json.Unmarshal(raw, &ss); err == nil {
		for _, s := range ss {
			texts, tokens = append(texts, s), append(tokens, CountTokens(s))
		}
		return texts, tokens, nil
	}
	var ids []int
	if err := json.Unmarshal(raw, &ids); err == nil {
		return []string{idsText(ids)}, []int{len(ids)}, nil
	}
	var idss [][]int
	if err := json.Unmarshal(raw, &idss); err == nil {
		for _, ids := range idss {
			texts, tokens = append(texts, idsText(ids)), append(tokens, len(ids))
		}
		return texts, tokens, nil
	}
	return nil, nil, errors.New("must be a string, an array of strings, or token arrays")
}

func idsText(ids []int) string {
	b, _ := json.Marshal(ids)
	return string(b)
}

type usage struct {
	PromptTokens        int            `json:"prompt_tokens"`
	CompletionTokens    int            `json:"completion_tokens"`
	TotalTokens         int            `json:"total_tokens"`
	PromptTokensDetails *promptDetails `json:"prompt_tokens_details,omitempty"` // with Options.PrefixCache only
}

// promptDetails are the prompt tokens served from the prefix cache, as vLLM reports them.
type promptDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

type chatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"` // chat.completion
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   usage        `json:"usage"`
}

type chatChoice struct {
	Index        int             `json:"index"`
	Message      assistantReply  `json:"message"`
	Logprobs     json.RawMessage `json:"logprobs"` // always null
	FinishReason string          `json:"finish_reason"`
}

// assistantReply is the message of an answer: text, or (content null) tool calls.
type assistantReply struct {
	Role      string     `json:"role"`
	Content   *string    `json:"content"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`
}

// streamChunk is a chat.completion.chunk or a streamed text_completion. Usage is left out
// unless the client asked for it; then it is null on every chunk but the last, which has no
// choices, as OpenAI sends it.
type streamChunk struct {
	ID      string          `json:"id"`
	Object  string          `json:"object"`
	Created int64           `json:"created"`
	Model   string          `json:"model"`
	Choices []any           `json:"choices"`
	Usage   json.RawMessage `json:"usage,omitempty"`
}

type chatDelta struct {
	Index        int             `json:"index"`
	Delta        deltaContent    `json:"delta"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

type deltaContent struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

// toolCallDelta is the delta of a streamed tool call, as OpenAI streams it: the first carries
// the role, a null content and the call's index, id, type, name and empty arguments; the next
// ones the call's index and a piece of its arguments.
type toolCallDelta struct {
	Role      string              `json:"role,omitempty"`
	Content   json.RawMessage     `json:"content,omitempty"` // null in the first
	ToolCalls []toolCallDeltaItem `json:"tool_calls"`
}

type toolCallDeltaItem struct {
	Index    int               `json:"index"`
	ID       string            `json:"id,omitempty"`
	Type     string            `json:"type,omitempty"`
	Function functionCallDelta `json:"function"`
}

type functionCallDelta struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// toolDeltaChoice is a chunk's choice that carries a tool call delta.
type toolDeltaChoice struct {
	Index        int             `json:"index"`
	Delta        toolCallDelta   `json:"delta"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

type textCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"` // text_completion
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []textChoice `json:"choices"`
	Usage   usage        `json:"usage"`
}

type textChoice struct {
	Text         string          `json:"text"`
	Index        int             `json:"index"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

type embeddingList struct {
	Object string          `json:"object"` // list
	Data   []embeddingItem `json:"data"`
	Model  string          `json:"model"`
	Usage  embeddingUsage  `json:"usage"`
}

type embeddingItem struct {
	Object    string `json:"object"` // embedding
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"` // []float32, or a base64 string of little-endian float32
}

type embeddingUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

type modelList struct {
	Object string      `json:"object"` // list
	Data   []modelCard `json:"data"`
}

type modelCard struct {
	ID      string `json:"id"`
	Object  string `json:"object"` // model
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

var jsonNull = json.RawMessage("null")
