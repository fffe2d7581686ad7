package dialect

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/responses"

	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/web/gateway/internal/wire"
)

// sameJSONValue fails unless got and want are the same JSON value.
func sameJSONValue(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("not JSON: %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("the test's JSON: %v", err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestResponsesRequestBecomesChat(t *testing.T) {
	body := `{"model":"llama-3-8b:realtime","instructions":"Be brief.","stream":true,"store":false,
		"max_output_tokens":64,"temperature":0.5,"top_p":0.9,"parallel_tool_calls":false,
		"input":[
			{"role":"developer","content":"Answer in French."},
			{"type":"message","role":"user","content":[{"type":"input_text","text":"Weather in Paris and Lyon?"},
				{"type":"input_image","image_url":"data:image/png;base64,AAAA","detail":"low"}]},
			{"type":"message","role":"assistant","id":"msg_1","status":"completed",
				"content":[{"type":"output_text","text":"Let me look.","annotations":[]}]},
			{"type":"function_call","id":"fc_1","call_id":"call_a","name":"weather","arguments":"{\"city\":\"Paris\"}","status":"completed"},
			{"type":"function_call","id":"fc_2","call_id":"call_b","name":"weather","arguments":"{\"city\":\"Lyon\"}"},
			{"type":"function_call_output","call_id":"call_a","output":"18C"},
			{"type":"function_call_output","call_id":"call_b","output":[{"type":"input_text","text":"21"},{"type":"input_text","text":"C"}]},
			{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"xyz"},
			{"role":"user","content":"And <tomorrow>?"}
		],
		"tools":[{"type":"function","name":"weather","description":"The weather in a city.","strict":true,
			"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],
		"tool_choice":{"type":"function","name":"weather"},
		"text":{"format":{"type":"json_schema","name":"forecast","strict":true,"schema":{"type":"object"}}},
		"reasoning":{"effort":"low"},"safety_identifier":"user-7","metadata":{"k":"v"},
		"gpumarket":{"tier":"standard","max_ttft_ms":900},"provider":{"order":["a","b"],"allow_fallbacks":false}}`
	chat, err := Responses{}.ToChat([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	sameJSONValue(t, chat, `{"model":"llama-3-8b:realtime","stream":true,"max_tokens":64,"temperature":0.5,"top_p":0.9,
		"parallel_tool_calls":false,
		"messages":[
			{"role":"system","content":"Be brief."},
			{"role":"system","content":"Answer in French."},
			{"role":"user","content":[{"type":"text","text":"Weather in Paris and Lyon?"},
				{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","detail":"low"}}]},
			{"role":"assistant","content":"Let me look.","tool_calls":[
				{"id":"call_a","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}},
				{"id":"call_b","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Lyon\"}"}}]},
			{"role":"tool","tool_call_id":"call_a","content":"18C"},
			{"role":"tool","tool_call_id":"call_b","content":"21C"},
			{"role":"user","content":"And <tomorrow>?"}
		],
		"tools":[{"type":"function","function":{"name":"weather","description":"The weather in a city.","strict":true,
			"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],
		"tool_choice":{"type":"function","function":{"name":"weather"}},
		"response_format":{"type":"json_schema","json_schema":{"name":"forecast","strict":true,"schema":{"type":"object"}}},
		"reasoning_effort":"low","user":"user-7",
		"gpumarket":{"tier":"standard","max_ttft_ms":900},"provider":{"order":["a","b"],"allow_fallbacks":false}}`)
	if !bytes.Contains(chat, []byte("<tomorrow>")) {
		t.Fatalf("the prompt's < and > were escaped: %s", chat)
	}
}

func TestResponsesStringInput(t *testing.T) {
	chat, err := Responses{}.ToChat([]byte(`{"model":"m","input":"Hello","store":true,"text":{"format":{"type":"text"}},"tool_choice":"none"}`))
	if err != nil {
		t.Fatal(err)
	}
	sameJSONValue(t, chat, `{"model":"m","messages":[{"role":"user","content":"Hello"}],"tool_choice":"none"}`)
	chat, err = Responses{}.ToChat([]byte(`{"model":"m","input":"Hi","previous_response_id":null,"text":{"format":{"type":"json_object"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	sameJSONValue(t, chat, `{"model":"m","messages":[{"role":"user","content":"Hi"}],"response_format":{"type":"json_object"}}`)
}

func TestResponsesRefusals(t *testing.T) {
	for _, c := range []struct {
		name, body, param, code, says string
	}{
		{"a previous response", `{"model":"m","input":"Hi","previous_response_id":"resp_123"}`, "previous_response_id",
			"unsupported_parameter", "does not store responses"},
		{"a conversation", `{"model":"m","input":"Hi","conversation":"conv_1"}`, "conversation", "unsupported_parameter", "does not store"},
		{"in the background", `{"model":"m","input":"Hi","background":true}`, "background", "unsupported_parameter", "does not store"},
		{"a stored prompt", `{"model":"m","prompt":{"id":"pmpt_1"}}`, "prompt", "unsupported_parameter", "does not store"},
		{"an item reference", `{"model":"m","input":[{"type":"item_reference","id":"msg_1"}]}`, "input[0] (an item_reference)",
			"unsupported_parameter", "does not store"},
		{"a hosted tool", `{"model":"m","input":"Hi","tools":[{"type":"function","name":"f"},{"type":"web_search"}]}`, "tools[1].type",
			"unsupported_tool", `"web_search" tool`},
		{"a hosted tool choice", `{"model":"m","input":"Hi","tool_choice":{"type":"file_search"}}`, "tool_choice", "unsupported_tool", "only function tools"},
		{"no input", `{"model":"m"}`, "input", "", "input is required"},
		{"an unknown item", `{"model":"m","input":[{"type":"computer_call_output","call_id":"c"}]}`, "input[0].type",
			"unsupported_input_item", "computer_call_output"},
		{"an output without its call", `{"model":"m","input":[{"type":"function_call_output","output":"x"}]}`, "input[0]", "", "call_id"},
		{"a file", `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_id":"file_1"}]}]}`,
			"input[0].content[0].type", "unsupported_content", "input_file"},
		{"a bad role", `{"model":"m","input":[{"role":"tool","content":"x"}]}`, "input[0].role", "", "role"},
		{"bad JSON", `{"model":"m","input":`, "", "invalid_json", "could not parse"},
		{"a mistyped member", `{"model":"m","input":"Hi","tools":{"type":"function"}}`, "", "invalid_json", "tools"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Responses{}.ToChat([]byte(c.body))
			var ge *wire.Error
			if !errors.As(err, &ge) {
				t.Fatalf("error %v, want a 400", err)
			}
			if ge.Status != http.StatusBadRequest || ge.Param != c.param || ge.Code != c.code || !strings.Contains(ge.Message, c.says) {
				t.Fatalf("%d param %q code %q: %s; want 400 param %q code %q saying %q", ge.Status, ge.Param, ge.Code, ge.Message,
					c.param, c.code, c.says)
			}
			// Answered in OpenAI's error shape.
			var e wire.OpenAIError
			if json.Unmarshal(Responses{}.ErrorBody(ge), &e) != nil || e.Error.Message != ge.Message ||
				e.Error.Type != "invalid_request_error" || (c.param != "" && (e.Error.Param == nil || *e.Error.Param != c.param)) {
				t.Fatalf("error body %s", Responses{}.ErrorBody(ge))
			}
		})
	}
}

// responsesTranslation is a request's translation whose cost is a microdollar a token.
func responsesTranslation(request string) *Translation {
	return &Translation{RequestID: "req_0123abcd", Request: []byte(request), Model: "llama-3-8b",
		Created: time.Unix(1_800_000_000, 0), Cost: func(u *admission.TokenCount) (money.Pico, bool) {
			// A dollar a million tokens, a quarter of it for a cached one.
			return money.Pico(u.Input-u.Cached+u.Output)*money.PicoPerUSD/1_000_000 + money.Pico(u.Cached)*money.PicoPerUSD/4_000_000, true
		}}
}

// decodeSDKResponse decodes a Response as the official SDK does.
func decodeSDKResponse(t *testing.T, raw []byte) responses.Response {
	t.Helper()
	var r responses.Response
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("the SDK does not decode %s: %v", raw, err)
	}
	return r
}

func TestResponsesWholeAnswer(t *testing.T) {
	tr := responsesTranslation(`{"model":"llama-3-8b:standard","input":"Hi","instructions":"Be brief.","max_output_tokens":50,
		"metadata":{"k":"v"},"tools":[{"type":"function","name":"weather","parameters":{"type":"object"}}]}`)
	raw, err := Responses{}.Answer([]byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"llama-3-8b",
		"choices":[{"index":0,"message":{"role":"assistant","content":"Bonjour."},"finish_reason":"stop"}],
		"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":4},
		"completion_tokens_details":{"reasoning_tokens":1}}}`), tr)
	if err != nil {
		t.Fatal(err)
	}
	r := decodeSDKResponse(t, raw)
	if r.ID != "resp_0123abcd" || r.Object != "response" || r.Status != responses.ResponseStatusCompleted || r.CreatedAt != 1_800_000_000 ||
		r.Model != "llama-3-8b" || r.OutputText() != "Bonjour." || r.Instructions.OfString != "Be brief." || r.MaxOutputTokens != 50 ||
		r.Metadata["k"] != "v" || !r.ParallelToolCalls || r.ToolChoice.OfToolChoiceMode != "auto" || len(r.Tools) != 1 ||
		r.Tools[0].Name != "weather" || r.Temperature != 1 || r.TopP != 1 || r.CompletedAt == 0 {
		t.Fatalf("the response: %s", raw)
	}
	if len(r.Output) != 1 {
		t.Fatalf("%d output items: %s", len(r.Output), raw)
	}
	msg := r.Output[0].AsMessage()
	if msg.Type != "message" || msg.ID != "msg_0123abcd_0" || msg.Status != "completed" || msg.Role != "assistant" ||
		len(msg.Content) != 1 || msg.Content[0].Type != "output_text" || msg.Content[0].Text != "Bonjour." {
		t.Fatalf("the message item: %s", r.Output[0].RawJSON())
	}
	u := r.Usage
	if u.InputTokens != 12 || u.InputTokensDetails.CachedTokens != 4 || u.OutputTokens != 3 || u.OutputTokensDetails.ReasoningTokens != 1 ||
		u.TotalTokens != 15 {
		t.Fatalf("usage %+v", u)
	}
	// 8 fresh input and 3 output tokens at a dollar a million, 4 cached at a quarter.
	if !bytes.Contains(raw, []byte(`"total_tokens":15,"cost":0.000012000000}`)) {
		t.Fatalf("the usage does not tell the cost: %s", raw)
	}
	if !bytes.Contains(raw, []byte(`"error":null`)) || !bytes.Contains(raw, []byte(`"incomplete_details":null`)) ||
		!bytes.Contains(raw, []byte(`"store":false`)) || !bytes.Contains(raw, []byte(`"annotations":[]`)) {
		t.Fatalf("the response's null and empty members: %s", raw)
	}

	// Cut short by its length: incomplete, for max_output_tokens.
	raw, err = Responses{}.Answer([]byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":"Bon"},
		"finish_reason":"length"}],"usage":{"prompt_tokens":12,"completion_tokens":50}}`), tr)
	if err != nil {
		t.Fatal(err)
	}
	r = decodeSDKResponse(t, raw)
	if r.Status != responses.ResponseStatusIncomplete || r.IncompleteDetails.Reason != "max_output_tokens" ||
		r.Output[0].AsMessage().Status != "incomplete" || r.Usage.TotalTokens != 62 || r.CompletedAt != 0 {
		t.Fatalf("an answer cut short: %s", raw)
	}
}

