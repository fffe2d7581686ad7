package simulation_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

func anthropicClient(url string) anthropic.Client {
	return anthropic.NewClient(option.WithBaseURL(url+"/"), option.WithAPIKey("x"), option.WithMaxRetries(0))
}

// chatAnswer is what the chat path answers a chat completions body: the text, or a call's
// arguments, with the finish reason and usage.
type chatAnswer struct {
	text, finish                   string
	prompt, completion, cachedToks int
}

func askChat(t *testing.T, url, body string) chatAnswer {
	t.Helper()
	status, b := post(t, url+"/v1/chat/completions", body)
	if status != http.StatusOK {
		t.Fatalf("chat: status %d: %s", status, b)
	}
	var c struct {
		Choices []struct {
			Message struct {
				Content   *string `json:"content"`
				ToolCalls []struct {
					Function struct {
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens        int `json:"prompt_tokens"`
			CompletionTokens    int `json:"completion_tokens"`
			PromptTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &c); err != nil || len(c.Choices) != 1 {
		t.Fatalf("chat answer %s: %v", b, err)
	}
	ch := c.Choices[0]
	a := chatAnswer{finish: ch.FinishReason, prompt: c.Usage.PromptTokens, completion: c.Usage.CompletionTokens,
		cachedToks: c.Usage.PromptTokensDetails.CachedTokens}
	switch {
	case len(ch.Message.ToolCalls) == 1:
		a.text = ch.Message.ToolCalls[0].Function.Arguments
	case ch.Message.Content != nil:
		a.text = *ch.Message.Content
	}
	return a
}

// streamMessage streams a Messages request, accumulating the events as the SDK does, and
// returns the message with the events' types in order.
func streamMessage(t *testing.T, client anthropic.Client, params anthropic.MessageNewParams) (anthropic.Message, []string) {
	t.Helper()
	stream := client.Messages.NewStreaming(context.Background(), params)
	var msg anthropic.Message
	var types []string
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		if err := msg.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	return msg, types
}

// wantMessageEvents checks a Messages stream's events as the SDK hands them out (it keeps pings
// to itself): message_start, one content block fed by deltas, message_delta, message_stop.
func wantMessageEvents(t *testing.T, types []string) {
	t.Helper()
	n := len(types)
	if n < 6 || types[0] != "message_start" || types[1] != "content_block_start" ||
		types[n-3] != "content_block_stop" || types[n-2] != "message_delta" || types[n-1] != "message_stop" {
		t.Fatalf("events %v", types)
	}
	for _, typ := range types[2 : n-3] {
		if typ != "content_block_delta" {
			t.Fatalf("events %v", types)
		}
	}
}

var msgID = regexp.MustCompile(`^msg_[A-Z2-7]{26}$`)

// A Messages request gets what chat completions answer the same conversation: the same text,
// token for token, and the same usage. max_tokens cuts the answer when it is below the drawn
// length (stop_reason max_tokens, the chat answer with that limit) and lets it end otherwise
// (end_turn, the chat answer without a limit). Streamed, the SDK accumulates the same message.
func TestMessagesAnswerAsChatCompletionsDo(t *testing.T) {
	t.Parallel()
	_, url := setup(t, nativeOptions())
	client := anthropicClient(url)
	chatBody := `{"model":"sim-model",%s"messages":[{"role":"system","content":"Be brief."},
		{"role":"user","content":"Which GPU is serving me?"},{"role":"assistant","content":"An H100."},
		{"role":"user","content":"And how fast is it?"}]}`
	params := anthropic.MessageNewParams{Model: "sim-model", System: []anthropic.TextBlockParam{{Text: "Be brief."}},
		Messages: []anthropic.MessageParam{
			anthropic.NewUserMessage(anthropic.NewTextBlock("Which GPU is serving me?")),
			anthropic.NewAssistantMessage(anthropic.NewTextBlock("An H100.")),
			anthropic.NewUserMessage(anthropic.NewTextBlock("And how fast is it?"))}}

	for _, c := range []struct {
		name      string
		maxTokens int64
		chatLimit string
		stop      anthropic.StopReason
	}{
		{"cut", 7, `"max_tokens":7,`, anthropic.StopReasonMaxTokens},
		{"whole", 1024, ``, anthropic.StopReasonEndTurn},
	} {
		want := askChat(t, url, strings.Replace(chatBody, "%s", c.chatLimit, 1))
		params.MaxTokens = c.maxTokens
		msg, err := client.Messages.New(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		if !msgID.MatchString(msg.ID) || msg.Type != "message" || msg.Role != "assistant" || msg.Model != "sim-model" ||
			len(msg.Content) != 1 || msg.Content[0].Type != "text" || msg.StopReason != c.stop || msg.StopSequence != "" {
			t.Fatalf("%s: message %s", c.name, msg.RawJSON())
		}
		if msg.Content[0].Text != want.text || want.text == "" {
			t.Errorf("%s: text %q, chat's %q", c.name, msg.Content[0].Text, want.text)
		}
		u := msg.Usage
		if u.InputTokens != int64(want.prompt) || u.OutputTokens != int64(want.completion) || u.CacheReadInputTokens != 0 ||
			u.CacheCreationInputTokens != 0 {
			t.Errorf("%s: usage %s, chat's %+v", c.name, u.RawJSON(), want)
		}
		if c.name == "cut" && u.OutputTokens != 7 {
			t.Errorf("cut: %d output tokens", u.OutputTokens)
		}

		streamed, types := streamMessage(t, client, params)
		wantMessageEvents(t, types)
		if !msgID.MatchString(streamed.ID) || len(streamed.Content) != 1 || streamed.Content[0].Text != want.text ||
			streamed.StopReason != c.stop || streamed.Usage.InputTokens != u.InputTokens || streamed.Usage.OutputTokens != u.OutputTokens {
			t.Errorf("%s: streamed message %s", c.name, streamed.RawJSON())
		}
	}

	// A limit as high as clients send (64000, above what chat completions take) only bounds.
	status, b := post(t, url+"/v1/messages", `{"model":"sim-model","max_tokens":64000,"messages":[{"role":"user","content":"hi"}]}`)
	if m := object(t, b); status != http.StatusOK || m["stop_reason"] != "end_turn" {
		t.Fatalf("max_tokens 64000: %d %s", status, b)
	}
}

// The prefix cache is the chat path's: the second request of a conversation reports the first
// one's prompt cached, in Anthropic's terms (input_tokens without the cache_read_input_tokens),
// and a chat request of the same conversation reports the same split.
func TestMessagesReportCachedTokensApart(t *testing.T) {
	t.Parallel()
	opts := nativeOptions()
	opts.PrefixCache = true
	_, url := setup(t, opts)
	client := anthropicClient(url)
	system := strings.Repeat("You answer questions about GPU rentals briefly and exactly. ", 8)
	first := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What does an hour of an RTX 4090 cost?"))}
	params := anthropic.MessageNewParams{Model: "sim-model", MaxTokens: 4, System: []anthropic.TextBlockParam{{Text: system}}, Messages: first}
	one, err := client.Messages.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if one.Usage.CacheReadInputTokens != 0 || one.Usage.InputTokens < 64 {
		t.Fatalf("first request: %s, want a prompt of 64 tokens or more and none cached", one.Usage.RawJSON())
	}
	params.Messages = append(first, anthropic.NewAssistantMessage(anthropic.NewTextBlock("About forty cents.")),
		anthropic.NewUserMessage(anthropic.NewTextBlock("And an H100?")))
	two, err := client.Messages.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if cached := one.Usage.InputTokens / 16 * 16; two.Usage.CacheReadInputTokens != cached ||
		two.Usage.InputTokens+two.Usage.CacheReadInputTokens <= one.Usage.InputTokens {
		t.Fatalf("second request: %s, want the first's %d tokens cached to the block: %d", two.Usage.RawJSON(), one.Usage.InputTokens, cached)
	}

	// The same conversation on chat completions, then on Messages again: the whole prompt but
	// its last token is cached now, and both say so.
	chat := askChat(t, url, `{"model":"sim-model","max_tokens":4,"messages":[{"role":"system","content":"`+system+`"},
		{"role":"user","content":"What does an hour of an RTX 4090 cost?"},{"role":"assistant","content":"About forty cents."},
		{"role":"user","content":"And an H100?"}]}`)
	again, err := client.Messages.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	total := two.Usage.InputTokens + two.Usage.CacheReadInputTokens
	if chat.prompt != int(total) || chat.cachedToks != int(total-1)/16*16 ||
		again.Usage.CacheReadInputTokens != int64(chat.cachedToks) || again.Usage.InputTokens != total-again.Usage.CacheReadInputTokens {
		t.Fatalf("chat %+v, then Messages %s; the prompt has %d tokens", chat, again.Usage.RawJSON(), total)
	}
}

// weatherParams offers the tools of weatherTools (tools_test.go) to a Messages request.
func weatherParams(question string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{Model: "sim-model", MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(question))},
		Tools: []anthropic.ToolUnionParam{
			{OfTool: &anthropic.ToolParam{Name: "get_weather", Description: anthropic.String("The weather in a city."),
				InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{
					"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"},
					"units": map[string]any{"type": "string", "enum": []string{"c", "f"}}},
					Required: []string{"city", "days"}}}},
			{OfTool: &anthropic.ToolParam{Name: "describe", InputSchema: anthropic.ToolInputSchemaParam{
				Properties: map[string]any{"s": map[string]any{"type": "string"}, "n": map[string]any{"type": "number"},
					"i": map[string]any{"type": "integer"}, "b": map[string]any{"type": "boolean"},
					"a": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
					"o": map[string]any{"type": "object"}, "maybe": map[string]any{"type": []string{"null", "string"}},
					"any": map[string]any{}},
				Required: []string{"s", "n", "i", "b", "a", "o", "maybe", "any"}}}},
		}}
}

var toolUseID = regexp.MustCompile(`^toolu_[0-9a-f]{24}$`)

// Tools given with a tool_choice that forces a call get one, as chat completions make it: the
// placeholder arguments as the tool_use block's input, their tokens the output, stop_reason
// tool_use; streamed, the input comes in input_json_delta pieces. max_tokens cuts a call short
// (input {}); the tool's result is answered with text, with the call and the result counted in
// the prompt as chat completions count them.
func TestMessagesCallAToolWhenToolChoiceForcesOne(t *testing.T) {
	t.Parallel()
	_, url := setup(t, nativeOptions())
	client := anthropicClient(url)
	chatCall := askChat(t, url, `{"model":"sim-model",`+weatherTools+`,"tool_choice":{"type":"function","function":{"name":"describe"}},
		"messages":[{"role":"user","content":"Describe Lyon."}]}`)

	params := weatherParams("Describe Lyon.")
	params.ToolChoice = anthropic.ToolChoiceParamOfTool("describe")
	call, err := client.Messages.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if len(call.Content) != 1 || call.Content[0].Type != "tool_use" || call.Content[0].Name != "describe" ||
		!toolUseID.MatchString(call.Content[0].ID) || string(call.Content[0].Input) != chatCall.text ||
		call.StopReason != anthropic.StopReasonToolUse {
		t.Fatalf("tool call %s", call.RawJSON())
	}
	if call.Usage.InputTokens != int64(chatCall.prompt) || call.Usage.OutputTokens != int64(chatCall.completion) {
		t.Errorf("usage %s, chat's %+v", call.Usage.RawJSON(), chatCall)
	}

	// "any" calls the first tool; streamed, its input arrives in pieces that make it whole.
	params = weatherParams("Weather in Lyon?")
	params.ToolChoice = anthropic.ToolChoiceUnionParam{OfAny: &anthropic.ToolChoiceAnyParam{}}
	streamed, types := streamMessage(t, client, params)
	wantMessageEvents(t, types)
	if len(streamed.Content) != 1 || streamed.Content[0].Type != "tool_use" || streamed.Content[0].Name != "get_weather" ||
		string(streamed.Content[0].Input) != `{"city":"example","days":1}` || streamed.StopReason != anthropic.StopReasonToolUse ||
		streamed.Usage.OutputTokens != 15 || len(types) < 2+2+3 {
		t.Fatalf("streamed tool call %s (events %v)", streamed.RawJSON(), types)
	}

	// A call cut by max_tokens: its input is not an object yet.
	params.MaxTokens = 4
	cut, err := client.Messages.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if len(cut.Content) != 1 || cut.Content[0].Type != "tool_use" || string(cut.Content[0].Input) != "{}" ||
		cut.StopReason != anthropic.StopReasonMaxTokens || cut.Usage.OutputTokens != 4 {
		t.Fatalf("cut call %s", cut.RawJSON())
	}

	// The result of the call goes back with it: the answer is text, as on chat completions.
	first, err := client.Messages.New(context.Background(), weatherParams("Weather in Lyon?"))
	if err != nil {
		t.Fatal(err)
	}
	params = weatherParams("Weather in Lyon?")
	params.MaxTokens = 6
	params.Messages = append(params.Messages, first.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(first.Content[0].ID, "Sunny, 21 C.", false)))
	answer, err := client.Messages.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	chatAnswer := askChat(t, url, `{"model":"sim-model","max_tokens":6,`+weatherTools+`,"messages":[
		{"role":"user","content":"Weather in Lyon?"},
		{"role":"assistant","content":"","tool_calls":[{"id":"`+first.Content[0].ID+`","type":"function",
			"function":{"name":"get_weather","arguments":"{\"city\":\"example\",\"days\":1}"}}]},
		{"role":"tool","tool_call_id":"`+first.Content[0].ID+`","content":"Sunny, 21 C."}]}`)
	if len(answer.Content) != 1 || answer.Content[0].Type != "text" || answer.Content[0].Text != chatAnswer.text ||
		answer.Usage.InputTokens != int64(chatAnswer.prompt) || answer.Usage.OutputTokens != 6 {
		t.Fatalf("answer to the tool's result %s; chat's %+v", answer.RawJSON(), chatAnswer)
	}

	// "none" is answered with text.
	params = weatherParams("Weather in Lyon?")
	params.ToolChoice = anthropic.ToolChoiceUnionParam{OfNone: &anthropic.ToolChoiceNoneParam{}}
	text, err := client.Messages.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if len(text.Content) != 1 || text.Content[0].Type != "text" {
		t.Fatalf("tool_choice none: %s", text.RawJSON())
	}
}

// Refusals come in Anthropic's error shape, with Anthropic's error type for the status.
func TestMessagesErrorsHaveAnthropicShape(t *testing.T) {
	t.Parallel()
	_, url := setup(t, nativeOptions())
	for _, c := range []struct {
		name, body string
		status     int
		typ        string
	}{
		{"no max_tokens", `{"model":"sim-model","messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error"},
		{"max_tokens 0", `{"model":"sim-model","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error"},
		{"no messages", `{"model":"sim-model","max_tokens":5,"messages":[]}`, 400, "invalid_request_error"},
		{"not JSON", `{"model":`, 400, "invalid_request_error"},
		{"an image", `{"model":"sim-model","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]}`,
			400, "invalid_request_error"},
		{"a tool not offered", `{"model":"sim-model","max_tokens":5,"messages":[{"role":"user","content":"hi"}],
			"tools":[{"name":"a","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"b"}}`, 400, "invalid_request_error"},
		{"a call without tools", `{"model":"sim-model","max_tokens":5,"messages":[{"role":"user","content":"hi"}],
			"tool_choice":{"type":"any"}}`, 400, "invalid_request_error"},
		{"another model", `{"model":"gpt-9","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, 404, "not_found_error"},
	} {
		status, b := post(t, url+"/v1/messages", c.body)
		if status != c.status {
			t.Errorf("%s: status %d: %s", c.name, status, b)
			continue
		}
		m := object(t, b)
		wantKeys(t, c.name, m, "type", "error")
		wantKeys(t, c.name+": error", m["error"], "type", "message")
		if e := m["error"].(map[string]any); m["type"] != "error" || e["type"] != c.typ || e["message"] == "" {
			t.Errorf("%s: %s", c.name, b)
		}
	}

	// The SDK reads them as Anthropic's errors.
	client := anthropicClient(url)
	_, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "gpt-9", MaxTokens: 5,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || string(apiErr.Type()) != "not_found_error" {
		t.Fatalf("error %v", err)
	}

	// A failure the fail rate picks is a 500 api_error.
	opts := nativeOptions()
	opts.FailRate = 1
	_, failing := setup(t, opts)
	status, b := post(t, failing+"/v1/messages", `{"model":"sim-model","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
	if m := object(t, b); status != http.StatusInternalServerError || m["error"].(map[string]any)["type"] != "api_error" {
		t.Fatalf("failure: %d %s", status, b)
	}
}