func TestResponsesWholeToolCall(t *testing.T) {
	tr := responsesTranslation(`{"model":"m","input":"Weather?","tool_choice":"required",
		"tools":[{"type":"function","name":"weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]}`)
	// A tool call as the simulated backend answers one.
	raw, err := Responses{}.Answer([]byte(`{"id":"chatcmpl-2","object":"chat.completion","model":"m",
		"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_9f2e","type":"function",
		"function":{"name":"weather","arguments":"{\"city\":\"example\"}"}}]},"finish_reason":"tool_calls"}],
		"usage":{"prompt_tokens":20,"completion_tokens":9,"total_tokens":29}}`), tr)
	if err != nil {
		t.Fatal(err)
	}
	r := decodeSDKResponse(t, raw)
	if r.Status != responses.ResponseStatusCompleted || len(r.Output) != 1 || r.ToolChoice.OfToolChoiceMode != "required" {
		t.Fatalf("the response: %s", raw)
	}
	fc := r.Output[0].AsFunctionCall()
	if fc.Type != "function_call" || fc.ID != "fc_0123abcd_0" || fc.CallID != "call_9f2e" || fc.Name != "weather" ||
		fc.Arguments != `{"city":"example"}` || fc.Status != "completed" {
		t.Fatalf("the function call: %s", r.Output[0].RawJSON())
	}
}

// responsesEvent is one event of a translated stream.
type responsesEvent struct {
	name string
	data []byte
	ev   responses.ResponseStreamEventUnion
}

// readResponsesEvents splits frames into events, checking that each is an event line and a data line whose type is the
// event's name, numbered in sequence from 0, and that the SDK decodes it.
func readResponsesEvents(t *testing.T, frames []byte) []responsesEvent {
	t.Helper()
	var out []responsesEvent
	for _, f := range strings.Split(strings.TrimSuffix(string(frames), "\n\n"), "\n\n") {
		name, rest, ok := strings.Cut(f, "\n")
		data, found := strings.CutPrefix(rest, "data: ")
		if !ok || !strings.HasPrefix(name, "event: ") || !found || strings.Contains(data, "\n") {
			t.Fatalf("a frame that is not an event and its data: %q", f)
		}
		e := responsesEvent{name: strings.TrimPrefix(name, "event: "), data: []byte(data)}
		if err := json.Unmarshal(e.data, &e.ev); err != nil {
			t.Fatalf("the SDK does not decode %s: %v", data, err)
		}
		if e.ev.Type != e.name || e.ev.SequenceNumber != int64(len(out)) {
			t.Fatalf("event %q, data of type %q numbered %d; want number %d", e.name, e.ev.Type, e.ev.SequenceNumber, len(out))
		}
		out = append(out, e)
	}
	return out
}

// translateResponsesStream feeds chunks to a stream translator and returns all it sent.
func translateResponsesStream(t *testing.T, tr *Translation, chunks ...string) []byte {
	t.Helper()
	s := Responses{}.Stream(tr)
	var all []byte
	for _, c := range chunks {
		out, err := s.Chunk([]byte(c))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, out...)
	}
	return append(all, s.End()...)
}

func responsesEventNames(events []responsesEvent) []string {
	names := make([]string, len(events))
	for i, e := range events {
		names[i] = e.name
	}
	return names
}

func TestResponsesStreamOfText(t *testing.T) {
	tr := responsesTranslation(`{"model":"llama-3-8b","input":"Hi","stream":true}`)
	events := readResponsesEvents(t, translateResponsesStream(t, tr,
		`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}`,
		`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}],"usage":null}`,
		`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"lo."},"finish_reason":null}],"usage":null}`,
		`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`,
		`{"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}`))
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.delta", "response.output_text.done", "response.content_part.done",
		"response.output_item.done", "response.completed"}
	if got := responsesEventNames(events); !reflect.DeepEqual(got, want) {
		t.Fatalf("events %v\nwant %v", got, want)
	}
	if created := events[0].ev.AsResponseCreated().Response; created.ID != "resp_0123abcd" || created.Status != "in_progress" ||
		len(created.Output) != 0 {
		t.Fatalf("response.created: %s", events[0].data)
	}
	if d := events[4].ev.AsResponseOutputTextDelta(); d.Delta != "Hel" || d.ItemID != "msg_0123abcd_0" || d.OutputIndex != 0 {
		t.Fatalf("the first delta: %s", events[4].data)
	}
	if d := events[6].ev.AsResponseOutputTextDone(); d.Text != "Hello." {
		t.Fatalf("the text's end: %s", events[6].data)
	}
	if item := events[8].ev.AsResponseOutputItemDone().Item.AsMessage(); item.Status != "completed" || item.Content[0].Text != "Hello." {
		t.Fatalf("the message's end: %s", events[8].data)
	}
	r := events[9].ev.AsResponseCompleted().Response
	if r.Status != "completed" || r.OutputText() != "Hello." || r.Usage.InputTokens != 7 || r.Usage.OutputTokens != 2 ||
		r.Usage.TotalTokens != 9 || !strings.Contains(r.Usage.RawJSON(), `"cost":0.000009000000`) {
		t.Fatalf("response.completed: %s", events[9].data)
	}

	// Cut short by its length: it ends with response.incomplete.
	events = readResponsesEvents(t, translateResponsesStream(t, tr,
		`{"choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`,
		`{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":1}}`))
	last := events[len(events)-1]
	if r := last.ev.AsResponseIncomplete().Response; last.name != "response.incomplete" || r.Status != "incomplete" ||
		r.IncompleteDetails.Reason != "max_output_tokens" || r.Usage.OutputTokens != 1 || r.Output[0].AsMessage().Status != "incomplete" {
		t.Fatalf("the end of a stream cut short: %s %s", last.name, last.data)
	}
}

func TestResponsesStreamOfToolCall(t *testing.T) {
	tr := responsesTranslation(`{"model":"m","input":"Weather?","stream":true,"tools":[{"type":"function","name":"weather"}]}`)
	// A tool call streamed as OpenAI streams one, and as the simulated backend does: the call's id and name first,
	// then its arguments in pieces.
	events := readResponsesEvents(t, translateResponsesStream(t, tr,
		`{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_77","type":"function",
			"function":{"name":"weather","arguments":""}}]},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"example\"}"}}]},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		`{"choices":[],"usage":{"prompt_tokens":30,"completion_tokens":8,"total_tokens":38}}`))
	want := []string{"response.created", "response.in_progress", "response.output_item.added",
		"response.function_call_arguments.delta", "response.function_call_arguments.delta", "response.function_call_arguments.done",
		"response.output_item.done", "response.completed"}
	if got := responsesEventNames(events); !reflect.DeepEqual(got, want) {
		t.Fatalf("events %v\nwant %v", got, want)
	}
	if item := events[2].ev.AsResponseOutputItemAdded().Item.AsFunctionCall(); item.CallID != "call_77" || item.Name != "weather" ||
		item.ID != "fc_0123abcd_0" || item.Status != "in_progress" {
		t.Fatalf("the call's start: %s", events[2].data)
	}
	if d := events[3].ev.AsResponseFunctionCallArgumentsDelta(); d.Delta != `{"city":` || d.ItemID != "fc_0123abcd_0" {
		t.Fatalf("the first arguments: %s", events[3].data)
	}
	if d := events[5].ev.AsResponseFunctionCallArgumentsDone(); d.Arguments != `{"city":"example"}` {
		t.Fatalf("the arguments' end: %s", events[5].data)
	}
	r := events[7].ev.AsResponseCompleted().Response
	if len(r.Output) != 1 || r.Usage.OutputTokens != 8 {
		t.Fatalf("response.completed: %s", events[7].data)
	}
	if fc := r.Output[0].AsFunctionCall(); fc.Type != "function_call" || fc.CallID != "call_77" || fc.Name != "weather" ||
		fc.Arguments != `{"city":"example"}` || fc.Status != "completed" {
		t.Fatalf("the call in the response: %s", r.Output[0].RawJSON())
	}

	// Text, then two calls: each item closes before the next opens.
	events = readResponsesEvents(t, translateResponsesStream(t, tr,
		`{"choices":[{"index":0,"delta":{"content":"Checking."}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"weather","arguments":"{}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","function":{"name":"time","arguments":"{}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`))
	want = []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.output_item.done", "response.completed"}
	if got := responsesEventNames(events); !reflect.DeepEqual(got, want) {
		t.Fatalf("events %v\nwant %v", got, want)
	}
	r = events[len(events)-1].ev.AsResponseCompleted().Response
	if len(r.Output) != 3 || r.OutputText() != "Checking." || r.Output[1].AsFunctionCall().CallID != "call_1" ||
		r.Output[2].AsFunctionCall().Name != "time" || r.Output[2].AsFunctionCall().ID != "fc_0123abcd_2" {
		t.Fatalf("response.completed: %s", events[len(events)-1].data)
	}
}
